//! The delegator's own keys on top of the shared meta-plugin configuration, validated before
//! anything runs.

use braid_attach::PluginRules;
use cni_types::{CniError, NetConf};

/// Which result ADD returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultMode {
    /// The first delegate's result (Kubernetes-safe: one data plane).
    Primary,
    /// Every delegate's result merged (VM runtimes).
    Merged,
}

/// The shared keys as the delegator reads them: `delegates` required, the first delegate on
/// `CNI_IFNAME`, the others on the first free `net<N>`.
pub const RULES: PluginRules<'static> = PluginRules {
    plugin: "delegator",
    delegates_optional: false,
    fixed_ifname: &|i, ifname| (i == 0).then(|| ifname.to_string()),
};

/// `result`, checked against the plan: a merged result must be expressible in the
/// configuration's version with this many delegates.
pub fn result_mode(conf: &NetConf, delegates: usize) -> Result<ResultMode, CniError> {
    let mode = cni_skel::keys::choice(
        conf,
        "result",
        &[("primary", ResultMode::Primary), ("merged", ResultMode::Merged)],
        ResultMode::Primary,
    )?;
    if mode == ResultMode::Merged {
        cni_types::merge::check_expressible(conf.version(), delegates)?;
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_types::error::INVALID_NETWORK_CONFIG;

    #[test]
    fn result_mode_of_the_wrong_kind_is_named_not_defaulted() {
        let conf = |result: &str| {
            NetConf::parse(
                format!(r#"{{"cniVersion":"1.0.0","name":"n","type":"delegator","result":{result},"delegates":[{{"type":"ptp"}}]}}"#)
                    .as_bytes(),
            )
            .unwrap()
        };
        assert_eq!(result_mode(&conf("\"merged\""), 1).unwrap(), ResultMode::Merged);
        assert_eq!(result_mode(&conf("null"), 1).unwrap(), ResultMode::Primary);
        for bad in ["5", "\"Merged\"", "true"] {
            let e = result_mode(&conf(bad), 1).unwrap_err();
            assert_eq!(e.code, INVALID_NETWORK_CONFIG);
            assert_eq!(e.msg, format!("result must be \"primary\" or \"merged\", not {bad}"));
        }
    }
}
