//! Printing results with Go's presence rules and key order.
//!
//! 0.x results are printed in Go's struct order; 1.x results with keys sorted at every level
//! (Go re-marshals them through a map). The sorting is serde_json's own: a 1.x result goes
//! through [`serde_json::to_value`], whose objects are `BTreeMap`s (the workspace never enables
//! serde_json's `preserve_order`). `interface: 0`, `table: 0` and `scope: 0` are printed,
//! `mtu: 0` is not; `dns` disappears from 1.x output when empty but is always there in 0.x
//! output.

use super::model::{AnyResult, CniResult, Dns, IpConfigLegacy, ResultLegacy, ResultV04, Route};
use crate::gojson::print::{to_go_string, to_go_string_pretty};
use crate::ip::IpNet;
use serde::Serialize;
use serde_json::Value;
use std::net::IpAddr;

impl AnyResult {
    /// The JSON value of the result, as Go would marshal it.
    pub fn to_value(&self) -> Value {
        let v = match self {
            AnyResult::Legacy(r) => serde_json::to_value(legacy_wire(r)),
            AnyResult::V04(r) => serde_json::to_value(v04_wire(r)),
            AnyResult::V1(r) => serde_json::to_value(v1_wire(r)),
        };
        // The wire structs hold only strings, numbers and lists: serialisation cannot fail.
        v.unwrap_or(Value::Null)
    }

    /// Go's `PrintTo`: indented with 4 spaces, no trailing newline.
    pub fn to_json_pretty(&self) -> String {
        match self {
            AnyResult::Legacy(r) => to_go_string_pretty(&legacy_wire(r)),
            AnyResult::V04(r) => to_go_string_pretty(&v04_wire(r)),
            // Keys sorted: through a map, as Go does.
            AnyResult::V1(_) => to_go_string_pretty(&self.to_value()),
        }
    }

    /// Go's `json.Marshal`: compact.
    pub fn to_json(&self) -> String {
        match self {
            AnyResult::Legacy(r) => to_go_string(&legacy_wire(r)),
            AnyResult::V04(r) => to_go_string(&v04_wire(r)),
            AnyResult::V1(_) => to_go_string(&self.to_value()),
        }
    }
}

impl CniResult {
    /// Prints in `version` (Go's `types.PrintResult` after conversion).
    pub fn to_json_pretty_as(&self, version: &str) -> Result<String, super::convert::ConvertError> {
        Ok(self.convert_to(version)?.to_json_pretty())
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

#[derive(Serialize)]
struct DnsWire<'a> {
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    nameservers: &'a [String],
    #[serde(skip_serializing_if = "str::is_empty")]
    domain: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    search: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    options: &'a [String],
}

fn dns_wire(d: &Dns) -> DnsWire<'_> {
    DnsWire { nameservers: &d.nameservers, domain: &d.domain, search: &d.search, options: &d.options }
}

#[derive(Serialize)]
struct RouteWire<'a> {
    dst: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gw: Option<IpAddr>,
    #[serde(skip_serializing_if = "is_zero")]
    mtu: i64,
    #[serde(skip_serializing_if = "is_zero")]
    advmss: i64,
    #[serde(skip_serializing_if = "is_zero")]
    priority: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<i64>,
}

fn route_wire(r: &Route) -> RouteWire<'_> {
    RouteWire {
        dst: &r.dst,
        gw: r.gw,
        mtu: r.mtu,
        advmss: r.advmss,
        priority: r.priority,
        table: r.table,
        scope: r.scope,
    }
}

/// A 1.0.0/1.1.0 interface (Go's `types100.Interface`).
#[derive(Serialize)]
struct InterfaceV1Wire<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    mac: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    mtu: i64,
    #[serde(skip_serializing_if = "str::is_empty")]
    sandbox: &'a str,
    #[serde(rename = "socketPath", skip_serializing_if = "str::is_empty")]
    socket_path: &'a str,
    #[serde(rename = "pciID", skip_serializing_if = "str::is_empty")]
    pci_id: &'a str,
}

