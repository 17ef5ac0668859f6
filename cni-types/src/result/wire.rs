//! Serialisation with Go's presence rules and key order.
//!
//! 1.x results are printed with keys sorted at every level (Go re-marshals them through a map);
//! 0.x results in struct order. `interface: 0`, `table: 0` and `scope: 0` are printed, `mtu: 0`
//! is not; `dns` disappears from 1.x output when empty but is always there in 0.x output.

use super::{AnyResult, CniResult, Dns, IpConfig, IpConfigLegacy, IpConfigV04, ResultLegacy, ResultV04, Route};
use crate::ip::IpNet;
use serde::Serialize;
use std::net::IpAddr;

fn is_zero(v: &i64) -> bool {
    *v == 0
}

#[derive(Serialize)]
struct DnsSorted<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    domain: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    nameservers: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    options: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    search: &'a [String],
}

#[derive(Serialize)]
struct DnsStruct<'a> {
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    nameservers: &'a [String],
    #[serde(skip_serializing_if = "str::is_empty")]
    domain: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    search: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    options: &'a [String],
}

fn dns_sorted(d: &Dns) -> DnsSorted<'_> {
    DnsSorted { domain: &d.domain, nameservers: &d.nameservers, options: &d.options, search: &d.search }
}

fn dns_struct(d: &Dns) -> DnsStruct<'_> {
    DnsStruct { nameservers: &d.nameservers, domain: &d.domain, search: &d.search, options: &d.options }
}

#[derive(Serialize)]
struct RouteSorted<'a> {
    #[serde(skip_serializing_if = "is_zero")]
    advmss: i64,
    dst: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gw: Option<IpAddr>,
    #[serde(skip_serializing_if = "is_zero")]
    mtu: i64,
    #[serde(skip_serializing_if = "is_zero")]
    priority: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<i64>,
}

#[derive(Serialize)]
struct RouteStruct<'a> {
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

fn route_sorted(r: &Route) -> RouteSorted<'_> {
    RouteSorted {
        advmss: r.advmss,
        dst: &r.dst,
        gw: r.gw,
        mtu: r.mtu,
        priority: r.priority,
        scope: r.scope,
        table: r.table,
    }
}

fn route_struct(r: &Route) -> RouteStruct<'_> {
    RouteStruct {
        dst: &r.dst,
        gw: r.gw,
        mtu: r.mtu,
        advmss: r.advmss,
        priority: r.priority,
        table: r.table,
        scope: r.scope,
    }
}

#[derive(Serialize)]
struct InterfaceSorted<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    mac: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    mtu: i64,
    name: &'a str,
    #[serde(rename = "pciID", skip_serializing_if = "str::is_empty")]
    pci_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    sandbox: &'a str,
    #[serde(rename = "socketPath", skip_serializing_if = "str::is_empty")]
    socket_path: &'a str,
}

#[derive(Serialize)]
struct IpSorted<'a> {
    address: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<i64>,
}

#[derive(Serialize)]
struct ResultC<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "str::is_empty")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dns: Option<DnsSorted<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<InterfaceSorted<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<IpSorted<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteSorted<'a>>,
}

fn result_c(r: &CniResult) -> ResultC<'_> {
    ResultC {
        cni_version: &r.cni_version,
        dns: (!r.dns.is_empty()).then(|| dns_sorted(&r.dns)),
        interfaces: r
            .interfaces
            .iter()
            .map(|i| InterfaceSorted {
                mac: &i.mac,
                mtu: i.mtu,
                name: &i.name,
                pci_id: &i.pci_id,
                sandbox: &i.sandbox,
                socket_path: &i.socket_path,
            })
            .collect(),
        ips: r
            .ips
            .iter()
            .map(|ip: &IpConfig| IpSorted { address: &ip.address, gateway: ip.gateway, interface: ip.interface })
            .collect(),
        routes: r.routes.iter().map(route_sorted).collect(),
    }
}

#[derive(Serialize)]
struct InterfaceB<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    mac: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    sandbox: &'a str,
}

#[derive(Serialize)]
struct IpB<'a> {
    version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<i64>,
    address: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
}

#[derive(Serialize)]
struct ResultB<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "str::is_empty")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<InterfaceB<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<IpB<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteStruct<'a>>,
    dns: DnsStruct<'a>,
}

fn result_b(r: &ResultV04) -> ResultB<'_> {
    ResultB {
        cni_version: &r.cni_version,
        interfaces: r
            .interfaces
            .iter()
            .map(|i| InterfaceB { name: &i.name, mac: &i.mac, sandbox: &i.sandbox })
            .collect(),
        ips: r
            .ips
            .iter()
            .map(|ip: &IpConfigV04| IpB {
                version: &ip.version,
                interface: ip.interface,
                address: &ip.address,
                gateway: ip.gateway,
            })
            .collect(),
        routes: r.routes.iter().map(route_struct).collect(),
        dns: dns_struct(&r.dns),
    }
}

#[derive(Serialize)]
struct IpA<'a> {
    ip: &'a IpNet,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteStruct<'a>>,
}

#[derive(Serialize)]
struct ResultA<'a> {
    #[serde(rename = "cniVersion", skip_serializing_if = "str::is_empty")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip4: Option<IpA<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip6: Option<IpA<'a>>,
    dns: DnsStruct<'a>,
}

fn ip_a(c: &IpConfigLegacy) -> IpA<'_> {
    IpA { ip: &c.ip, gateway: c.gateway, routes: c.routes.iter().map(route_struct).collect() }
}

fn result_a(r: &ResultLegacy) -> ResultA<'_> {
    ResultA {
        cni_version: &r.cni_version,
        ip4: r.ip4.as_ref().map(ip_a),
        ip6: r.ip6.as_ref().map(ip_a),
        dns: dns_struct(&r.dns),
    }
}

pub(super) fn to_json(r: &AnyResult, pretty: bool) -> String {
    let print = |v: &dyn erased::Ser| v.print(pretty);
    match r {
        AnyResult::Legacy(r) => print(&result_a(r)),
        AnyResult::V04(r) => print(&result_b(r)),
        AnyResult::V1(r) => print(&result_c(r)),
    }
}

pub(super) fn to_value(r: &AnyResult) -> serde_json::Value {
    let v = match r {
        AnyResult::Legacy(r) => serde_json::to_value(result_a(r)),
        AnyResult::V04(r) => serde_json::to_value(result_b(r)),
        AnyResult::V1(r) => serde_json::to_value(result_c(r)),
    };
    // Our wire structs hold only strings, numbers and lists: serialisation cannot fail.
    v.unwrap_or(serde_json::Value::Null)
}

mod erased {
    use crate::gojson::{to_go_string, to_go_string_pretty};
    use serde::Serialize;

    /// Lets `to_json` treat the three wire structs alike.
    pub(super) trait Ser {
        fn print(&self, pretty: bool) -> String;
    }

    impl<T: Serialize> Ser for T {
        fn print(&self, pretty: bool) -> String {
            if pretty {
                to_go_string_pretty(self)
            } else {
                to_go_string(self)
            }
        }
    }
}
