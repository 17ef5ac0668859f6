//! Reading a meta-plugin's `delegates` key — shared by the delegator and the merger.
//!
//! Each entry is a plugin configuration (has `type`), a conflist (has `plugins`), a network
//! name looked up in `confDir` as libcni does, or a wrapper `{"network": <one of those>,
//! "ifname": "...", "runtimeConfig": {...}, "args": "K=V;..."}`. The plan is validated before
//! anything runs: plugin types are names, not paths; interface names are valid and unique.

use crate::delegate::{Delegate, DelegateConfig};
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::{CniError, NetConf, NetConfList};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, msg)
}

/// libcni's `LoadNetworkConf`: the first `*.conflist` (sorted) in `dir` whose name matches,
/// then single-plugin `*.conf`/`*.json` files. Each file is read as
/// [`cni_runtime::chain::load_list`] reads one: a regular file (symlinks followed, as libcni
/// does), never a FIFO, at most 1 MiB; one that is not is skipped like one that does not parse.
fn load_by_name(dir: &Path, name: &str) -> Result<NetConfList, CniError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| invalid(format!("delegates: cannot read confDir {}: {e}", dir.display())))?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for ext in [&["conflist"][..], &["conf", "json"][..]] {
        for f in files.iter().filter(|f| f.extension().and_then(|e| e.to_str()).is_some_and(|e| ext.contains(&e))) {
            if let Ok(list) = cni_runtime::chain::load_list(f) {
                if list.name == name {
                    return Ok(list);
                }
            }
        }
    }
    Err(invalid(format!("delegates: no network named {name:?} in {}", dir.display())))
}

/// Parses `delegates` from a meta-plugin configuration. Delegate `i` gets the interface its
/// entry names, else `fixed_ifname(i)` (the delegator's first: `CNI_IFNAME`), else a name
/// braid chooses at ADD ([`crate::ifnames`]), provisionally the k-th auto delegate's `net<k>`.
pub fn parse(conf: &NetConf, fixed_ifname: &dyn Fn(usize) -> Option<String>) -> Result<Vec<Delegate>, CniError> {
    let conf_dir = cni_skel::keys::path(conf, "confDir", "/etc/cni/net.d")?;
    let Some(Value::Array(entries)) = conf.get("delegates") else {
        return Err(invalid("delegates must be a non-empty array of plugin configs, conflists or network names"));
    };
    if entries.is_empty() {
        return Err(invalid("delegates must not be empty"));
    }
    let mut delegates = Vec::new();
    let mut autos = 0;
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
                    Some(v) => return Err(invalid(format!("delegates[{i}].runtimeConfig must be an object, not {v}"))),
                }
                match o.get("args") {
                    None => {}
                    Some(Value::String(a)) => {
                        cni_types::args::split_pairs(a).map_err(|e| invalid(format!("delegates[{i}].args: {e}")))?;
                        extra_args = Some(a.clone());
                    }
                    Some(v) => return Err(invalid(format!("delegates[{i}].args must be a K=V;K=V string, not {v}"))),
                }
                (o["network"].clone(), ifn)
            }
            other => (other.clone(), None),
        };
        let config = match &network {
            Value::String(name) if name == conf.name() => {
                return Err(invalid(format!("delegates[{i}]: network {name:?} is this network itself")));
            }
            Value::String(name) => DelegateConfig::List(load_by_name(&conf_dir, name)?),
            Value::Object(o) if o.contains_key("plugins") => {
                let mut o = o.clone();
                o.entry("name").or_insert_with(|| Value::String(conf.name().to_string()));
                o.entry("cniVersion").or_insert_with(|| Value::String(conf.version().to_string()));
                let bytes = serde_json::to_vec(&o).unwrap_or_default();
                DelegateConfig::List(NetConfList::parse(&bytes).map_err(|e| invalid(format!("delegates[{i}]: {e}")))?)
            }
            Value::Object(o) => {
                let mut o = o.clone();
                o.entry("name").or_insert_with(|| Value::String(conf.name().to_string()));
                o.entry("cniVersion").or_insert_with(|| Value::String(conf.version().to_string()));
                DelegateConfig::Plugin(
                    cni_types::conflist::parse_plugin(Value::Object(o))
                        .map_err(|e| invalid(format!("delegates[{i}]: {e}")))?,
                )
            }
            other => return Err(invalid(format!("delegates[{i}] must be an object or a network name, not {other}"))),
        };
        let (ifname, auto_ifname) = match ifname_override.or_else(|| fixed_ifname(i)) {
            Some(name) => (name, false),
            None => {
                autos += 1;
                (format!("net{autos}"), true)
            }
        };
        delegates.push(Delegate {
            config,
            ifname,
            auto_ifname,
            runtime_config,
            args: extra_args,
            own_runtime_config_only: false,
            selector: None,
        });
    }
    validate(&delegates)?;
    Ok(delegates)
}

/// Checks a plan: plugin types are names, interface names valid, the fixed ones unique (the
/// chosen ones are made unique at ADD).
pub fn validate(delegates: &[Delegate]) -> Result<(), CniError> {
    let mut seen: Vec<&str> = Vec::new();
    for (i, d) in delegates.iter().enumerate() {
        let types: Vec<&str> = match &d.config {
            DelegateConfig::Plugin(c) => vec![c.plugin_type()],
            DelegateConfig::List(l) => l.plugins.iter().map(|p| p.plugin_type()).collect(),
        };
        if let Some(t) = types.iter().find(|t| t.contains('/') || t.is_empty()) {
            return Err(invalid(format!("delegates[{i}]: type {t:?} must be a plugin name, not a path")));
        }
        cni_types::validate::interface_name(&d.ifname)
            .map_err(|e| invalid(format!("delegates[{i}] ({}): interface name {:?}: {}", d.name(), d.ifname, e)))?;
        if d.auto_ifname {
            continue;
        }
        if seen.contains(&d.ifname.as_str()) {
            return Err(invalid(format!(
                "delegates[{i}] ({}): interface name {} is already used by another delegate",
                d.name(),
                d.ifname
            )));
        }
        seen.push(&d.ifname);
    }
    Ok(())
}
