//! Decoding results (Go's `create.Create`): the *requested* version picks the family, and the
//! document's own `cniVersion` must belong to it.
//!
//! One deliberate difference from Go: an IP without `address` or a route without `dst` is an
//! error here. Go accepts both and prints `"<nil>"`, which no consumer can use.

use super::model::{
    AnyResult, CniResult, Dns, Interface, InterfaceV04, IpConfig, IpConfigLegacy, IpConfigV04, ResultLegacy, ResultV04,
    Route,
};
use crate::decode::{DecodeError, GoStruct};
use crate::error::{CniError, DECODING_FAILURE};
use crate::gojson::quote::quote;
use crate::ip::{parse_ip, IpNet};
use crate::version::Family;
use serde_json::Value;
use std::net::IpAddr;

/// Why bytes could not be made into a result of the requested version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// `unsupported CNI result version "9.9.9"`: the requested version names no family.
    #[error("unsupported CNI result version {}", quote(.0))]
    UnsupportedVersion(String),
    /// The JSON is malformed or a field has the wrong type or an unparsable address.
    #[error("{0}")]
    Decode(String),
    /// `result type supports [1.0.0 1.1.0] but unmarshalled CNIVersion is "0.4.0"`.
    #[error("result type supports [{}] but unmarshalled CNIVersion is {}", .supported.join(" "), quote(.got))]
    WrongFamily {
        /// The versions the requested family accepts.
        supported: &'static [&'static str],
        /// The document's own `cniVersion`.
        got: String,
    },
}

impl From<DecodeError> for CreateError {
    fn from(e: DecodeError) -> Self {
        CreateError::Decode(e.0)
    }
}

impl From<CreateError> for CniError {
    /// Code 6 ([`DECODING_FAILURE`]): a result did not parse in the version it claims.
    fn from(e: CreateError) -> CniError {
        CniError::new(DECODING_FAILURE, e.to_string())
    }
}

impl AnyResult {
    /// Parses a result that must belong to `version`'s family (Go's `create.Create`).
    pub fn create(version: &str, bytes: &[u8]) -> Result<AnyResult, CreateError> {
        if Family::of(version).is_none() {
            return Err(CreateError::UnsupportedVersion(version.to_string()));
        }
        let value = crate::gojson::scan::parse(bytes).map_err(|e| CreateError::Decode(e.0))?;
        AnyResult::create_from_value(version, &value)
    }

    /// Like [`create`](Self::create) from an already-parsed JSON value.
    pub fn create_from_value(version: &str, value: &Value) -> Result<AnyResult, CreateError> {
        let family = Family::of(version).ok_or_else(|| CreateError::UnsupportedVersion(version.to_string()))?;
        AnyResult::create_from_struct(family, GoStruct::root(value, "Result")?)
    }

    /// [`AnyResult::create_from_value`] of a JSON object (a `prevResult` inside a parsed
    /// configuration, read where it is).
    pub fn create_from_map(version: &str, map: &serde_json::Map<String, Value>) -> Result<AnyResult, CreateError> {
        let family = Family::of(version).ok_or_else(|| CreateError::UnsupportedVersion(version.to_string()))?;
        AnyResult::create_from_struct(family, GoStruct::of_map(map, "Result"))
    }

    fn create_from_struct(family: Family, obj: GoStruct<'_>) -> Result<AnyResult, CreateError> {
        let mut result = match family {
            Family::Legacy => AnyResult::Legacy(legacy(&obj)?),
            Family::V04 => AnyResult::V04(v04(&obj)?),
            Family::V1 => AnyResult::V1(v1(&obj)?),
        };
        let got = result.version().to_string();
        let ok = family.versions().contains(&got.as_str()) || (family == Family::Legacy && got.is_empty());
        if !ok {
            return Err(CreateError::WrongFamily { supported: family.versions(), got });
        }
        if let AnyResult::Legacy(r) = &mut result {
            if r.cni_version.is_empty() {
                r.cni_version = crate::version::DEFAULT.to_string();
            }
        }
        Ok(result)
    }

    /// Parses a result in the version its own `cniVersion` names (missing: 0.1.0).
    pub fn from_bytes(bytes: &[u8]) -> Result<AnyResult, CreateError> {
        let version = crate::version::decode_version(bytes).map_err(|e| CreateError::Decode(e.to_string()))?;
        AnyResult::create(&version, bytes)
    }
}

