//! The Go library's conversion graph (`pkg/types/internal`), edge for edge.
//!
//! Within a family only the label changes — including 1.1.0 → 1.0.0, which keeps the 1.1 fields,
//! as Go does. Up-conversions go through 0.4.0; down-conversions to the legacy family go through
//! 0.4.0 and keep only the first IPv4 and first IPv6 address (picked by the `version` string),
//! with the routes whose destination matches a kept family.

use super::model::{
    AnyResult, CniResult, Interface, InterfaceV04, IpConfig, IpConfigLegacy, IpConfigV04, ResultLegacy, ResultV04,
    Route,
};
use crate::error::{CniError, INTERNAL};
use crate::version::Family;

/// Why a result could not be converted; the text is Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// `no converter for CNI result version 1.1.0 to 2.0.0`
    #[error("no converter for CNI result version {from} to {to}")]
    NoConverter {
        /// The result's version.
        from: String,
        /// The requested version.
        to: String,
    },
    /// `cannot convert: no valid IP addresses`: a legacy result needs an IPv4 or IPv6 address.
    #[error("cannot convert: no valid IP addresses")]
    NoValidIp,
}

impl From<ConvertError> for CniError {
    /// Code 999 ([`INTERNAL`]): a result cannot be expressed in the requested version (Go
    /// returns a plain error).
    fn from(e: ConvertError) -> CniError {
        CniError::new(INTERNAL, e.to_string())
    }
}

impl AnyResult {
    /// Converts to `version` with the Go library's edges, losses and errors (Go's
    /// `GetAsVersion`).
    pub fn convert_to(&self, version: &str) -> Result<AnyResult, ConvertError> {
        convert(self, version)
    }

    /// [`AnyResult::convert_to`], consuming: a result already in `version` comes back as it
    /// is, not copied — so a plugin that converted its result to check that it can be printed
    /// (the delegator, before it may still undo its delegates) costs the skel no second
    /// conversion.
    pub fn into_version(self, version: &str) -> Result<AnyResult, ConvertError> {
        if already_in(&self, version) {
            return Ok(self);
        }
        convert(&self, version)
    }

    /// Converts to the 1.1.0 model (never fails: every family converts up losslessly enough).
    pub fn to_latest(&self) -> CniResult {
        to_latest(self)
    }
}

impl CniResult {
    /// Converts this result to any version (see [`AnyResult::convert_to`]).
    pub fn convert_to(&self, version: &str) -> Result<AnyResult, ConvertError> {
        convert(&AnyResult::V1(self.clone()), version)
    }
}

/// Whether `r` is labelled `to` already (Go labels a struct with an empty version as its
/// family's newest before converting; an empty `to` is 0.1.0).
fn already_in(r: &AnyResult, to: &str) -> bool {
    let to = if to.is_empty() { crate::version::DEFAULT } else { to };
    let from = if r.version().is_empty() { r.family().newest() } else { r.version() };
    from == to
}

fn convert(r: &AnyResult, to: &str) -> Result<AnyResult, ConvertError> {
    if already_in(r, to) {
        return Ok(r.clone());
    }
    let to = if to.is_empty() { crate::version::DEFAULT } else { to };
    let from = if r.version().is_empty() { r.family().newest() } else { r.version() };
    let no_converter = || ConvertError::NoConverter { from: from.to_string(), to: to.to_string() };
    // Go's registry is keyed by version: a label that names no family, or another family than
    // the data's shape, has no converter.
    if Family::of(from) != Some(r.family()) {
        return Err(no_converter());
    }
    let target = Family::of(to).ok_or_else(no_converter)?;
    let label = to.to_string();
    Ok(match (r, target) {
        (AnyResult::Legacy(a), Family::Legacy) => AnyResult::Legacy(ResultLegacy { cni_version: label, ..a.clone() }),
        (AnyResult::Legacy(a), Family::V04) => AnyResult::V04(ResultV04 { cni_version: label, ..legacy_to_v04(a) }),
        (AnyResult::Legacy(a), Family::V1) => {
            AnyResult::V1(CniResult { cni_version: label, ..v04_to_v1(&legacy_to_v04(a)) })
        }
        (AnyResult::V04(b), Family::Legacy) => {
            AnyResult::Legacy(ResultLegacy { cni_version: label, ..v04_to_legacy(b)? })
        }
        (AnyResult::V04(b), Family::V04) => AnyResult::V04(ResultV04 { cni_version: label, ..b.clone() }),
        (AnyResult::V04(b), Family::V1) => AnyResult::V1(CniResult { cni_version: label, ..v04_to_v1(b) }),
        (AnyResult::V1(c), Family::Legacy) => {
            AnyResult::Legacy(ResultLegacy { cni_version: label, ..v04_to_legacy(&v1_to_v04(c))? })
        }
        (AnyResult::V1(c), Family::V04) => AnyResult::V04(ResultV04 { cni_version: label, ..v1_to_v04(c) }),
        (AnyResult::V1(c), Family::V1) => AnyResult::V1(CniResult { cni_version: label, ..c.clone() }),
    })
}

