//! The sysctl example through cni-skel's testing kit: the protocol in-process without root,
//! and the real thing in a temporary namespace.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use cni_skel::cni_types::version::Command;
use cni_skel::serde_json::{json, Value};
use cni_skel::testing::{cmd, require_root, TempNetns};
use sysctl::{Sysctl, MISMATCH};

fn conf(sysctls: Value) -> Value {
    json!({"cniVersion": "1.0.0", "name": "net", "type": "sysctl", "sysctls": sysctls,
           "prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "198.18.0.2/24"}]}})
}

#[test]
fn version_lists_every_spec_version() {
    let out = cmd(Command::Version).run(&Sysctl);
    out.success();
    assert!(out.stdout.contains("\"1.1.0\"") && out.stdout.contains("\"0.1.0\""), "{}", out.stdout);
}

#[test]
fn add_needs_prev_result() {
    let mut c = conf(json!({}));
    c.as_object_mut().unwrap().remove("prevResult");
    let e = cmd(Command::Add).config(&c).run(&Sysctl).error();
    assert_eq!(e.code, 7);
    assert!(e.msg.starts_with("prevResult is missing"), "{e}");
}

#[test]
fn only_net_keys_are_accepted() {
    for key in ["kernel.hostname", "net..ipv4", "net/../../kernel/x", "net.ipv4.conf.IFNAME/x"] {
        let e = cmd(Command::Add).config(&conf(json!({ key: "1" }))).run(&Sysctl).error();
        assert_eq!(e.code, 7, "{key}");
        assert!(e.msg.contains(key) || e.msg.contains("not a net.* sysctl"), "{key}: {e}");
    }
}

#[test]
fn a_value_of_the_wrong_type_names_the_key() {
    let e = cmd(Command::Add).config(&conf(json!({"net.ipv4.ip_forward": 1}))).run(&Sysctl).error();
    assert_eq!(e.code, 7);
    assert_eq!(
        e.msg,
        "invalid network configuration: sysctls.net.ipv4.ip_forward: invalid type: integer `1`, expected a string"
    );
}

#[test]
fn prev_result_is_passed_on_in_the_configurations_version() {
    // No sysctls: nothing to enter, so the absent default namespace is fine.
    let mut c = conf(json!({}));
    c["cniVersion"] = "0.4.0".into();
    c["prevResult"] = json!({"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "198.18.0.2/24"}]});
    let out = cmd(Command::Add).config(&c).run(&Sysctl);
    assert_eq!(out.any_result().version(), "0.4.0");
    assert_eq!(out.result().ips[0].address.to_string(), "198.18.0.2/24");
}

#[test]
fn del_always_succeeds_and_check_needs_0_4_0() {
    cmd(Command::Del).config(&conf(json!({"net.ipv4.ip_forward": "1"}))).run(&Sysctl).success();
    let mut c = conf(json!({}));
    c["cniVersion"] = "0.3.1".into();
    let e = cmd(Command::Check).config(&c).run(&Sysctl).error();
    assert_eq!(e.code, 1, "{e}");
}

#[test]
fn sets_checks_and_detects_tampering_in_a_real_namespace() {
    if !require_root("sets_checks_and_detects_tampering_in_a_real_namespace") {
        return;
    }
    let ns = TempNetns::new("sysctl");
    ns.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"]);
    let host_forward = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    let c = conf(json!({"net.ipv4.conf.IFNAME.arp_notify": "1", "net/ipv4/ip_forward": "1"}));
    let add = cmd(Command::Add).netns(ns.path()).config(&c).run(&Sysctl);
    assert_eq!(add.result().ips[0].address.to_string(), "198.18.0.2/24");
    let read = |k: &str| ns.exec(&["cat", &format!("/proc/sys/{k}")]).trim().to_string();
    assert_eq!(read("net/ipv4/conf/eth0/arp_notify"), "1");
    assert_eq!(read("net/ipv4/ip_forward"), "1");
    assert_eq!(std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap(), host_forward, "host untouched");
    cmd(Command::Check).netns(ns.path()).config(&c).run(&Sysctl).success();
    ns.exec(&["sh", "-c", "echo 0 > /proc/sys/net/ipv4/conf/eth0/arp_notify"]);
    let e = cmd(Command::Check).netns(ns.path()).config(&c).run(&Sysctl).error();
    assert_eq!(e.code, MISMATCH);
    assert_eq!(e.details, "net.ipv4.conf.IFNAME.arp_notify is 0, expected 1");
    cmd(Command::Del).netns(ns.path()).config(&c).run(&Sysctl).success();
}
