//! Plugin configuration: what a plugin reads on stdin.
//!
//! A [`NetConf`] types the well-known keys and keeps **every** key it was given in
//! [`NetConf::raw`], so a configuration handed on to a delegate is the JSON the operator wrote,
//! not a re-typed approximation. Serialising it gives compact JSON with keys sorted at every
//! level, which is exactly what libcni sends plugins.

use crate::decode::{DecodeError, Obj};
use crate::error::CniError;
use crate::result::{AnyResult, CniResult, CreateError, Dns};
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use std::collections::BTreeMap;
use std::fmt;

/// Reads `cniVersion` from a configuration (Go's `create.DecodeVersion`): missing or `""` is
/// 0.1.0.
pub fn decode_version(bytes: &[u8]) -> Result<String, DecodeError> {
    let wrap = |e: String| DecodeError(format!("decoding version from network config: {e}"));
    let value = crate::gojson::parse(bytes).map_err(|e| wrap(e.0))?;
    let obj = Obj::root(&value, "").map_err(|e| wrap(e.0))?;
    let v = obj.string("cniVersion").map_err(|e| wrap(e.0))?;
    Ok(if v.is_empty() { crate::version::DEFAULT.to_string() } else { v })
}

/// A plugin configuration object, typed where the spec defines keys, raw everywhere else.
///
/// The raw map is the one source of truth — it is what [`NetConf::to_bytes`] sends on. The
/// typed accessors are a view of it that [`NetConf::set`] and [`NetConf::remove`] keep in step,
/// so an edit is never silently lost on its way to a delegate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetConf {
    raw: Map<String, Value>,
    typed: Typed,
}

/// The typed view of the well-known keys (derived from `raw`, never set on its own).
#[derive(Debug, Clone, PartialEq, Default)]
struct Typed {
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
        let value = crate::gojson::parse(bytes)?;
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
        let typed = Typed::decode(&value, root)?;
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
        self.typed = Typed::decode(&value, "NetConf").unwrap_or_else(|_| Typed::lenient(&value));
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
            CniError::new(crate::error::INVALID_NETWORK_CONFIG, msg)
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
                crate::error::INVALID_NETWORK_CONFIG,
                "prevResult is missing: this plugin must be chained after another plugin in a conflist",
            )),
        }
    }

    /// Compact JSON with keys sorted at every level: the bytes libcni would send.
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::gojson::to_go_string(&self.raw).into_bytes()
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
                    let obj = Obj::root(item, "GCAttachment")?;
                    Ok(GcAttachment { container_id: obj.string("containerID")?, ifname: obj.string("ifname")? })
                })
                .collect(),
            Some(other) => Err(DecodeError(format!(
                "json: cannot unmarshal {} into Go struct field NetConf.cni.dev/valid-attachments of type []types.GCAttachment",
                crate::gojson::type_name(other)
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

impl Typed {
    /// The well-known keys of a configuration, with Go's type-error texts.
    fn decode(value: &Value, root: &str) -> Result<Typed, DecodeError> {
        let obj = Obj::root(value, root)?;
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
                            crate::gojson::type_name(other)
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
        Ok(Typed { cni_version, name, plugin_type, capabilities, ipam_type, dns })
    }

    /// After an edit that made some well-known key unreadable: the readable strings only.
    fn lenient(value: &Value) -> Typed {
        let text = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Typed { cni_version: text("cniVersion"), name: text("name"), plugin_type: text("type"), ..Typed::default() }
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrevResultError {
    /// `prevResult` is not a JSON object.
    NotAnObject(String),
    /// `could not parse prevResult: …`
    Parse(CreateError),
}

impl fmt::Display for PrevResultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrevResultError::NotAnObject(t) => write!(
                f,
                "could not parse prevResult: json: cannot unmarshal {t} into Go struct field PluginConf.prevResult of type map[string]interface {{}}"
            ),
            PrevResultError::Parse(e) => write!(f, "could not parse prevResult: {e}"),
        }
    }
}

impl std::error::Error for PrevResultError {}

/// Go's `ParsePrevResult`: the configuration's version picks the family; a prevResult without
/// `cniVersion` is taken to be in the configuration's version.
pub fn parse_prev_result(conf_version: &str, raw: Option<&Value>) -> Result<Option<AnyResult>, PrevResultError> {
    let map = match raw {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(other) => return Err(PrevResultError::NotAnObject(crate::gojson::type_name(other).to_string())),
    };
    let has_version = map.keys().any(|k| k.eq_ignore_ascii_case("cniVersion"));
    let result = if has_version {
        AnyResult::create_from_value(conf_version, &Value::Object(map.clone()))
    } else {
        let mut with = map.clone();
        with.insert("cniVersion".into(), Value::String(conf_version.to_string()));
        AnyResult::create_from_value(conf_version, &Value::Object(with))
    };
    result.map(Some).map_err(PrevResultError::Parse)
}

/// One entry of the `portMappings` capability.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortMapping {
    /// Host port.
    pub host_port: i64,
    /// Container port.
    pub container_port: i64,
    /// `tcp`, `udp`, `sctp`.
    pub protocol: String,
    /// Host address to bind, if any.
    pub host_ip: String,
}

/// One range of the `ipRanges` capability.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IpRange {
    /// Subnet CIDR.
    pub subnet: String,
    /// First address to allocate.
    pub range_start: String,
    /// Last address to allocate.
    pub range_end: String,
    /// Gateway.
    pub gateway: String,
}

