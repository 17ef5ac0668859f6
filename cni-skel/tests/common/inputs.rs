//! Outside input for property tests, shared by the crates whose parsers take it (included with
//! `#[path]`): JSON values of every shape, network configurations and conflists, results (as
//! `prevResult`), `CNI_ARGS` — each mostly plausible, sometimes anything, and then mutated at
//! the byte level (a byte changed, the text cut short, a byte inserted) the way a truncated
//! write or a hostile file would.
//!
//! Sizes are small on purpose: every property runs in bounded time in CI.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::sample::{select, Index};
use serde_json::{json, Map, Value};

/// Versions a runtime sends, and some it must not.
pub const VERSIONS: &[&str] =
    &["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", "", "1.0", "9.9.9", "1.0.0 ", "v1.0.0"];

/// Names as they come: good ones, and the kinds a parser must refuse.
pub const NAMES: &[&str] = &["net", "a-b.c_d", "", "../x", "a/b", "n e t", "é", ".", "..", "x@y", "-"];

/// Plugin types, good and bad.
pub const TYPES: &[&str] = &["ptp", "bridge", "", "../ptp", "/usr/lib/cni/ptp", "a b", "braid-fault"];

/// Text of a few characters, printable ASCII and some that are not.
pub fn text() -> impl Strategy<Value = String> {
    "[ -~é\u{0}\u{a0}\n]{0,12}"
}

/// A JSON scalar.
pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        text().prop_map(Value::from),
    ]
}

/// Any JSON value, nested at most three deep.
pub fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// One of `plausible` most of the time, any value otherwise.
pub fn either(plausible: Vec<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![3 => select(plausible), 1 => value()]
}

fn strings(items: &[&str]) -> Vec<Value> {
    items.iter().map(|s| Value::from(*s)).collect()
}

/// A version value.
pub fn version() -> impl Strategy<Value = Value> {
    either(strings(VERSIONS))
}

/// An object of `keys` (each `Some` kept), plus up to two keys of anything.
fn object(keys: Vec<(&'static str, Option<Value>)>, extra: Vec<(String, Value)>) -> Value {
    let mut m: Map<String, Value> = keys.into_iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v))).collect();
    m.extend(extra);
    Value::Object(m)
}

fn extra() -> impl Strategy<Value = Vec<(String, Value)>> {
    prop::collection::vec((text(), value()), 0..2)
}

/// A result of any version, as a plugin prints it (and as `prevResult` comes back).
pub fn result() -> impl Strategy<Value = Value> {
    let iface = (
        prop::option::of(either(strings(&["eth0", "net1", "", "a/b"]))),
        prop::option::of(either(strings(&["02:42:c6:12:00:02", "", "zz"]))),
        prop::option::of(either(strings(&["/run/netns/x", ""]))),
    )
        .prop_map(|(n, m, s)| object(vec![("name", n), ("mac", m), ("sandbox", s)], vec![]));
    let ip = (
        prop::option::of(either(strings(&["198.18.0.2/24", "2001:db8::2/64", "198.18.0.2", "x"]))),
        prop::option::of(either(strings(&["198.18.0.1", "::1", ""]))),
        prop::option::of(either(vec![json!(0), json!(1), json!(-1), json!(99)])),
        prop::option::of(either(strings(&["4", "6", ""]))),
    )
        .prop_map(|(a, g, i, v)| {
            object(vec![("address", a), ("gateway", g), ("interface", i), ("version", v)], vec![])
        });
    let route = (
        prop::option::of(either(strings(&["0.0.0.0/0", "198.19.0.0/16", "::/0", "x"]))),
        prop::option::of(either(strings(&["198.18.0.1", ""]))),
    )
        .prop_map(|(d, g)| object(vec![("dst", d), ("gw", g)], vec![]));
    (
        prop::option::of(version()),
        prop::option::of(prop::collection::vec(iface, 0..3).prop_map(Value::Array)),
        prop::option::of(prop::collection::vec(ip, 0..3).prop_map(Value::Array)),
        prop::option::of(prop::collection::vec(route, 0..3).prop_map(Value::Array)),
        prop::option::of(value()),
        prop::option::of(either(vec![json!({"address": "198.18.0.2/24"})])),
        extra(),
    )
        .prop_map(|(v, i, a, r, d, ip4, x)| {
            object(vec![("cniVersion", v), ("interfaces", i), ("ips", a), ("routes", r), ("dns", d), ("ip4", ip4)], x)
        })
}

