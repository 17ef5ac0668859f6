//! `runtimeConfig`: what a runtime passes a plugin for the capabilities it declared (the
//! well-known ones are listed in the CNI repository's CONVENTIONS.md), and libcni's rule for
//! which ones it passes (`libcni/api.go`, `injectRuntimeConfig`).
//!
//! braid's own plugins read `runtimeConfig` raw ([`NetConf::runtime_config_raw`]); the typed
//! [`RuntimeConfig`] is for plugin authors who read a capability themselves.
//!
//! [`NetConf::runtime_config_raw`]: crate::NetConf::runtime_config_raw

use crate::decode::{DecodeError, GoStruct};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

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
        let obj = GoStruct::root(v, "RuntimeConfig")?;
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
                let w = GoStruct::root(&wrapper, "RuntimeConfig")?;
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
