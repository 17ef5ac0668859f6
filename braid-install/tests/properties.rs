//! The ConfigMap mirror against outside input: keys and definitions of any shape (mutated
//! conflists, hostile names), and a tampered record of what it wrote. Whatever comes, a pass
//! ends, writes only `<namespace>/<name>.conflist` files that are conflists of that name under
//! networksDir, and touches nothing outside it. Few, small cases: bounded time in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_install::mirror::{parse_key, Mirror, MANIFEST};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

#[path = "../../cni-skel/tests/common/inputs.rs"]
mod inputs;

fn label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A ConfigMap key: mostly `<namespace>.<name>.conflist`, sometimes not.
fn key() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        4 => prop::sample::select(vec!["default", "team-a", "storage", "net1"]).prop_map(String::from),
        1 => "[a-zA-Z0-9._-]{0,8}",
    ];
    let ext = prop_oneof![4 => Just(".conflist"), 1 => prop::sample::select(vec![".conf", ".conflist.tmp", ""])];
    // Both shapes can spell `.` or `..` (two empty parts and no extension): not a file name a
    // ConfigMap could hold, and writing it fails — filtered from both, not only the second.
    prop_oneof![
        5 => (part.clone(), part, ext).prop_map(|(a, b, e)| format!("{a}.{b}{e}")),
        1 => "[ -.0-~]{1,16}",
    ]
    .prop_filter("a file name", |s| s != "." && s != "..")
}

/// A definition for `name`: a conflist with or without the name, any version, maybe mutated.
fn definition() -> impl Strategy<Value = Vec<u8>> {
    let plausible = (
        prop::option::of(prop::sample::select(vec!["default", "storage", "other"])),
        prop::sample::select(vec!["1.0.0", "0.4.0", "1.1.0"]),
        prop::collection::vec(prop::sample::select(vec!["ptp", "bridge", "tuning"]), 1..3),
    )
        .prop_map(|(n, v, types)| {
            let plugins: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
            let mut c = json!({"cniVersion": v, "plugins": plugins});
            if let Some(n) = n {
                c["name"] = json!(n);
            }
            c
        });
    inputs::mutated_one_in(
        prop_oneof![
            4 => plausible,
            3 => (prop::option::of(prop::sample::select(vec!["default", "storage", "other"])), inputs::conflist()).prop_map(|(n, mut c)| {
                if let (Some(n), Value::Object(o)) = (n, &mut c) {
                    o.insert("name".into(), json!(n));
                }
                c
            }),
            1 => inputs::value(),
        ],
        12,
    )
}

fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_key_names_a_namespace_and_a_network_or_is_refused(k in "[ -~]{0,24}") {
        if let Ok((ns, name)) = parse_key(&k) {
            prop_assert!(label(ns) && label(name), "{k:?}");
            prop_assert_eq!(format!("{ns}.{name}.conflist"), k);
        }
    }

    #[test]
    fn a_pass_writes_only_conflists_named_by_their_key_and_nothing_outside_networks_dir(
        keys in prop::collection::btree_map(key(), definition(), 0..5),
        manifest in prop::option::of(prop_oneof![
            Just(json!(["default/gone.conflist", "../../canary", "/etc/passwd", "default/../../canary", ".braid-install-mirror.json"])),
            inputs::value(),
        ]),
    ) {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir().join(format!("braid-mirror-props-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&base);
        let (cm, networks) = (base.join("configmap"), base.join("out/networks"));
        std::fs::create_dir_all(&cm).unwrap();
        std::fs::create_dir_all(&networks).unwrap();
        std::fs::write(base.join("canary"), b"canary").unwrap();
        std::fs::write(base.join("out/canary"), b"canary").unwrap();
        for (k, bytes) in &keys {
            std::fs::write(cm.join(k), bytes).unwrap();
        }
        if let Some(m) = &manifest {
            std::fs::write(networks.join(MANIFEST), serde_json::to_vec(m).unwrap()).unwrap();
        }
        let outcome = Mirror::default().sync(&cm, &networks, &braid_install::owners::Owners::default());
        let written = files(&networks);
        let canaries = (std::fs::read(base.join("canary")).ok(), std::fs::read(base.join("out/canary")).ok());
        let _ = std::fs::remove_dir_all(&base);
        prop_assert!(outcome.is_ok(), "{outcome:?}");
        prop_assert_eq!(canaries, (Some(b"canary".to_vec()), Some(b"canary".to_vec())));
        for f in written.iter().filter(|f| *f != MANIFEST) {
            let (ns, file) = f.split_once('/').unwrap_or_else(|| panic!("{f}: not <namespace>/<name>.conflist"));
            let name = file.strip_suffix(".conflist").unwrap_or_else(|| panic!("{f}"));
            prop_assert!(label(ns) && label(name), "{f}");
            let key = format!("{ns}.{name}.conflist");
            let bytes = &keys[&key];
            let out = braid_install::mirror::check_definition(name, bytes).unwrap();
            let list = cni_types::NetConfList::parse(&out).unwrap();
            prop_assert_eq!(list.name.as_str(), name);
        }
    }
}
