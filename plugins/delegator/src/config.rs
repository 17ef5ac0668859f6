//! The delegator's configuration and the attachment plan, validated before anything runs.

use braid_attach::attach::Delegate;
use cni_types::error::{DECODING_FAILURE, INVALID_NETWORK_CONFIG};
use cni_types::{CniError, NetConf};
use std::path::PathBuf;
use std::time::Duration;

/// Which result ADD returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultMode {
    /// The first delegate's result (Kubernetes-safe: one data plane).
    Primary,
    /// Every delegate's result merged (VM runtimes).
    Merged,
}

/// The parsed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The delegator's own configuration.
    pub conf: NetConf,
    /// `delegates`, resolved, in order, with their interface names.
    pub delegates: Vec<Delegate>,
    /// `stateDir`.
    pub state_dir: PathBuf,
    /// `result`.
    pub result: ResultMode,
    /// `timeout` (seconds) for each delegate call.
    pub timeout: Duration,
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, msg)
}

impl Config {
    /// Parses and resolves the configuration; `ifname` is our `CNI_IFNAME` (the first
    /// delegate's interface).
    pub fn parse(stdin: &[u8], ifname: &str) -> Result<Config, CniError> {
        let conf = NetConf::parse(stdin).map_err(|e| CniError::new(DECODING_FAILURE, e.to_string()))?;
        let state_dir = braid_attach::delegates::state_dir(&conf, "/var/lib/cni/delegator")?;
        let result = cni_skel::keys::choice(
            &conf,
            "result",
            &[("primary", ResultMode::Primary), ("merged", ResultMode::Merged)],
            ResultMode::Primary,
        )?;
        let timeout = braid_attach::delegates::timeout(&conf)?;
        let first = ifname.to_string();
        let delegates =
            braid_attach::delegates::parse(&conf, &|i| if i == 0 { first.clone() } else { format!("net{i}") })?;
        let cfg = Config { conf, delegates, state_dir, result, timeout };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the plan: plugin types, interface names, and that the result can be expressed.
    fn validate(&self) -> Result<(), CniError> {
        if self.result == ResultMode::Merged {
            cni_types::merge::check_expressible(self.conf.version(), self.delegates.len())
                .map_err(|e| invalid(e.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_mode_of_the_wrong_kind_is_named_not_defaulted() {
        let conf = |result: &str| {
            format!(
                r#"{{"cniVersion":"1.0.0","name":"n","type":"delegator","result":{result},"delegates":[{{"type":"ptp"}}]}}"#
            )
        };
        assert_eq!(Config::parse(conf("\"merged\"").as_bytes(), "eth0").unwrap().result, ResultMode::Merged);
        assert_eq!(Config::parse(conf("null").as_bytes(), "eth0").unwrap().result, ResultMode::Primary);
        for bad in ["5", "\"Merged\"", "true"] {
            let e = Config::parse(conf(bad).as_bytes(), "eth0").unwrap_err();
            assert_eq!(e.code, INVALID_NETWORK_CONFIG);
            assert_eq!(e.msg, format!("result must be \"primary\" or \"merged\", not {bad}"));
        }
    }
}