/// The `bandwidth` capability (bits per second and bits).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bandwidth {
    /// Ingress rate.
    pub ingress_rate: i64,
    /// Ingress burst.
    pub ingress_burst: i64,
    /// Egress rate.
    pub egress_rate: i64,
    /// Egress burst.
    pub egress_burst: i64,
}

/// The `dns` capability. Note the key names differ from a result's DNS; runtimes also send
/// them capitalised (`Servers`), which is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeDns {
    /// `servers`.
    pub servers: Vec<String>,
    /// `searches`.
    pub searches: Vec<String>,
    /// `options`.
    pub options: Vec<String>,
}

/// `runtimeConfig` with the well-known capabilities of CONVENTIONS.md typed; unknown ones stay
/// in [`RuntimeConfig::raw`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuntimeConfig {
    /// `portMappings`.
    pub port_mappings: Vec<PortMapping>,
    /// `ipRanges`: one set of ranges per address to allocate.
    pub ip_ranges: Vec<Vec<IpRange>>,
    /// `bandwidth`.
    pub bandwidth: Option<Bandwidth>,
    /// `dns`.
    pub dns: Option<RuntimeDns>,
    /// `ips` (prefix optional).
    pub ips: Vec<String>,
    /// `mac`.
    pub mac: Option<String>,
    /// `infinibandGUID`.
    pub infiniband_guid: Option<String>,
    /// `deviceID` (a PCI address).
    pub device_id: Option<String>,
    /// `aliases`.
    pub aliases: Vec<String>,
    /// `cgroupPath`.
    pub cgroup_path: Option<String>,
    /// `io.kubernetes.cri.pod-annotations`.
    pub pod_annotations: BTreeMap<String, String>,
    /// The whole object as given.
    pub raw: Map<String, Value>,
}

