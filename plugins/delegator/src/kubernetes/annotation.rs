//! The pod annotation `k8s.v1.cni.cncf.io/networks` (NPWG §4.1) in both of its forms, validated
//! to the last value before anything runs.
//!
//! * Text: `name`, `namespace/name`, `namespace/name@ifname` (the `@ifname` is Multus's
//!   extension), comma-separated, spaces around items trimmed.
//! * JSON (when the value contains `[`, `{` or `"`, as Multus decides): a list of selection
//!   elements. Keys without a `.` are the spec's (and Multus's `deviceID`); an unknown one is
//!   refused, so a typo never silently drops a request. Keys with a `.` are vendor keys and
//!   ignored.

use super::error::{Problem, SelectionError};
use cni_types::ip::{IpNet, Mac};
use cni_types::validate::is_dns_label;
use serde_json::{Map, Value};
use std::net::IpAddr;

/// Selection-element keys passed to the network's plugins as `runtimeConfig` keys (NPWG
/// §4.1.2), each only to plugins that declare it as a capability.
pub const RUNTIME_KEYS: &[(&str, &str)] = &[
    ("mac", "mac"),
    ("ips", "ips"),
    ("portMappings", "portMappings"),
    ("bandwidth", "bandwidth"),
    ("infiniband-guid", "infinibandGUID"),
    ("deviceID", "deviceID"),
];

/// One selected network, as the annotation asks for it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Element {
    /// The network's name (a DNS-1123 label).
    pub name: String,
    /// Its namespace, when the element names one (else the pod's).
    pub namespace: Option<String>,
    /// The interface name asked for (`interface`, or text form `@ifname`).
    pub interface: Option<String>,
    /// Requests for the network's plugins: runtimeConfig key → value, validated.
    pub runtime: Map<String, Value>,
    /// `cni-args`: merged into each plugin's `args.cni`.
    pub cni_args: Option<Map<String, Value>>,
    /// `default-route`: the gateways of the pod's default routes (may be empty).
    pub default_route: Option<Vec<IpAddr>>,
}

/// Parses the annotation's value (either form); an empty value selects nothing.
pub fn parse(value: &str) -> Result<Vec<Element>, SelectionError> {
    if value.contains(['[', '{', '"']) {
        parse_json(value)
    } else {
        parse_text(value)
    }
}

fn at(index: usize, problem: Problem) -> SelectionError {
    SelectionError::Element { index, network: None, problem }
}

fn parse_text(value: &str) -> Result<Vec<Element>, SelectionError> {
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (index, item) in value.split(',').enumerate() {
        let item = item.trim();
        if item.is_empty() {
            return Err(at(index, Problem::Empty));
        }
        let (reference, interface) = match item.split_once('@') {
            Some((r, i)) => (r, Some(i.to_string())),
            None => (item, None),
        };
        let (namespace, name) = match reference.split_once('/') {
            Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
            None => (None, reference.to_string()),
        };
        let e = Element { name, namespace, interface, ..Element::default() };
        check_names(&e).map_err(|p| at(index, p))?;
        out.push(e);
    }
    Ok(out)
}

fn check_names(e: &Element) -> Result<(), Problem> {
    if !is_dns_label(&e.name) {
        return Err(Problem::NotALabel { key: "name", value: e.name.clone() });
    }
    if let Some(ns) = &e.namespace {
        if !is_dns_label(ns) {
            return Err(Problem::NotALabel { key: "namespace", value: ns.clone() });
        }
    }
    if let Some(i) = &e.interface {
        if let Err(err) = cni_types::validate::interface_name(i) {
            return Err(Problem::BadInterface { value: i.clone(), why: err.msg });
        }
    }
    Ok(())
}

fn parse_json(value: &str) -> Result<Vec<Element>, SelectionError> {
    let list: Value = serde_json::from_str(value).map_err(|e| SelectionError::Malformed(e.to_string()))?;
    let Value::Array(items) = list else {
        return Err(SelectionError::Malformed(format!(
            "a JSON {} where a list of selection elements belongs",
            cni_types::gojson::type_name(&list)
        )));
    };
    let mut out: Vec<Element> = Vec::new();
    let mut default_route_at: Option<usize> = None;
    for (index, item) in items.iter().enumerate() {
        let Value::Object(o) = item else {
            return Err(at(index, Problem::NotAnObject(cni_types::gojson::type_name(item))));
        };
        let e = element(o).map_err(|p| at(index, p))?;
        if e.default_route.is_some() {
            if let Some(first) = default_route_at {
                return Err(at(index, Problem::SecondDefaultRoute { first }));
            }
            default_route_at = Some(index);
        }
        out.push(e);
    }
    Ok(out)
}

