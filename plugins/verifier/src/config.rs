//! The verifier's configuration keys (every one optional: the verifier works with none).

use crate::verify::{Options, RouteChecks};
use cni_skel::keys;
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::{CniError, NetConf};
use serde_json::Value;
use std::time::Duration;

/// The default settle time: long enough for IPv6 duplicate address detection on a fresh veth
/// (up to 1 s random delay plus 1 s probe), short enough that a real mismatch fails quickly.
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(2500);

/// The upper bound on `settleMs`: a runtime's CHECK must come back.
pub const MAX_SETTLE: Duration = Duration::from_secs(60);

/// What ADD does with a mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddMode {
    /// Fail the ADD (the runtime then DELs the chain).
    Enforce,
    /// Log the mismatches and pass prevResult on.
    Warn,
}

/// The parsed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The whole configuration (prevResult, logging keys).
    pub conf: std::sync::Arc<NetConf>,
    /// `addMode`.
    pub add_mode: AddMode,
    /// `checkHost` and `routeChecks`.
    pub options: Options,
    /// `settleMs`.
    pub settle: Duration,
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, msg)
}

impl Config {
    /// Parses stdin; a key of the wrong type or value is code 7 naming the key.
    #[cfg(test)]
    pub fn parse(stdin: &[u8]) -> Result<Config, CniError> {
        let conf = NetConf::parse(stdin).map_err(|e| {
            CniError::new(cni_types::error::DECODING_FAILURE, format!("failed to parse network configuration: {e}"))
        })?;
        Config::of(std::sync::Arc::new(conf))
    }

    /// The verifier's keys of a parsed configuration (the call's, parsed once by the skel);
    /// a key of the wrong type or value is code 7 naming the key.
    pub fn of(conf: std::sync::Arc<NetConf>) -> Result<Config, CniError> {
        let add_mode = keys::choice(
            &conf,
            "addMode",
            &[("enforce", AddMode::Enforce), ("warn", AddMode::Warn)],
            AddMode::Enforce,
        )?;
        let check_host = keys::flag(&conf, "checkHost", true)?;
        let routes = keys::choice(
            &conf,
            "routeChecks",
            &[("full", RouteChecks::Full), ("upstream", RouteChecks::Upstream)],
            RouteChecks::Full,
        )?;
        let settle = match conf.get("settleMs") {
            None | Some(Value::Null) => DEFAULT_SETTLE,
            Some(v) => match v.as_u64().map(Duration::from_millis) {
                Some(d) if d <= MAX_SETTLE => d,
                _ => {
                    return Err(invalid(format!(
                        "settleMs must be a whole number of milliseconds from 0 to {}, not {v}",
                        MAX_SETTLE.as_millis()
                    )))
                }
            },
        };
        Ok(Config { conf, add_mode, options: Options { check_host, routes }, settle })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_need_no_keys() {
        let c = Config::parse(br#"{"cniVersion":"1.1.0","name":"n","type":"verifier"}"#).unwrap();
        assert_eq!(c.add_mode, AddMode::Enforce);
        assert_eq!(c.options, Options { check_host: true, routes: RouteChecks::Full });
        assert_eq!(c.settle, DEFAULT_SETTLE);
    }

    #[test]
    fn bad_keys_are_named() {
        for (conf, key) in [
            (r#"{"addMode":"loud"}"#, "addMode"),
            (r#"{"checkHost":"yes"}"#, "checkHost"),
            (r#"{"routeChecks":1}"#, "routeChecks"),
            (r#"{"settleMs":-1}"#, "settleMs"),
            (r#"{"settleMs":600000}"#, "settleMs"),
        ] {
            let mut v: Value = serde_json::from_str(conf).unwrap();
            v["cniVersion"] = "1.0.0".into();
            v["name"] = "n".into();
            let e = Config::parse(v.to_string().as_bytes()).unwrap_err();
            assert_eq!(e.code, INVALID_NETWORK_CONFIG);
            assert!(e.msg.starts_with(key), "{}", e.msg);
        }
    }

    #[test]
    fn keys_are_read() {
        let c = Config::parse(
            br#"{"cniVersion":"1.0.0","name":"n","addMode":"warn","checkHost":false,"routeChecks":"upstream","settleMs":0}"#,
        )
        .unwrap();
        assert_eq!(c.add_mode, AddMode::Warn);
        assert_eq!(c.options, Options { check_host: false, routes: RouteChecks::Upstream });
        assert_eq!(c.settle, Duration::ZERO);
    }
}
