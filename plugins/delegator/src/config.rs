//! The delegator's configuration and the attachment plan, validated before anything runs.

use cni_skel::attach::{Delegate, DelegateConfig};
use cni_types::error::{DECODING_FAILURE, INVALID_NETWORK_CONFIG};
use cni_types::{CniError, NetConf, NetConfList};
use serde_json::Value;
use std::path::{Path, PathBuf};
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

/// libcni's `LoadNetworkConf`: the first `*.conflist` (sorted) in `dir` whose name matches,
/// then single-plugin `*.conf`/`*.json` files.
fn load_by_name(dir: &Path, name: &str) -> Result<NetConfList, CniError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| invalid(format!("delegates: cannot read confDir {}: {e}", dir.display())))?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for ext in [&["conflist"][..], &["conf", "json"][..]] {
        for f in files.iter().filter(|f| f.extension().and_then(|e| e.to_str()).is_some_and(|e| ext.contains(&e))) {
            if let Ok(list) = cni_skel::chain::load_list(f) {
                if list.name == name {
                    return Ok(list);
                }
            }
        }
    }
    Err(invalid(format!("delegates: no network named {name:?} in {}", dir.display())))
}

impl Config {
    /// Parses and resolves the configuration; `ifname` is our `CNI_IFNAME` (the first
    /// delegate's interface).
    pub fn parse(stdin: &[u8], ifname: &str) -> Result<Config, CniError> {
        let conf = NetConf::parse(stdin).map_err(|e| CniError::new(DECODING_FAILURE, e.to_string()))?;
        let state_dir = match conf.get("stateDir") {
            None | Some(Value::Null) => PathBuf::from("/var/lib/cni/delegator"),
            Some(Value::String(s)) if !s.is_empty() => PathBuf::from(s),
            Some(v) => return Err(invalid(format!("stateDir must be a non-empty path, not {v}"))),
        };
        let result = match conf.get("result").and_then(Value::as_str) {
            None | Some("primary") => ResultMode::Primary,
            Some("merged") => ResultMode::Merged,
            Some(other) => return Err(invalid(format!("result must be \"primary\" or \"merged\", not {other:?}"))),
        };
        let timeout = match conf.get("timeout") {
            None => Duration::from_secs(60),
            Some(v) => match v.as_f64() {
                Some(s) if s > 0.0 && s < 86_400.0 => Duration::from_secs_f64(s),
                _ => return Err(invalid(format!("timeout must be a number of seconds (0 < t < 86400), not {v}"))),
            },
        };
        let conf_dir = conf.get("confDir").and_then(Value::as_str).unwrap_or("/etc/cni/net.d").to_string();
        let Some(Value::Array(entries)) = conf.get("delegates") else {
            return Err(invalid("delegates must be a non-empty array of plugin configs, conflists or network names"));
        };
        if entries.is_empty() {
            return Err(invalid("delegates must not be empty"));
        }
        let mut delegates = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let mut runtime_config = serde_json::Map::new();
            let mut extra_args = None;
            let (network, ifname_override) = match entry {
                Value::Object(o) if o.contains_key("network") => {
                    let ifn = match o.get("ifname") {
                        None => None,
                        Some(Value::String(s)) => Some(s.clone()),
                        Some(v) => return Err(invalid(format!("delegates[{i}].ifname must be a string, not {v}"))),
                    };
                    match o.get("runtimeConfig") {
                        None => {}
                        Some(Value::Object(rc)) => runtime_config = rc.clone(),
                        Some(v) => {
                            return Err(invalid(format!("delegates[{i}].runtimeConfig must be an object, not {v}")))
                        }
                    }
                    match o.get("args") {
                        None => {}
                        Some(Value::String(a)) => {
                            cni_types::args::split_pairs(a)
                                .map_err(|e| invalid(format!("delegates[{i}].args: {e}")))?;
                            extra_args = Some(a.clone());
                        }
                        Some(v) => {
                            return Err(invalid(format!("delegates[{i}].args must be a K=V;K=V string, not {v}")))
                        }
                    }
                    (o["network"].clone(), ifn)
                }
                other => (other.clone(), None),
            };
            let config = match &network {
                Value::String(name) => DelegateConfig::List(load_by_name(Path::new(&conf_dir), name)?),
                Value::Object(o) if o.contains_key("plugins") => {
                    let mut o = o.clone();
                    o.entry("name").or_insert_with(|| Value::String(conf.name.clone()));
                    o.entry("cniVersion").or_insert_with(|| Value::String(conf.version().to_string()));
                    let bytes = serde_json::to_vec(&o).unwrap_or_default();
                    DelegateConfig::List(
                        NetConfList::parse(&bytes).map_err(|e| invalid(format!("delegates[{i}]: {e}")))?,
                    )
                }
                Value::Object(o) => {
                    let mut o = o.clone();
                    o.entry("name").or_insert_with(|| Value::String(conf.name.clone()));
                    o.entry("cniVersion").or_insert_with(|| Value::String(conf.version().to_string()));
                    DelegateConfig::Plugin(
                        cni_types::conflist::parse_plugin(Value::Object(o))
                            .map_err(|e| invalid(format!("delegates[{i}]: {e}")))?,
                    )
                }
                other => {
                    return Err(invalid(format!("delegates[{i}] must be an object or a network name, not {other}")))
                }
            };
            let ifname = ifname_override.unwrap_or_else(|| if i == 0 { ifname.to_string() } else { format!("net{i}") });
            delegates.push(Delegate { config, ifname, runtime_config, args: extra_args });
        }
        let cfg = Config { conf, delegates, state_dir, result, timeout };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the plan: plugin types, interface names, and that the result can be expressed.
    fn validate(&self) -> Result<(), CniError> {
        let mut seen: Vec<&str> = Vec::new();
        for (i, d) in self.delegates.iter().enumerate() {
            let types: Vec<&str> = match &d.config {
                DelegateConfig::Plugin(c) => vec![c.plugin_type.as_str()],
                DelegateConfig::List(l) => l.plugins.iter().map(|p| p.plugin_type.as_str()).collect(),
            };
            if let Some(t) = types.iter().find(|t| t.contains('/') || t.is_empty()) {
                return Err(invalid(format!("delegates[{i}]: type {t:?} must be a plugin name, not a path")));
            }
            cni_types::validate::interface_name(&d.ifname)
                .map_err(|e| invalid(format!("delegates[{i}] ({}): interface name {:?}: {}", d.name(), d.ifname, e)))?;
            if seen.contains(&d.ifname.as_str()) {
                return Err(invalid(format!(
                    "delegates[{i}] ({}): interface name {} is already used by another delegate",
                    d.name(),
                    d.ifname
                )));
            }
            seen.push(&d.ifname);
        }
        if self.result == ResultMode::Merged {
            cni_types::merge::check_expressible(self.conf.version(), self.delegates.len())
                .map_err(|e| invalid(e.to_string()))?;
        }
        Ok(())
    }
}