/// A 1.0.0/1.1.0 IP (Go's `types100.IPConfig`).
#[derive(Serialize)]
struct IpV1Wire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<i64>,
    address: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
}

/// A 1.0.0/1.1.0 result (Go's `types100.Result`); printed through a map, so its field order
/// does not matter.
#[derive(Serialize)]
struct ResultV1Wire<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "str::is_empty")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<InterfaceV1Wire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<IpV1Wire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteWire<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dns: Option<DnsWire<'a>>,
}

fn v1_wire(r: &CniResult) -> ResultV1Wire<'_> {
    ResultV1Wire {
        cni_version: &r.cni_version,
        interfaces: r
            .interfaces
            .iter()
            .map(|i| InterfaceV1Wire {
                name: &i.name,
                mac: &i.mac,
                mtu: i.mtu,
                sandbox: &i.sandbox,
                socket_path: &i.socket_path,
                pci_id: &i.pci_id,
            })
            .collect(),
        ips: r
            .ips
            .iter()
            .map(|ip| IpV1Wire { interface: ip.interface, address: &ip.address, gateway: ip.gateway })
            .collect(),
        routes: r.routes.iter().map(route_wire).collect(),
        dns: (!r.dns.is_empty()).then(|| dns_wire(&r.dns)),
    }
}

/// A 0.3.x/0.4.0 interface (Go's `types040.Interface`).
#[derive(Serialize)]
struct InterfaceV04Wire<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    mac: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    sandbox: &'a str,
}

/// A 0.3.x/0.4.0 IP (Go's `types040.IPConfig`).
#[derive(Serialize)]
struct IpV04Wire<'a> {
    version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<i64>,
    address: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
}

/// A 0.3.x/0.4.0 result (Go's `types040.Result`), in Go's struct order.
#[derive(Serialize)]
struct ResultV04Wire<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "str::is_empty")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<InterfaceV04Wire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<IpV04Wire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteWire<'a>>,
    dns: DnsWire<'a>,
}

fn v04_wire(r: &ResultV04) -> ResultV04Wire<'_> {
    ResultV04Wire {
        cni_version: &r.cni_version,
        interfaces: r
            .interfaces
            .iter()
            .map(|i| InterfaceV04Wire { name: &i.name, mac: &i.mac, sandbox: &i.sandbox })
            .collect(),
        ips: r
            .ips
            .iter()
            .map(|ip| IpV04Wire {
                version: &ip.version,
                interface: ip.interface,
                address: &ip.address,
                gateway: ip.gateway,
            })
            .collect(),
        routes: r.routes.iter().map(route_wire).collect(),
        dns: dns_wire(&r.dns),
    }
}

/// One address family of a 0.1.0/0.2.0 result (Go's `types020.IPConfig`).
#[derive(Serialize)]
struct IpLegacyWire<'a> {
    ip: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteWire<'a>>,
}

/// A 0.1.0/0.2.0 result (Go's `types020.Result`), in Go's struct order.
#[derive(Serialize)]
struct ResultLegacyWire<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "str::is_empty")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip4: Option<IpLegacyWire<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip6: Option<IpLegacyWire<'a>>,
    dns: DnsWire<'a>,
}

fn ip_legacy_wire(c: &IpConfigLegacy) -> IpLegacyWire<'_> {
    IpLegacyWire { ip: &c.ip, gateway: c.gateway, routes: c.routes.iter().map(route_wire).collect() }
}

fn legacy_wire(r: &ResultLegacy) -> ResultLegacyWire<'_> {
    ResultLegacyWire {
        cni_version: &r.cni_version,
        ip4: r.ip4.as_ref().map(ip_legacy_wire),
        ip6: r.ip6.as_ref().map(ip_legacy_wire),
        dns: dns_wire(&r.dns),
    }
}
