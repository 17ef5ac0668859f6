//! Plugin configuration: what a plugin reads on stdin.
//!
//! A [`NetConf`] types the well-known keys and keeps **every** key it was given in
//! [`NetConf::raw`], so a configuration handed on to a delegate is the JSON the operator wrote,
//! not a re-typed approximation. Serialising it gives compact JSON with keys sorted at every
//! level, which is exactly what libcni sends plugins.

use crate::decode::{DecodeError, GoStruct};
use crate::error::{CniError, DECODING_FAILURE, INVALID_NETWORK_CONFIG};
use crate::gojson::scan::type_name;
use crate::result::{AnyResult, CniResult, CreateError, Dns};
use crate::runtime_config::RuntimeConfig;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use std::collections::BTreeMap;

/// Reading a configuration's `cniVersion` is the version module's job; it is found here too,
/// beside the configuration it reads.
pub use crate::version::decode_version;

/// A plugin configuration object, typed where the spec defines keys, raw everywhere else.
///
/// The raw map is the one source of truth — it is what [`NetConf::to_bytes`] sends on. The
/// typed accessors are a view of it that [`NetConf::set`] and [`NetConf::remove`] keep in step,
/// so an edit is never silently lost on its way to a delegate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetConf {
    raw: Map<String, Value>,
    typed: WellKnown,
}

/// The typed view of the well-known keys (derived from `raw`, never set on its own).
#[derive(Debug, Clone, PartialEq, Default)]
struct WellKnown {
    cni_version: String,
    name: String,
    plugin_type: String,
    capabilities: BTreeMap<String, bool>,
    ipam_type: Option<String>,
    dns: Option<Dns>,
}

/// The keys the typed view is derived from.
const TYPED_KEYS: [&str; 6] = ["cniVersion", "name", "type", "capabilities", "ipam", "dns"];

impl NetConf {
    /// Parses a plugin configuration. Type errors name the key as Go's decoder does; `root` is
    /// the Go struct name the message should carry (`""` for the skel's anonymous struct).
    pub fn parse_as(bytes: &[u8], root: &str) -> Result<NetConf, DecodeError> {
        let value = crate::gojson::scan::parse(bytes)?;
        NetConf::from_value_as(value, root)
    }

    /// Parses a plugin configuration (errors name `types.NetConf`).
    pub fn parse(bytes: &[u8]) -> Result<NetConf, DecodeError> {
        NetConf::parse_as(bytes, "NetConf")
    }

