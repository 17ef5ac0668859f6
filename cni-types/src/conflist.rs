//! Network configuration lists (conflists), parsed as libcni's `NetworkConfFromBytes` does:
//! `cniVersions` selection, string booleans, and per-plugin validation, with libcni's messages.

use crate::config::NetConf;
use crate::error::{CniError, INVALID_NETWORK_CONFIG};
use crate::gojson::quote::quote;
use crate::gojson::scan::type_name;
use crate::version::{self, Version};
use serde_json::{Map, Value};
use std::fmt;

/// A conflist that libcni would refuse; the text is libcni's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfListError(pub(crate) String);

impl From<ConfListError> for CniError {
    /// Code 7 ([`INVALID_NETWORK_CONFIG`]): libcni refuses the conflist
    /// (`libcni.NetworkConfFromBytes`).
    fn from(e: ConfListError) -> CniError {
        CniError::new(INVALID_NETWORK_CONFIG, e.0)
    }
}

impl ConfListError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
    }
}

/// A parsed conflist.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfList {
    /// The network name (not validated here; libcni checks it just before ADD).
    pub name: String,
    /// The selected version: the highest usable of `cniVersions` and `cniVersion`.
    pub cni_version: String,
    /// `cniVersions` as written.
    pub cni_versions: Vec<String>,
    /// `disableCheck`.
    pub disable_check: bool,
    /// `disableGC`.
    pub disable_gc: bool,
    /// `loadOnlyInlinedPlugins`.
    pub load_only_inlined_plugins: bool,
    /// The plugins, in order.
    pub plugins: Vec<NetConf>,
    /// The list exactly as given (libcni caches these bytes).
    pub bytes: Vec<u8>,
}

/// Go's `%T` of a value decoded into `interface{}`.
fn go_dynamic_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn list_err(msg: impl fmt::Display) -> ConfListError {
    ConfListError(format!("error parsing configuration list: {msg}"))
}

fn flag(raw: &Map<String, Value>, key: &str) -> Result<bool, ConfListError> {
    match raw.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(list_err(format!("invalid value {} for {key}", quote(s)))),
        },
        Some(other) => Err(list_err(format!("invalid type {} for {key}", go_dynamic_type(other)))),
    }
}

/// libcni's version selection: drop `cniVersions` entries newer than this library, add
/// `cniVersion` when usable, take the highest; with nothing usable, `cniVersion` as written.
fn select_version(cni_version: &str, versions: &[String]) -> Result<String, ConfListError> {
    let current = Version::parse(version::CURRENT).map_err(list_err)?;
    let mut usable: Vec<(Version, &str)> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let parsed =
            Version::parse(v).map_err(|e| list_err(format!("invalid cniVersions entry {v} at index {i}: {e}")))?;
        if parsed <= current {
            usable.push((parsed, v));
        }
    }
    if usable.is_empty() {
        return Ok(cni_version.to_string());
    }
    if !cni_version.is_empty() {
        if let Ok(p) = Version::parse(cni_version) {
            if p <= current {
                usable.push((p, cni_version));
            }
        }
    }
    usable.sort_by_key(|a| a.0);
    Ok(usable.last().map(|(_, s)| s.to_string()).unwrap_or_default())
}

impl NetConfList {
    /// Parses a conflist.
    pub fn parse(bytes: &[u8]) -> Result<NetConfList, ConfListError> {
        let value = crate::gojson::scan::parse(bytes).map_err(list_err)?;
        let raw = match value {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return Err(list_err(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    type_name(&other)
                )))
            }
        };
        let name = match raw.get("name") {
            None => return Err(list_err("no name")),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(list_err(format!("invalid name type {}", go_dynamic_type(other)))),
        };
        let cni_version = match raw.get("cniVersion") {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(list_err(format!("invalid cniVersion type {}", go_dynamic_type(other)))),
        };
        let cni_versions = match raw.get("cniVersions") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(list_err(format!("invalid cniVersions index {i} type {}", go_dynamic_type(other)))),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(list_err(format!("invalid cniVersions type {}", go_dynamic_type(other)))),
        };
        let selected = select_version(&cni_version, &cni_versions)?;
        let disable_check = flag(&raw, "disableCheck")?;
        let disable_gc = flag(&raw, "disableGC")?;
        let load_only_inlined_plugins = flag(&raw, "loadOnlyInlinedPlugins")?;
        let mut plugins = Vec::new();
        match raw.get("plugins") {
            None if load_only_inlined_plugins => {
                return Err(list_err("`loadOnlyInlinedPlugins` is true, and no 'plugins' key"));
            }
            None => {}
            Some(Value::Array(items)) => {
                if items.is_empty() {
                    return Err(list_err("no plugins in list"));
                }
                for (i, item) in items.iter().enumerate() {
                    let conf = parse_plugin(item.clone())
                        .map_err(|e| ConfListError(format!("failed to parse plugin config {i}: {e}")))?;
                    plugins.push(conf);
                }
            }
            Some(other) => return Err(list_err(format!("invalid 'plugins' type {}", go_dynamic_type(other)))),
        }
        Ok(NetConfList {
            name,
            cni_version: selected,
            cni_versions,
            disable_check,
            disable_gc,
            load_only_inlined_plugins,
            plugins,
            bytes: bytes.to_vec(),
        })
    }

    /// Wraps a single plugin configuration as a one-plugin list (libcni's `ConfListFromConf`).
    pub fn from_single(conf: NetConf) -> NetConfList {
        let mut raw = Map::new();
        raw.insert("cniVersion".into(), Value::String(conf.cni_version().to_string()));
        raw.insert("name".into(), Value::String(conf.name().to_string()));
        raw.insert("plugins".into(), Value::Array(vec![Value::Object(conf.raw().clone())]));
        NetConfList {
            name: conf.name().to_string(),
            cni_version: conf.cni_version().to_string(),
            cni_versions: Vec::new(),
            disable_check: false,
            disable_gc: false,
            load_only_inlined_plugins: false,
            bytes: crate::gojson::print::to_go_string(&raw).into_bytes(),
            plugins: vec![conf],
        }
    }
}

/// libcni's `ConfFromBytes` for one plugin object: it must decode and have a `type`.
pub fn parse_plugin(value: Value) -> Result<NetConf, ConfListError> {
    let conf = NetConf::from_value(value).map_err(|e| ConfListError(format!("error parsing configuration: {e}")))?;
    if conf.plugin_type().is_empty() {
        return Err(ConfListError("error parsing configuration: missing 'type'".into()));
    }
    Ok(conf)
}