fn string<'a>(key: &'static str, v: &'a Value) -> Result<&'a str, Problem> {
    v.as_str().ok_or_else(|| Problem::WrongType { key, expected: "a string", found: v.to_string() })
}

/// One selection element of the JSON form, validated: an annotation's, or the `element` of a
/// claim record ([`braid_attach::claim_record`]), which take the same keys.
pub fn element(o: &Map<String, Value>) -> Result<Element, Problem> {
    let mut e = Element::default();
    for (key, v) in o {
        match key.as_str() {
            "name" => e.name = string("name", v)?.to_string(),
            "namespace" => e.namespace = Some(string("namespace", v)?.to_string()),
            "interface" => e.interface = Some(string("interface", v)?.to_string()),
            "mac" => {
                let s = string("mac", v)?;
                if !Mac::parse(s).is_ok_and(|m| m.as_bytes().len() == 6) {
                    return Err(Problem::BadValue { key: "mac", value: v.to_string(), want: "a 6-byte MAC address" });
                }
                e.runtime.insert("mac".into(), v.clone());
            }
            "infiniband-guid" => {
                let s = string("infiniband-guid", v)?;
                if !Mac::parse(s).is_ok_and(|m| m.as_bytes().len() == 8) {
                    return Err(Problem::BadValue {
                        key: "infiniband-guid",
                        value: v.to_string(),
                        want: "an 8-byte GUID (xx:xx:xx:xx:xx:xx:xx:xx)",
                    });
                }
                e.runtime.insert("infinibandGUID".into(), v.clone());
            }
            "ips" => {
                let ok = v.as_array().is_some_and(|a| {
                    a.iter()
                        .all(|ip| ip.as_str().is_some_and(|s| IpNet::parse(s).is_ok() || s.parse::<IpAddr>().is_ok()))
                });
                if !ok {
                    return Err(Problem::BadValue {
                        key: "ips",
                        value: v.to_string(),
                        want: "a list of IP addresses, each with an optional /prefix",
                    });
                }
                e.runtime.insert("ips".into(), v.clone());
            }
            "portMappings" => {
                let pm = port_mappings(v).map_err(|want| Problem::BadValue {
                    key: "portMappings",
                    value: v.to_string(),
                    want,
                })?;
                e.runtime.insert("portMappings".into(), pm);
            }
            "bandwidth" => {
                bandwidth(v).map_err(|want| Problem::BadValue { key: "bandwidth", value: v.to_string(), want })?;
                e.runtime.insert("bandwidth".into(), v.clone());
            }
            "deviceID" => {
                if device_id(string("deviceID", v)?).is_none() {
                    return Err(Problem::BadValue { key: "deviceID", value: v.to_string(), want: DEVICE_ID_FORMS });
                }
                e.runtime.insert("deviceID".into(), v.clone());
            }
            "cni-args" => match v {
                Value::Object(m) => e.cni_args = Some(m.clone()),
                Value::Null => {}
                other => {
                    return Err(Problem::WrongType { key: "cni-args", expected: "an object", found: other.to_string() })
                }
            },
            "default-route" => {
                let gws: Option<Vec<IpAddr>> = v
                    .as_array()
                    .and_then(|a| a.iter().map(|g| g.as_str().and_then(|s| s.parse::<IpAddr>().ok())).collect());
                match gws {
                    Some(g) => e.default_route = Some(g),
                    None => {
                        return Err(Problem::BadValue {
                            key: "default-route",
                            value: v.to_string(),
                            want: "a list of gateway IP addresses",
                        })
                    }
                }
            }
            "ipam-claim-reference" | "interfaceRequest" => return Err(Problem::Unsupported(key.clone())),
            k if k.contains('.') => {}
            k => return Err(Problem::UnknownKey(k.to_string())),
        }
    }
    if !o.contains_key("name") {
        return Err(Problem::MissingName);
    }
    check_names(&e)?;
    Ok(e)
}

/// What a `deviceID` may be, as a refusal says it.
pub const DEVICE_ID_FORMS: &str =
    "a PCI address (dddd:bb:dd.f, lower-case hex) or an auxiliary device name (module.device.N)";

/// The forms of `deviceID` braid passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceId {
    /// A PCI address as sysfs names it (`/sys/bus/pci/devices/<id>`): CNI's CONVENTIONS.md
    /// defines `deviceID` as "a PCI address of the network device" (`0000:04:00.5`), and
    /// host-device (`loadConf`: `pciBusID` ← `runtimeConfig.deviceID`) and SR-IOV CNI use it so.
    Pci,
    /// An auxiliary-bus device (`/sys/bus/auxiliary/devices/<id>`, e.g. `mlx5_core.sf.4`): what
    /// the SR-IOV network device plugin hands out for auxiliary network devices (subfunctions).
    Auxiliary,
}