fn to_latest(r: &AnyResult) -> CniResult {
    let label = crate::version::CURRENT.to_string();
    match r {
        AnyResult::Legacy(a) => CniResult { cni_version: label, ..v04_to_v1(&legacy_to_v04(a)) },
        AnyResult::V04(b) => CniResult { cni_version: label, ..v04_to_v1(b) },
        AnyResult::V1(c) => CniResult { cni_version: label, ..c.clone() },
    }
}

fn legacy_to_v04(a: &ResultLegacy) -> ResultV04 {
    let mut ips = Vec::new();
    let mut routes = Vec::new();
    for (version, slot) in [("4", &a.ip4), ("6", &a.ip6)] {
        if let Some(c) = slot {
            ips.push(IpConfigV04 { version: version.to_string(), interface: None, address: c.ip, gateway: c.gateway });
            routes.extend(c.routes.iter().cloned());
        }
    }
    ResultV04 { cni_version: "0.4.0".into(), interfaces: Vec::new(), ips, routes, dns: a.dns.clone() }
}

fn v04_to_legacy(b: &ResultV04) -> Result<ResultLegacy, ConvertError> {
    let pick = |v: &str| {
        b.ips.iter().find(|ip| ip.version == v).map(|ip| IpConfigLegacy {
            ip: ip.address,
            gateway: ip.gateway,
            routes: Vec::new(),
        })
    };
    let mut ip4 = pick("4");
    let mut ip6 = pick("6");
    for r in &b.routes {
        let slot = if r.dst.is_ipv4() { &mut ip4 } else { &mut ip6 };
        if let Some(c) = slot {
            c.routes.push(Route::new(r.dst, r.gw));
        }
    }
    if ip4.is_none() && ip6.is_none() {
        return Err(ConvertError::NoValidIp);
    }
    Ok(ResultLegacy { cni_version: "0.2.0".into(), ip4, ip6, dns: b.dns.clone() })
}

fn v04_to_v1(b: &ResultV04) -> CniResult {
    CniResult {
        cni_version: "1.0.0".into(),
        interfaces: b
            .interfaces
            .iter()
            .map(|i| Interface {
                name: i.name.clone(),
                mac: i.mac.clone(),
                sandbox: i.sandbox.clone(),
                ..Interface::default()
            })
            .collect(),
        ips: b
            .ips
            .iter()
            .map(|ip| IpConfig { address: ip.address, gateway: ip.gateway, interface: ip.interface })
            .collect(),
        routes: b.routes.clone(),
        dns: b.dns.clone(),
    }
}

fn v1_to_v04(c: &CniResult) -> ResultV04 {
    ResultV04 {
        cni_version: "0.4.0".into(),
        interfaces: c
            .interfaces
            .iter()
            .map(|i| InterfaceV04 { name: i.name.clone(), mac: i.mac.clone(), sandbox: i.sandbox.clone() })
            .collect(),
        ips: c
            .ips
            .iter()
            .map(|ip| IpConfigV04 {
                version: if ip.address.is_ipv4() { "4" } else { "6" }.to_string(),
                interface: ip.interface,
                address: ip.address,
                gateway: ip.gateway,
            })
            .collect(),
        routes: c.routes.clone(),
        dns: c.dns.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_of_another_family_has_no_converter() {
        let mislabelled = AnyResult::V1(CniResult { cni_version: "0.4.0".into(), ..CniResult::default() });
        assert_eq!(
            mislabelled.convert_to("1.1.0").unwrap_err().to_string(),
            "no converter for CNI result version 0.4.0 to 1.1.0"
        );
    }

    #[test]
    fn into_version_is_convert_to_by_value() {
        let r = AnyResult::V1(CniResult { cni_version: "1.0.0".into(), ..CniResult::default() });
        for to in ["1.0.0", "1.1.0", "0.4.0", "0.2.0", ""] {
            assert_eq!(r.clone().into_version(to), r.convert_to(to), "to {to:?}");
        }
        let mislabelled = AnyResult::V1(CniResult { cni_version: "0.4.0".into(), ..CniResult::default() });
        assert_eq!(mislabelled.clone().into_version("1.1.0"), mislabelled.convert_to("1.1.0"));
    }
}