/// One plugin's configuration as a runtime sends it (or as a conflist holds it).
pub fn plugin_conf() -> impl Strategy<Value = Value> {
    (
        prop::option::of(version()),
        prop::option::of(either(strings(NAMES))),
        prop::option::of(either(strings(TYPES))),
        prop::option::of(result()),
        prop::option::of(either(vec![json!({"mac": "02:00:00:00:00:01"}), json!({"portMappings": []})])),
        prop::option::of(either(vec![json!({"mac": true}), json!({"ips": false})])),
        prop::option::of(either(vec![json!({"cni": {"ips": ["198.18.0.9/24"]}})])),
        prop::option::of(either(vec![json!({"type": "host-local", "subnet": "198.18.0.0/24"})])),
        extra(),
    )
        .prop_map(|(v, n, t, p, rc, caps, args, ipam, x)| {
            object(
                vec![
                    ("cniVersion", v),
                    ("name", n),
                    ("type", t),
                    ("prevResult", p),
                    ("runtimeConfig", rc),
                    ("capabilities", caps),
                    ("args", args),
                    ("ipam", ipam),
                ],
                x,
            )
        })
}

/// A conflist.
pub fn conflist() -> impl Strategy<Value = Value> {
    (
        prop::option::of(version()),
        prop::option::of(either(strings(NAMES))),
        prop::option::of(
            prop_oneof![3 => prop::collection::vec(plugin_conf(), 0..3).prop_map(Value::Array), 1 => value()],
        ),
        prop::option::of(any::<bool>().prop_map(Value::from)),
        extra(),
    )
        .prop_map(|(v, n, p, d, x)| {
            object(vec![("cniVersion", v), ("name", n), ("plugins", p), ("disableCheck", d)], x)
        })
}

/// `CNI_ARGS`: pairs, good and bad, joined with `;`.
pub fn cni_args() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        select(vec!["IgnoreUnknown", "K8S_POD_NAMESPACE", "K8S_POD_NAME", "IP", "MAC"]).prop_map(String::from),
        "[A-Za-z_=;]{0,6}"
    ];
    let val = prop_oneof![
        select(vec!["1", "true", "team-a", "web-0", "198.18.0.9", "", "a=b"]).prop_map(String::from),
        "[ -~]{0,8}"
    ];
    prop::collection::vec(prop_oneof![(key, val).prop_map(|(k, v)| format!("{k}={v}")), "[ -~]{0,6}"], 0..4)
        .prop_map(|pairs| pairs.join(";"))
}

/// `v` serialised, then maybe mutated (three times in five): a byte changed, the text cut
/// short, or a byte inserted.
pub fn mutated(v: impl Strategy<Value = Value>) -> impl Strategy<Value = Vec<u8>> {
    mutated_one_in(v, 5)
}

/// [`mutated`], mutating three times in `n`: for properties that need whole inputs often.
pub fn mutated_one_in(v: impl Strategy<Value = Value>, n: u8) -> impl Strategy<Value = Vec<u8>> {
    (v, 0u8..n.max(3), any::<Index>(), any::<u8>()).prop_map(|(v, op, at, byte)| {
        let mut bytes = serde_json::to_vec(&v).unwrap_or_default();
        if bytes.is_empty() {
            return bytes;
        }
        let i = at.index(bytes.len());
        match op {
            0 => bytes[i] = byte,
            1 => bytes.truncate(i),
            2 => bytes.insert(i, byte),
            _ => {}
        }
        bytes
    })
}