    /// Builds from an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<NetConf, DecodeError> {
        NetConf::from_value_as(value, "NetConf")
    }

    fn from_value_as(value: Value, root: &str) -> Result<NetConf, DecodeError> {
        let typed = WellKnown::decode(&value, root)?;
        let raw = match value {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Ok(NetConf { raw, typed })
    }

    /// `cniVersion` as written (empty when absent; see [`NetConf::version`]).
    pub fn cni_version(&self) -> &str {
        &self.typed.cni_version
    }

    /// The network name (`name`).
    pub fn name(&self) -> &str {
        &self.typed.name
    }

    /// The plugin binary name (`type`).
    pub fn plugin_type(&self) -> &str {
        &self.typed.plugin_type
    }

    /// Declared capabilities (`capabilities`; `null` entries dropped).
    pub fn capabilities(&self) -> &BTreeMap<String, bool> {
        &self.typed.capabilities
    }

    /// The IPAM plugin's `type`, if an `ipam` section is present.
    pub fn ipam_type(&self) -> Option<&str> {
        self.typed.ipam_type.as_deref()
    }

    /// Configuration-level `dns`.
    pub fn dns(&self) -> Option<&Dns> {
        self.typed.dns.as_ref()
    }

    /// The version this configuration speaks: `cniVersion`, or 0.1.0 when absent or empty.
    pub fn version(&self) -> &str {
        if self.typed.cni_version.is_empty() {
            crate::version::DEFAULT
        } else {
            &self.typed.cni_version
        }
    }

    /// Every key as given.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// One key as given (exact name), `None` when absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.raw.get(key)
    }

    /// Sets a key; the typed view follows. A well-known key set to a value of the wrong kind
    /// is still sent as set, and reads as absent through the typed accessors.
    pub fn set(&mut self, key: &str, value: Value) {
        self.raw.insert(key.to_string(), value);
        self.retype(key);
    }

    /// Removes a key and returns it; the typed view follows.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let old = self.raw.remove(key);
        self.retype(key);
        old
    }

    /// Re-derives the typed view after `key` changed (nothing to do for a plugin's own keys).
    fn retype(&mut self, key: &str) {
        if !TYPED_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            return;
        }
        let value = Value::Object(std::mem::take(&mut self.raw));
        self.typed = WellKnown::decode(&value, "NetConf").unwrap_or_else(|_| WellKnown::lenient(&value));
        if let Value::Object(map) = value {
            self.raw = map;
        }
    }

    /// The plugin's configuration as its own type — Go's `json.Unmarshal` into a struct that
    /// embeds `types.NetConf`. Unknown keys are ignored unless `T` says
    /// `#[serde(deny_unknown_fields)]`. A bad value is code 7 and names the path to it:
    /// `invalid network configuration: delegates[1].ifname: invalid type: integer `5`, expected
    /// a string`; a missing or unknown key, the object that should or should not hold it
    /// (serde's text names the key).
    pub fn plugin_config<T: serde::de::DeserializeOwned>(&self) -> Result<T, CniError> {
        serde_path_to_error::deserialize(&self.raw).map_err(|e| {
            let text = e.inner().to_string();
            let mut segments: Vec<_> = e.path().iter().collect();
            if text.starts_with("unknown field") {
                segments.pop();
            }
            let msg = match path_text(&segments) {
                path if path.is_empty() => format!("invalid network configuration: {text}"),
                path => format!("invalid network configuration: {path}: {text}"),
            };
            CniError::new(INVALID_NETWORK_CONFIG, msg)
        })
    }

    /// The previous result of a chained plugin, in the 1.x model: what a chained plugin's
    /// ADD starts from. Missing is code 7 (the plugin was not called as a chain member);
    /// unparsable is code 6.
    ///
    /// `prevResult` is parsed in the *configuration's* version family, as Go's
    /// `version.ParsePrevResult` does: a 0.4.0 configuration needs a 0.3.x/0.4.0 `prevResult`,
    /// a 1.x configuration a 1.x one, and a `prevResult` without `cniVersion` is taken to be in
    /// the configuration's version. Runtimes always send it that way (libcni converts each
    /// result to the list's version before passing it on).
    pub fn require_prev_result(&self) -> Result<CniResult, CniError> {
        match self.prev_result()? {
            Some(prev) => Ok(prev.to_latest()),
            None => Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                "prevResult is missing: this plugin must be chained after another plugin in a conflist",
            )),
        }
    }

    /// Compact JSON with keys sorted at every level: the bytes libcni would send.
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::gojson::print::to_go_string(&self.raw).into_bytes()
    }

    /// The raw `prevResult`, if present and not `null`.
    pub fn prev_result_raw(&self) -> Option<&Value> {
        self.raw.get("prevResult").filter(|v| !v.is_null())
    }

    /// Parses `prevResult` with Go's rules (`pkg/version/version.go`, `ParsePrevResult`).
    pub fn prev_result(&self) -> Result<Option<AnyResult>, PrevResultError> {
        // The raw `cniVersion` (possibly empty): Go injects it verbatim when prevResult has none.
        parse_prev_result(&self.typed.cni_version, self.raw.get("prevResult"))
    }

    /// The raw `runtimeConfig`, if present.
    pub fn runtime_config_raw(&self) -> Option<&Value> {
        self.raw.get("runtimeConfig").filter(|v| !v.is_null())
    }

    /// `runtimeConfig` with the well-known capabilities typed.
    pub fn runtime_config(&self) -> Result<RuntimeConfig, DecodeError> {
        match self.runtime_config_raw() {
            Some(v) => RuntimeConfig::from_value(v),
            None => Ok(RuntimeConfig::default()),
        }
    }

    /// The raw `args`, if present.
    pub fn args_raw(&self) -> Option<&Value> {
        self.raw.get("args").filter(|v| !v.is_null())
    }

    /// GC's valid attachments: `cni.dev/valid-attachments`, else the legacy
    /// `cni.dev/attachments`; `null` or absent is an empty list.
    pub fn valid_attachments(&self) -> Result<Vec<GcAttachment>, DecodeError> {
        let v = self
            .raw
            .get(GC_VALID_ATTACHMENTS)
            .filter(|v| !v.is_null())
            .or_else(|| self.raw.get(GC_ATTACHMENTS_LEGACY).filter(|v| !v.is_null()));
        match v {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .filter(|v| !v.is_null())
                .map(|item| {
                    let obj = GoStruct::root(item, "GCAttachment")?;
                    Ok(GcAttachment { container_id: obj.string("containerID")?, ifname: obj.string("ifname")? })
                })
                .collect(),
            Some(other) => Err(DecodeError(format!(
                "json: cannot unmarshal {} into Go struct field NetConf.cni.dev/valid-attachments of type []types.GCAttachment",
                type_name(other)
            ))),
        }
    }
}

/// A path as serde_path_to_error prints one (`delegates[1].ifname`), empty at the root.
fn path_text(segments: &[&Segment]) -> String {
    let mut text = String::new();
    for segment in segments {
        if !text.is_empty() && !matches!(segment, Segment::Seq { .. }) {
            text.push('.');
        }
        text.push_str(&segment.to_string());
    }
    text
}