impl RuntimeConfig {
    /// Types a `runtimeConfig` object.
    pub fn from_value(v: &Value) -> Result<RuntimeConfig, DecodeError> {
        let obj = Obj::root(v, "RuntimeConfig")?;
        let mut rc = RuntimeConfig { raw: obj.map().clone(), ..RuntimeConfig::default() };
        for pm in obj.objects("portMappings")? {
            rc.port_mappings.push(PortMapping {
                host_port: pm.int("hostPort")?.unwrap_or(0),
                container_port: pm.int("containerPort")?.unwrap_or(0),
                protocol: pm.string("protocol")?,
                host_ip: pm.string("hostIP")?,
            });
        }
        if let Some(Value::Array(sets)) = obj.get("ipRanges") {
            for set in sets {
                let wrapper = serde_json::json!({ "set": set });
                let w = Obj::root(&wrapper, "RuntimeConfig")?;
                let mut ranges = Vec::new();
                for r in w.objects("set")? {
                    ranges.push(IpRange {
                        subnet: r.string("subnet")?,
                        range_start: r.string("rangeStart")?,
                        range_end: r.string("rangeEnd")?,
                        gateway: r.string("gateway")?,
                    });
                }
                rc.ip_ranges.push(ranges);
            }
        }
        if let Some(b) = obj.object("bandwidth")? {
            rc.bandwidth = Some(Bandwidth {
                ingress_rate: b.int("ingressRate")?.unwrap_or(0),
                ingress_burst: b.int("ingressBurst")?.unwrap_or(0),
                egress_rate: b.int("egressRate")?.unwrap_or(0),
                egress_burst: b.int("egressBurst")?.unwrap_or(0),
            });
        }
        if let Some(d) = obj.object("dns")? {
            rc.dns = Some(RuntimeDns {
                servers: d.string_list("servers")?,
                searches: d.string_list("searches")?,
                options: d.string_list("options")?,
            });
        }
        rc.ips = obj.string_list("ips")?;
        rc.mac = obj.opt_string("mac")?;
        rc.infiniband_guid = obj.opt_string("infinibandGUID")?;
        rc.device_id = obj.opt_string("deviceID")?;
        rc.aliases = obj.string_list("aliases")?;
        rc.cgroup_path = obj.opt_string("cgroupPath")?;
        if let Some(a) = obj.object("io.kubernetes.cri.pod-annotations")? {
            for k in a.map().keys() {
                rc.pod_annotations.insert(k.clone(), a.string(k)?);
            }
        }
        Ok(rc)
    }
}

/// libcni's `runtimeConfig` derivation: for every capability the plugin declares `true` and the
/// runtime supplies, copy the runtime's value. `None` when nothing applies (libcni then leaves
/// the plugin's own `runtimeConfig`, if any, untouched).
pub fn runtime_config_for(
    capabilities: &BTreeMap<String, bool>,
    capability_args: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let picked: Map<String, Value> = capabilities
        .iter()
        .filter(|(_, &on)| on)
        .filter_map(|(cap, _)| capability_args.get(cap).map(|v| (cap.clone(), v.clone())))
        .collect();
    (!picked.is_empty()).then_some(picked)
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

    #[test]
    fn runtime_config_accepts_capitalised_dns() {
        let v = serde_json::json!({"dns":{"Servers":["198.18.0.1"],"Searches":["x"]},"mac":"c2:11:22:33:44:55","portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],"ipRanges":[[{"subnet":"198.18.0.0/24"}]]});
        let rc = RuntimeConfig::from_value(&v).unwrap();
        assert_eq!(rc.dns.unwrap().servers, vec!["198.18.0.1"]);
        assert_eq!(rc.mac.as_deref(), Some("c2:11:22:33:44:55"));
        assert_eq!(rc.port_mappings[0].host_port, 8080);
        assert_eq!(rc.ip_ranges[0][0].subnet, "198.18.0.0/24");
    }

    #[test]
    fn runtime_config_filtering() {
        let caps: BTreeMap<String, bool> = [("mac".to_string(), true), ("ips".to_string(), false)].into();
        let args = serde_json::json!({"mac":"aa:bb:cc:dd:ee:ff","ips":["1"],"portMappings":[]});
        let got = runtime_config_for(&caps, args.as_object().unwrap()).unwrap();
        assert_eq!(Value::Object(got), serde_json::json!({"mac":"aa:bb:cc:dd:ee:ff"}));
        assert!(runtime_config_for(&BTreeMap::new(), args.as_object().unwrap()).is_none());
    }
}
