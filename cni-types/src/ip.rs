//! Addresses as CNI results carry them.
//!
//! An [`IpNet`] keeps its host bits (`10.1.0.5/16` is an address *and* its subnet), prints IPv6
//! in RFC 5952 form, and follows Go's rule for IPv4-mapped IPv6 (`::ffff:10.0.0.7/120`): such an
//! address *is* IPv4, printed `10.0.0.7/24`, reported as version 4 and put in `ip4` by legacy
//! conversions. The mapping is applied once, when parsing, so every later step agrees.

use crate::error::{CniError, INVALID_NETWORK_CONFIG};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address with a prefix length, host bits preserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// An address or CIDR that did not parse; the text is Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    /// `invalid CIDR address: 10.0.0.300/24`
    #[error("invalid CIDR address: {0}")]
    Cidr(String),
    /// `invalid IP address: nope`
    #[error("invalid IP address: {0}")]
    Ip(String),
}

impl From<AddrError> for CniError {
    /// Code 7 ([`INVALID_NETWORK_CONFIG`]): an address in the configuration is not an IP or
    /// CIDR.
    fn from(e: AddrError) -> CniError {
        CniError::new(INVALID_NETWORK_CONFIG, e.to_string())
    }
}

/// Maps an IPv4-mapped IPv6 address to IPv4, as Go's `To4` does everywhere.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Parses an IP address like Go's `net.ParseIP` (no zones, no prefix), IPv4-mapped as IPv4.
pub fn parse_ip(s: &str) -> Result<IpAddr, AddrError> {
    IpAddr::from_str(s).map(canonical).map_err(|_| AddrError::Ip(s.to_string()))
}

impl IpNet {
    /// Builds a prefix; `None` when the length does not fit the family.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpNet> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(IpNet { addr, prefix })
    }

    /// Parses `<ip>/<len>` like Go's `ParseCIDR`, keeping the host bits.
    pub fn parse(s: &str) -> Result<IpNet, AddrError> {
        let bad = || AddrError::Cidr(s.to_string());
        let (ip, len) = s.split_once('/').ok_or_else(bad)?;
        if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let prefix: u8 = len.parse().map_err(|_| bad())?;
        let addr = IpAddr::from_str(ip).map_err(|_| bad())?;
        match addr {
            IpAddr::V4(_) if prefix > 32 => Err(bad()),
            IpAddr::V6(_) if prefix > 128 => Err(bad()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                // Go prints a mapped address with the last 32 bits of its mask.
                Some(v4) => Ok(IpNet { addr: IpAddr::V4(v4), prefix: prefix.saturating_sub(96) }),
                None => Ok(IpNet { addr, prefix }),
            },
            IpAddr::V4(_) => Ok(IpNet { addr, prefix }),
        }
    }

    /// The address, host bits included.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    /// Whether this is an IPv4 prefix.
    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// The network address: host bits cleared (what the kernel's connected route names).
    pub fn network(&self) -> IpNet {
        let addr = match self.addr {
            IpAddr::V4(a) => {
                let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix)) };
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        };
        IpNet { addr, prefix: self.prefix }
    }

    /// Whether this is a default route destination (`0.0.0.0/0` or `::/0`).
    pub fn is_default(&self) -> bool {
        self.prefix == 0
    }

    /// Whether `ip` lies inside this prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match IpNet::new(canonical(ip), self.prefix) {
            Some(other) if other.is_ipv4() == self.is_ipv4() => other.network().addr == self.network().addr,
            _ => false,
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for IpNet {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IpNet::parse(s)
    }
}

impl Serialize for IpNet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IpNet::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A hardware address compared as bytes, so `AA:BB:…` equals `aa:bb:…` (upstream CHECK compares
/// strings and fails on upper case). Accepts 6-byte (Ethernet) and 8- or 20-byte (InfiniBand)
/// addresses with `:` or `-` separators.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mac(Vec<u8>);

/// A hardware address that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address: {0}")]
pub struct MacError(pub(crate) String);

impl From<MacError> for CniError {
    /// Code 7 ([`INVALID_NETWORK_CONFIG`]): a MAC address in the configuration did not parse.
    fn from(e: MacError) -> CniError {
        CniError::new(INVALID_NETWORK_CONFIG, e.to_string())
    }
}

impl MacError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl Mac {
    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-`), case-insensitively.
    pub fn parse(s: &str) -> Result<Mac, MacError> {
        let sep = if s.contains('-') { '-' } else { ':' };
        let bytes: Option<Vec<u8>> =
            s.split(sep).map(|p| (p.len() == 2).then(|| u8::from_str_radix(p, 16).ok()).flatten()).collect();
        match bytes {
            Some(b) if matches!(b.len(), 6 | 8 | 20) => Ok(Mac(b)),
            _ => Err(MacError(s.to_string())),
        }
    }

    /// Wraps raw bytes (as netlink reports them).
    pub fn from_bytes(bytes: &[u8]) -> Mac {
        Mac(bytes.to_vec())
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_keeps_host_bits_and_formats_like_go() {
        assert_eq!(IpNet::parse("10.1.0.5/16").unwrap().to_string(), "10.1.0.5/16");
        assert_eq!(
            IpNet::parse("2001:0db8:0000:0000:0001:0000:0000:0001/64").unwrap().to_string(),
            "2001:db8::1:0:0:1/64"
        );
        assert_eq!(IpNet::parse("::ffff:10.0.0.7/120").unwrap().to_string(), "10.0.0.7/24");
        assert_eq!(IpNet::parse("::ffff:10.0.0.7/64").unwrap().to_string(), "10.0.0.7/0");
        assert_eq!(IpNet::parse("10.1.0.5/16").unwrap().network().to_string(), "10.1.0.0/16");
    }

    #[test]
    fn cidr_errors_are_gos() {
        for bad in [
            "10.0.0.300/24",
            "10.0.0.3",
            "10.0.0.3/33",
            "10.0.0.3/+1",
            "10.0.0.3/",
            "::1/129",
            "/24",
            "fe80::1%eth0/64",
        ] {
            assert_eq!(IpNet::parse(bad).unwrap_err().to_string(), format!("invalid CIDR address: {bad}"));
        }
        assert_eq!(parse_ip("nope").unwrap_err().to_string(), "invalid IP address: nope");
    }

    #[test]
    fn mac_compares_as_bytes() {
        assert_eq!(Mac::parse("AA:bb:CC:dd:EE:ff").unwrap(), Mac::parse("aa:bb:cc:dd:ee:ff").unwrap());
        assert_eq!(Mac::parse("aa-bb-cc-dd-ee-ff").unwrap().to_string(), "aa:bb:cc:dd:ee:ff");
        assert!(Mac::parse("aa:bb:cc").is_err());
        assert!(Mac::parse("zz:bb:cc:dd:ee:ff").is_err());
    }

    #[test]
    fn contains() {
        let n = IpNet::parse("198.18.0.5/24").unwrap();
        assert!(n.contains("198.18.0.1".parse().unwrap()));
        assert!(!n.contains("198.18.1.1".parse().unwrap()));
        assert!(!n.contains("2001:db8::1".parse().unwrap()));
    }
}
