//! The example plugin as a real process with real environment variables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn example() -> PathBuf {
    // Integration tests live in target/<profile>/deps; cargo builds examples beside them.
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("examples/passthrough");
    if !path.exists() {
        // Only `cargo test` without a target filter builds examples; build it when run alone.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo).args(["build", "-q", "-p", "cni-skel", "--example", "passthrough"]).status();
        assert!(ok.unwrap().success(), "building the example failed");
    }
    path
}

fn call(env: &[(&str, &str)], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(example())
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A plugin may exit before reading stdin (VERSION, missing variables): EPIPE is fine.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const ADD: &[(&str, &str)] = &[
    ("CNI_COMMAND", "ADD"),
    ("CNI_CONTAINERID", "ctr1"),
    ("CNI_NETNS", "/nonexistent/netns"),
    ("CNI_IFNAME", "eth0"),
    ("CNI_PATH", "/nonexistent"),
];

#[test]
fn version_about_add_and_errors_from_a_real_process() {
    let (code, out, _) = call(&[("CNI_COMMAND", "VERSION")], "");
    assert_eq!(code, 0);
    assert_eq!(out, "{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"0.1.0\",\"0.2.0\",\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n");

    let (code, out, err) = call(&[], "");
    assert_eq!((code, out.as_str()), (0, ""));
    assert!(err.starts_with("braid example passthrough plugin\nCNI protocol versions supported: 0.1.0"), "{err}");

    // A 1.0.0 prevResult under a 1.1.0 config is printed as 1.1.0.
    let conf = r#"{"cniVersion":"1.1.0","name":"n","type":"passthrough","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"198.18.0.5/24"}]}}"#;
    let (code, out, _) = call(ADD, conf);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out, "{\n    \"cniVersion\": \"1.1.0\",\n    \"ips\": [\n        {\n            \"address\": \"198.18.0.5/24\"\n        }\n    ]\n}");

    let (code, out, _) = call(ADD, r#"{"cniVersion":"1.1.0","name":"n","type":"passthrough"}"#);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "{\n    \"code\": 7,\n    \"msg\": \"prevResult is missing: this plugin must be chained after another plugin in a conflist\"\n}"
    );

    let (code, out, _) = call(&ADD[..4], "{}");
    assert_eq!(code, 1);
    assert!(out.contains("required env variables [CNI_PATH] missing"), "{out}");
}
