//! The result model: one type per wire family, and [`AnyResult`] holding one of them.

use crate::ip::IpNet;
use crate::version::Family;
use std::net::IpAddr;

/// An interface in a 1.x result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Interface {
    /// The interface name (always printed, even when empty).
    pub name: String,
    /// The hardware address as text; kept verbatim (see [`Mac`](crate::ip::Mac) to compare).
    pub mac: String,
    /// MTU (1.1); 0 means unknown and is not printed.
    pub mtu: i64,
    /// The network namespace path for container interfaces; empty for host interfaces.
    pub sandbox: String,
    /// A vhost-user or similar socket path (1.1).
    pub socket_path: String,
    /// The PCI address of a device interface (1.1).
    pub pci_id: String,
}

/// An IP address assigned by a 1.x result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IpConfig {
    /// Address and prefix, host bits kept.
    pub address: IpNet,
    /// The gateway, if any.
    pub gateway: Option<IpAddr>,
    /// Index into the result's `interfaces`. Go never validates it, so any value round-trips;
    /// consumers must treat negative or out-of-range values as "unknown".
    pub interface: Option<i64>,
}

/// A route, shared by all families (in Go too, which is why 1.1 fields survive in 0.4.0).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// Destination, host bits kept.
    pub dst: IpNet,
    /// Next hop, if any.
    pub gw: Option<IpAddr>,
    /// Route MTU (1.1); 0 is unset.
    pub mtu: i64,
    /// Advertised MSS (1.1); 0 is unset.
    pub advmss: i64,
    /// Route metric (1.1); 0 is unset.
    pub priority: i64,
    /// Routing table (1.1); an explicit 0 is kept.
    pub table: Option<i64>,
    /// Route scope (1.1): 0 global, 253 link, 254 host; an explicit 0 is kept.
    pub scope: Option<i64>,
}

impl Route {
    /// A route with only a destination and an optional gateway.
    pub fn new(dst: IpNet, gw: Option<IpAddr>) -> Route {
        Route { dst, gw, mtu: 0, advmss: 0, priority: 0, table: None, scope: None }
    }
}

/// DNS settings of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Dns {
    /// Name servers, in order of preference.
    pub nameservers: Vec<String>,
    /// The local domain.
    pub domain: String,
    /// Search domains.
    pub search: Vec<String>,
    /// resolv.conf options.
    pub options: Vec<String>,
}

impl Dns {
    /// Whether every member is empty (1.x results then omit `dns` altogether).
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty() && self.domain.is_empty() && self.search.is_empty() && self.options.is_empty()
    }
}

/// A 1.0.0/1.1.0 result: the model every braid plugin computes in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CniResult {
    /// `1.0.0` or `1.1.0`.
    pub cni_version: String,
    /// Interfaces, host-side ones included.
    pub interfaces: Vec<Interface>,
    /// Addresses.
    pub ips: Vec<IpConfig>,
    /// Routes.
    pub routes: Vec<Route>,
    /// DNS.
    pub dns: Dns,
}

/// An interface in a 0.3.x/0.4.0 result: no 1.1 fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InterfaceV04 {
    /// Name.
    pub name: String,
    /// Hardware address text.
    pub mac: String,
    /// Namespace path; empty for host interfaces.
    pub sandbox: String,
}

/// An IP in a 0.3.x/0.4.0 result, with its `version` string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IpConfigV04 {
    /// `"4"` or `"6"` as written; may be empty (then it cannot be converted to 0.2.0).
    pub version: String,
    /// Index into `interfaces`.
    pub interface: Option<i64>,
    /// Address and prefix.
    pub address: IpNet,
    /// Gateway.
    pub gateway: Option<IpAddr>,
}

/// A 0.3.0/0.3.1/0.4.0 result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResultV04 {
    /// `0.3.0`, `0.3.1` or `0.4.0`.
    pub cni_version: String,
    /// Interfaces.
    pub interfaces: Vec<InterfaceV04>,
    /// Addresses.
    pub ips: Vec<IpConfigV04>,
    /// Routes (the shared type: 1.1 route fields are kept).
    pub routes: Vec<Route>,
    /// DNS.
    pub dns: Dns,
}

/// One address family of a legacy result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IpConfigLegacy {
    /// Address and prefix.
    pub ip: IpNet,
    /// Gateway.
    pub gateway: Option<IpAddr>,
    /// Routes of this family.
    pub routes: Vec<Route>,
}

/// A 0.1.0/0.2.0 result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ResultLegacy {
    /// `0.1.0` or `0.2.0`.
    pub cni_version: String,
    /// The IPv4 configuration.
    pub ip4: Option<IpConfigLegacy>,
    /// The IPv6 configuration.
    pub ip6: Option<IpConfigLegacy>,
    /// DNS.
    pub dns: Dns,
}

/// A result of any version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AnyResult {
    /// 0.1.0 / 0.2.0.
    Legacy(ResultLegacy),
    /// 0.3.0 / 0.3.1 / 0.4.0.
    V04(ResultV04),
    /// 1.0.0 / 1.1.0.
    V1(CniResult),
}

impl AnyResult {
    /// The `cniVersion` label.
    pub fn version(&self) -> &str {
        match self {
            AnyResult::Legacy(r) => &r.cni_version,
            AnyResult::V04(r) => &r.cni_version,
            AnyResult::V1(r) => &r.cni_version,
        }
    }

    /// The wire family.
    pub fn family(&self) -> Family {
        match self {
            AnyResult::Legacy(_) => Family::Legacy,
            AnyResult::V04(_) => Family::V04,
            AnyResult::V1(_) => Family::V1,
        }
    }
}

impl From<CniResult> for AnyResult {
    fn from(r: CniResult) -> Self {
        AnyResult::V1(r)
    }
}
