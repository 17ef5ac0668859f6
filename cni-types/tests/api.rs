//! The plugin-author API of cni-types: one source of truth in `NetConf`, typed plugin keys,
//! `require_prev_result`, and errors that convert into `CniError` with their codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_types::error::{DECODING_FAILURE, INCOMPATIBLE_CNI_VERSION, INVALID_NETWORK_CONFIG};
use cni_types::{CniError, Context, NetConf};
use serde::Deserialize;
use std::collections::BTreeMap;

fn conf(json: &str) -> NetConf {
    NetConf::parse(json.as_bytes()).unwrap()
}

#[test]
fn edits_reach_both_the_typed_view_and_the_bytes_sent() {
    let mut c = conf(r#"{"cniVersion":"1.0.0","name":"n","type":"bridge","capabilities":{"mac":true}}"#);
    c.set("type", "macvlan".into());
    c.set("capabilities", serde_json::json!({"ips": true}));
    c.set("ipam", serde_json::json!({"type": "static"}));
    assert_eq!(c.plugin_type(), "macvlan");
    assert_eq!(c.capabilities().keys().collect::<Vec<_>>(), ["ips"]);
    assert_eq!(c.ipam_type(), Some("static"));
    let sent = NetConf::parse(&c.to_bytes()).unwrap();
    assert_eq!((sent.plugin_type(), sent.ipam_type()), ("macvlan", Some("static")));
    c.remove("ipam");
    assert_eq!(c.ipam_type(), None);
    // A wrong kind is still sent as set, and reads as absent.
    c.set("capabilities", 5.into());
    assert!(c.capabilities().is_empty());
    assert_eq!(c.get("capabilities"), Some(&serde_json::json!(5)));
    assert_eq!(c.plugin_type(), "macvlan");
}

#[derive(Debug, Deserialize, PartialEq)]
struct Sysctl {
    sysctls: BTreeMap<String, String>,
    #[serde(default)]
    strict: bool,
}

#[test]
fn plugin_config_types_the_plugins_own_keys_and_names_a_bad_one() {
    let c = conf(r#"{"cniVersion":"1.0.0","name":"n","type":"sysctl","sysctls":{"net.ipv4.ip_forward":"1"}}"#);
    let s: Sysctl = c.plugin_config().unwrap();
    assert_eq!(s.sysctls["net.ipv4.ip_forward"], "1");
    assert!(!s.strict);
    let e = conf(r#"{"name":"n","sysctls":{"a":1}}"#).plugin_config::<Sysctl>().unwrap_err();
    assert_eq!(e.code, INVALID_NETWORK_CONFIG);
    assert_eq!(e.msg, "invalid network configuration: sysctls.a: invalid type: integer `1`, expected a string");
    let e = conf(r#"{"name":"n","sysctls":{},"strict":"yes"}"#).plugin_config::<Sysctl>().unwrap_err();
    assert_eq!(e.msg, "invalid network configuration: strict: invalid type: string \"yes\", expected a boolean");
    let e = conf(r#"{"name":"n"}"#).plugin_config::<Sysctl>().unwrap_err();
    assert_eq!(e.msg, "invalid network configuration: missing field `sysctls`");
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Delegate {
    #[serde(rename = "type")]
    _plugin: String,
    #[serde(default)]
    _ifname: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Meta {
    _delegates: Vec<Delegate>,
}

#[test]
fn plugin_config_names_the_exact_path_inside_lists_and_objects() {
    let meta = |json: &str| conf(json).plugin_config::<Meta>().unwrap_err().msg;
    assert_eq!(
        meta(r#"{"_delegates":[{"type":"bridge"},{"type":"ptp","_ifname":7}]}"#),
        "invalid network configuration: _delegates[1]._ifname: invalid type: integer `7`, expected a string"
    );
    assert_eq!(
        meta(r#"{"_delegates":[{"type":"bridge"},{}]}"#),
        "invalid network configuration: _delegates[1]: missing field `type`"
    );
    assert_eq!(
        meta(r#"{"_delegates":[{"type":"bridge","x":1}]}"#),
        "invalid network configuration: _delegates[0]: unknown field `x`, expected `type` or `_ifname`"
    );
}

#[test]
fn require_prev_result_follows_the_configuration_family() {
    let chained = conf(r#"{"cniVersion":"1.0.0","name":"n","prevResult":{"ips":[{"address":"198.18.0.2/24"}]}}"#);
    let prev = chained.require_prev_result().unwrap();
    assert_eq!(prev.ips[0].address.to_string(), "198.18.0.2/24");
    let e = conf(r#"{"cniVersion":"1.0.0","name":"n"}"#).require_prev_result().unwrap_err();
    assert_eq!(e.code, INVALID_NETWORK_CONFIG);
    assert!(e.msg.starts_with("prevResult is missing"), "{e}");
    let e = conf(r#"{"cniVersion":"0.4.0","name":"n","prevResult":{"cniVersion":"1.0.0"}}"#)
        .require_prev_result()
        .unwrap_err();
    assert_eq!(e.code, DECODING_FAILURE);
    assert!(e.msg.contains("result type supports [0.3.0 0.3.1 0.4.0]"), "{e}");
}

#[test]
fn errors_convert_with_their_codes_and_take_context() {
    fn parse(bytes: &[u8]) -> Result<NetConf, CniError> {
        Ok(NetConf::parse(bytes)?)
    }
    let e = parse(b"{").unwrap_err();
    assert_eq!(e.code, DECODING_FAILURE);
    let e: CniError = cni_types::version::reconcile("0.9.0", &["1.0.0"]).unwrap_err().into();
    assert_eq!(
        (e.code, e.details.as_str()),
        (INCOMPATIBLE_CNI_VERSION, r#"config is "0.9.0", plugin supports ["1.0.0"]"#)
    );
    let e =
        cni_types::NetConfList::parse(br#"{"name":"x","plugins":[{"name":"y"}]}"#).context("delegates[0]").unwrap_err();
    assert_eq!(e.code, INVALID_NETWORK_CONFIG);
    assert!(e.msg.starts_with("delegates[0]: "), "{e}");
    let e = cni_types::Mac::parse("zz").code(cni_types::error::INVALID_ENVIRONMENT_VARIABLES).unwrap_err();
    assert_eq!(e.code, 4);
}