fn required_cidr(obj: &GoStruct<'_>, key: &str, what: &str) -> Result<IpNet, DecodeError> {
    match obj.opt_string(key)? {
        Some(s) => IpNet::parse(&s).map_err(|e| DecodeError(e.to_string())),
        None => Err(DecodeError(format!("{what} has no {key:?}"))),
    }
}

fn opt_ip(obj: &GoStruct<'_>, key: &str) -> Result<Option<IpAddr>, DecodeError> {
    match obj.opt_string(key)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => parse_ip(&s).map(Some).map_err(|e| DecodeError(e.to_string())),
    }
}

fn dns(obj: &GoStruct<'_>) -> Result<Dns, DecodeError> {
    let Some(d) = obj.object("dns")? else {
        return Ok(Dns::default());
    };
    Ok(Dns {
        nameservers: d.string_list("nameservers")?,
        domain: d.string("domain")?,
        search: d.string_list("search")?,
        options: d.string_list("options")?,
    })
}

/// Decodes one route object (shared by all families and by the merge module's callers).
pub(crate) fn route(r: &GoStruct<'_>) -> Result<Route, DecodeError> {
    Ok(Route {
        dst: required_cidr(r, "dst", "a route")?,
        gw: opt_ip(r, "gw")?,
        mtu: r.int("mtu")?.unwrap_or(0),
        advmss: r.int("advmss")?.unwrap_or(0),
        priority: r.int("priority")?.unwrap_or(0),
        table: r.int("table")?,
        scope: r.int("scope")?,
    })
}

fn routes(obj: &GoStruct<'_>) -> Result<Vec<Route>, DecodeError> {
    obj.objects("routes")?.iter().map(route).collect()
}

fn v1(obj: &GoStruct<'_>) -> Result<CniResult, DecodeError> {
    let interfaces = obj
        .objects("interfaces")?
        .iter()
        .map(|i| {
            Ok(Interface {
                name: i.string("name")?,
                mac: i.string("mac")?,
                mtu: i.int("mtu")?.unwrap_or(0),
                sandbox: i.string("sandbox")?,
                socket_path: i.string("socketPath")?,
                pci_id: i.string("pciID")?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    let ips = obj
        .objects("ips")?
        .iter()
        .map(|ip| {
            Ok(IpConfig {
                address: required_cidr(ip, "address", "an IP entry")?,
                gateway: opt_ip(ip, "gateway")?,
                interface: ip.int("interface")?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    Ok(CniResult { cni_version: obj.string("cniVersion")?, interfaces, ips, routes: routes(obj)?, dns: dns(obj)? })
}

fn v04(obj: &GoStruct<'_>) -> Result<ResultV04, DecodeError> {
    let interfaces = obj
        .objects("interfaces")?
        .iter()
        .map(|i| Ok(InterfaceV04 { name: i.string("name")?, mac: i.string("mac")?, sandbox: i.string("sandbox")? }))
        .collect::<Result<_, DecodeError>>()?;
    let ips = obj
        .objects("ips")?
        .iter()
        .map(|ip| {
            Ok(IpConfigV04 {
                version: ip.string("version")?,
                interface: ip.int("interface")?,
                address: required_cidr(ip, "address", "an IP entry")?,
                gateway: opt_ip(ip, "gateway")?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    Ok(ResultV04 { cni_version: obj.string("cniVersion")?, interfaces, ips, routes: routes(obj)?, dns: dns(obj)? })
}

fn legacy_ip(obj: &GoStruct<'_>, key: &'static str) -> Result<Option<IpConfigLegacy>, DecodeError> {
    let Some(c) = obj.object(key)? else {
        return Ok(None);
    };
    Ok(Some(IpConfigLegacy { ip: required_cidr(&c, "ip", key)?, gateway: opt_ip(&c, "gateway")?, routes: routes(&c)? }))
}

fn legacy(obj: &GoStruct<'_>) -> Result<ResultLegacy, DecodeError> {
    Ok(ResultLegacy {
        cni_version: obj.string("cniVersion")?,
        ip4: legacy_ip(obj, "ip4")?,
        ip6: legacy_ip(obj, "ip6")?,
        dns: dns(obj)?,
    })
}