impl WellKnown {
    /// The well-known keys of a configuration, with Go's type-error texts.
    fn decode(value: &Value, root: &str) -> Result<WellKnown, DecodeError> {
        let obj = GoStruct::root(value, root)?;
        let cni_version = obj.string("cniVersion")?;
        let name = obj.string("name")?;
        let plugin_type = obj.string("type")?;
        let mut capabilities = BTreeMap::new();
        if let Some(caps) = obj.object("capabilities")? {
            for (k, v) in caps.map() {
                match v {
                    Value::Bool(b) => {
                        capabilities.insert(k.clone(), *b);
                    }
                    Value::Null => {}
                    other => {
                        return Err(DecodeError(format!(
                            "json: cannot unmarshal {} into Go struct field {root}.capabilities of type bool",
                            type_name(other)
                        )))
                    }
                }
            }
        }
        let ipam_type = match obj.object("ipam")? {
            Some(ipam) => Some(ipam.string("type")?),
            None => None,
        };
        let dns = match obj.object("dns")? {
            Some(d) => Some(Dns {
                nameservers: d.string_list("nameservers")?,
                domain: d.string("domain")?,
                search: d.string_list("search")?,
                options: d.string_list("options")?,
            }),
            None => None,
        };
        Ok(WellKnown { cni_version, name, plugin_type, capabilities, ipam_type, dns })
    }

    /// After an edit that made some well-known key unreadable: the readable strings only.
    fn lenient(value: &Value) -> WellKnown {
        let text = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        WellKnown {
            cni_version: text("cniVersion"),
            name: text("name"),
            plugin_type: text("type"),
            ..WellKnown::default()
        }
    }
}

/// The GC key for still-valid attachments.
pub const GC_VALID_ATTACHMENTS: &str = "cni.dev/valid-attachments";
/// The pre-1.1-release name of the same key, still sent by libcni.
pub const GC_ATTACHMENTS_LEGACY: &str = "cni.dev/attachments";

/// One attachment GC must keep.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GcAttachment {
    /// `containerID`.
    pub container_id: String,
    /// `ifname`.
    pub ifname: String,
}

/// Why `prevResult` could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrevResultError {
    /// `prevResult` is not a JSON object.
    #[error(
        "could not parse prevResult: json: cannot unmarshal {0} into Go struct field PluginConf.prevResult of type map[string]interface {{}}"
    )]
    NotAnObject(String),
    /// `could not parse prevResult: …`
    #[error("could not parse prevResult: {0}")]
    Parse(#[source] CreateError),
}

impl From<PrevResultError> for CniError {
    /// Code 6 ([`DECODING_FAILURE`]): `prevResult` did not parse (Go's
    /// `version.ParsePrevResult`).
    fn from(e: PrevResultError) -> CniError {
        CniError::new(DECODING_FAILURE, e.to_string())
    }
}

/// Go's `ParsePrevResult`: the configuration's version picks the family; a prevResult without
/// `cniVersion` is taken to be in the configuration's version.
pub fn parse_prev_result(conf_version: &str, raw: Option<&Value>) -> Result<Option<AnyResult>, PrevResultError> {
    let map = match raw {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(other) => return Err(PrevResultError::NotAnObject(type_name(other).to_string())),
    };
    let has_version = map.keys().any(|k| k.eq_ignore_ascii_case("cniVersion"));
    let result = if has_version {
        AnyResult::create_from_map(conf_version, map)
    } else {
        let mut with = map.clone();
        with.insert("cniVersion".into(), Value::String(conf_version.to_string()));
        AnyResult::create_from_value(conf_version, &Value::Object(with))
    };
    result.map(Some).map_err(PrevResultError::Parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_survive_and_are_sorted() {
        let c = NetConf::parse(br#"{"z":1,"type":"bridge","cniVersion":"1.0.0","name":"n","nested":{"b":1,"a":2}}"#)
            .unwrap();
        assert_eq!(c.plugin_type(), "bridge");
        assert_eq!(
            String::from_utf8(c.to_bytes()).unwrap(),
            r#"{"cniVersion":"1.0.0","name":"n","nested":{"a":2,"b":1},"type":"bridge","z":1}"#
        );
    }

    #[test]
    fn gc_attachments_both_keys_and_null() {
        let c = NetConf::parse(br#"{"name":"n","cni.dev/attachments":[{"containerID":"c","ifname":"eth0"}]}"#).unwrap();
        assert_eq!(
            c.valid_attachments().unwrap(),
            vec![GcAttachment { container_id: "c".into(), ifname: "eth0".into() }]
        );
        let c = NetConf::parse(br#"{"name":"n","cni.dev/valid-attachments":null}"#).unwrap();
        assert!(c.valid_attachments().unwrap().is_empty());
        let c = NetConf::parse(
            br#"{"name":"n","cni.dev/valid-attachments":[],"cni.dev/attachments":[{"containerID":"x"}]}"#,
        )
        .unwrap();
        assert!(c.valid_attachments().unwrap().is_empty());
    }
}