/// Which form `s` is, `None` when it is neither. Plugins build sysfs paths from it, so only
/// these exact shapes pass: no `/`, no `..`, nothing empty.
///
/// * PCI: `domain:bus:device.function` as the kernel prints it (`pci_name()`: `%04x:%02x:%02x.%d`)
///   — a domain of 4 to 8 hex digits (VMD domains are wider than 4), bus 2 hex digits, device
///   2 hex digits up to `1f`, function `0`–`7`.
/// * Auxiliary: `<module>.<device>.<id>` (the auxiliary bus's `auxiliary_device_init` naming):
///   module and device of lower-case letters, digits and `_`, the id a decimal number.
pub fn device_id(s: &str) -> Option<DeviceId> {
    let hex = |p: &str, min: usize, max: usize| {
        (min..=max).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    };
    let parts: Vec<&str> = s.split(':').collect();
    if let [domain, bus, slot] = parts[..] {
        let (dev, func) = slot.split_once('.')?;
        let ok = hex(domain, 4, 8)
            && hex(bus, 2, 2)
            && hex(dev, 2, 2)
            && u8::from_str_radix(dev, 16).is_ok_and(|d| d <= 0x1f)
            && func.len() == 1
            && func.bytes().all(|c| (b'0'..=b'7').contains(&c));
        return ok.then_some(DeviceId::Pci);
    }
    let word = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
    let parts: Vec<&str> = s.split('.').collect();
    match parts[..] {
        [module, device, id]
            if s.len() <= 64
                && word(module)
                && word(device)
                && !id.is_empty()
                && id.bytes().all(|c| c.is_ascii_digit()) =>
        {
            Some(DeviceId::Auxiliary)
        }
        _ => None,
    }
}

/// `[{hostPort, containerPort, protocol?, hostIP?}]`, ports 1…65535, protocol TCP/UDP/SCTP in
/// any case (default TCP): normalised to portmap's spelling (`protocol` lower case).
fn port_mappings(v: &Value) -> Result<Value, &'static str> {
    const WANT: &str =
        "a list of {\"hostPort\": 1-65535, \"containerPort\": 1-65535, \"protocol\": \"tcp\"|\"udp\"|\"sctp\", \"hostIP\": ip}";
    let items = v.as_array().ok_or(WANT)?;
    let mut out = Vec::new();
    for item in items {
        let o = item.as_object().ok_or(WANT)?;
        let port = |k: &str| o.get(k).and_then(Value::as_u64).filter(|p| (1..=65535).contains(p)).ok_or(WANT);
        let mut m = Map::new();
        m.insert("hostPort".into(), port("hostPort")?.into());
        m.insert("containerPort".into(), port("containerPort")?.into());
        let protocol = match o.get("protocol") {
            None | Some(Value::Null) => "tcp".to_string(),
            Some(Value::String(p)) if ["tcp", "udp", "sctp"].contains(&p.to_ascii_lowercase().as_str()) => {
                p.to_ascii_lowercase()
            }
            Some(_) => return Err(WANT),
        };
        m.insert("protocol".into(), protocol.into());
        match o.get("hostIP") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() || s.parse::<IpAddr>().is_ok() => {
                m.insert("hostIP".into(), s.clone().into());
            }
            Some(_) => return Err(WANT),
        }
        if o.keys().any(|k| !["hostPort", "containerPort", "protocol", "hostIP"].contains(&k.as_str())) {
            return Err(WANT);
        }
        out.push(Value::Object(m));
    }
    Ok(Value::Array(out))
}

/// `{ingressRate, ingressBurst, egressRate, egressBurst}`: non-negative integers (bits/s,
/// bits), a burst only with its rate.
fn bandwidth(v: &Value) -> Result<(), &'static str> {
    const WANT: &str =
        "{\"ingressRate\", \"ingressBurst\", \"egressRate\", \"egressBurst\"}: non-negative integers, a burst only with its rate";
    let o = v.as_object().ok_or(WANT)?;
    const KEYS: [&str; 4] = ["ingressRate", "ingressBurst", "egressRate", "egressBurst"];
    if o.keys().any(|k| !KEYS.contains(&k.as_str())) || o.values().any(|n| n.as_u64().is_none()) {
        return Err(WANT);
    }
    for (burst, rate) in [("ingressBurst", "ingressRate"), ("egressBurst", "egressRate")] {
        if o.contains_key(burst) && !o.contains_key(rate) {
            return Err(WANT);
        }
    }
    Ok(())
}
