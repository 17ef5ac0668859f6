//! CNI specification versions: parsing, comparison, result families and command gates.
//!
//! Versions are compared the way the Go library's `pkg/version` does it: each of the three
//! dot-separated parts goes through Go's `strconv.Atoi` (so `"01"` and `"-1"` parse, `" 1"` and
//! `"0-rc1"` do not), missing parts count as zero and the empty string is 0.1.0. Which versions a
//! plugin *supports* is an exact string match, not a numeric one (see [`reconcile`]).

use crate::decode::{DecodeError, GoStruct};
use crate::error::{CniError, DECODING_FAILURE, INCOMPATIBLE_CNI_VERSION};
use crate::gojson::quote::{quote, quote_list};
use std::cmp::Ordering;
use std::fmt;

/// The seven released spec versions, oldest first (Go's `version.All`).
pub const ALL: [&str; 7] = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// The legacy versions whose results use `ip4`/`ip6` (Go's `version.Legacy`).
pub const LEGACY: [&str; 2] = ["0.1.0", "0.2.0"];

/// The newest spec version this crate implements (Go's `version.Current()`).
pub const CURRENT: &str = "1.1.0";

/// The version a configuration without `cniVersion` (or with `""`) is taken to speak.
pub const DEFAULT: &str = "0.1.0";

/// A parsed version number. Components are signed because Go's `Atoi` accepts `-1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version {
    /// The first component.
    pub major: i64,
    /// The second component (0 when absent).
    pub minor: i64,
    /// The third component (0 when absent).
    pub micro: i64,
}

/// Why a version string did not parse; the text is Go's, word for word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// `invalid version "1.2.3.4": too many parts`
    #[error("invalid version {}: too many parts", quote(.0))]
    TooManyParts(String),
    /// `failed to convert minor version part "x": strconv.Atoi: parsing "x": invalid syntax`
    #[error("failed to convert {which} version part {q}: strconv.Atoi: parsing {q}: {reason}", q = quote(.part))]
    BadPart {
        /// `major`, `minor` or `micro`.
        which: &'static str,
        /// The offending text.
        part: String,
        /// `invalid syntax` or `value out of range`.
        reason: &'static str,
    },
}

impl From<VersionError> for CniError {
    /// Code 6 ([`DECODING_FAILURE`]): a version string did not parse (Go's
    /// `version.ParseVersion`).
    fn from(e: VersionError) -> CniError {
        CniError::new(DECODING_FAILURE, e.to_string())
    }
}

/// Go's `strconv.Atoi`: optional sign, ASCII digits, 64-bit range.
fn atoi(s: &str) -> Result<i64, &'static str> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    let mut n: i64 = 0;
    for b in digits.bytes() {
        let d = i64::from(b - b'0');
        n = n
            .checked_mul(10)
            .and_then(|n| if neg { n.checked_sub(d) } else { n.checked_add(d) })
            .ok_or("value out of range")?;
    }
    Ok(n)
}

impl Version {
    /// 0.4.0: CHECK, and `prevResult` on DEL (the spec's 0.4.0 changes).
    pub const V0_4_0: Version = Version { major: 0, minor: 4, micro: 0 };
    /// 1.1.0: GC, STATUS, and an interface's `mtu` in results.
    pub const V1_1_0: Version = Version { major: 1, minor: 1, micro: 0 };

    /// Whether `version` (a configuration's or a result's `cniVersion`) is `self` or later;
    /// one that does not parse is not — a version check in place of
    /// `greater_than_or_equal_to(v, "1.1.0").unwrap_or(false)`.
    pub fn reached_by(self, version: &str) -> bool {
        Version::parse(version).is_ok_and(|v| v >= self)
    }

    /// Parses like Go's `version.ParseVersion`; `""` is 0.1.0.
    pub fn parse(s: &str) -> Result<Version, VersionError> {
        if s.is_empty() {
            return Ok(Version { major: 0, minor: 1, micro: 0 });
        }
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() > 3 {
            return Err(VersionError::TooManyParts(s.to_string()));
        }
        let names = ["major", "minor", "micro"];
        let mut out = [0i64; 3];
        for (i, part) in parts.iter().enumerate() {
            out[i] = atoi(part).map_err(|reason| VersionError::BadPart {
                which: names[i],
                part: (*part).to_string(),
                reason,
            })?;
        }
        Ok(Version { major: out[0], minor: out[1], micro: out[2] })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.micro).cmp(&(other.major, other.minor, other.micro))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.micro)
    }
}

/// `a >= b` after parsing both (Go's `GreaterThanOrEqualTo`); the first parse error wins.
pub fn greater_than_or_equal_to(a: &str, b: &str) -> Result<bool, VersionError> {
    Ok(Version::parse(a)? >= Version::parse(b)?)
}

/// `a > b` after parsing both (Go's `GreaterThan`).
pub fn greater_than(a: &str, b: &str) -> Result<bool, VersionError> {
    Ok(Version::parse(a)? > Version::parse(b)?)
}

/// The known versions from `from` on, in order (Go's `VersionsStartingFrom`).
pub fn versions_starting_from(from: &str) -> Vec<&'static str> {
    let Ok(start) = Version::parse(from) else {
        return Vec::new();
    };
    ALL.iter().copied().filter(|v| Version::parse(v).is_ok_and(|v| v >= start)).collect()
}

/// The three wire shapes a result can have. Within a family only `cniVersion` differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// 0.1.0 and 0.2.0 (and `""`): `ip4`, `ip6`, `dns`.
    Legacy,
    /// 0.3.0, 0.3.1, 0.4.0: `interfaces`, `ips` with `version`, `routes`, `dns`.
    V04,
    /// 1.0.0 and 1.1.0: like V04 without `ips[].version`; 1.1 adds interface and route fields.
    V1,
}

impl Family {
    /// The family of an exact version string; `""` is legacy. Unknown strings have none.
    pub fn of(version: &str) -> Option<Family> {
        match version {
            "" | "0.1.0" | "0.2.0" => Some(Family::Legacy),
            "0.3.0" | "0.3.1" | "0.4.0" => Some(Family::V04),
            "1.0.0" | "1.1.0" => Some(Family::V1),
            _ => None,
        }
    }

    /// The versions this family's result type accepts, oldest first.
    pub fn versions(self) -> &'static [&'static str] {
        match self {
            Family::Legacy => &ALL[0..2],
            Family::V04 => &ALL[2..5],
            Family::V1 => &ALL[5..7],
        }
    }

    /// The newest version of the family: what Go labels a result whose `cniVersion` is empty.
    pub fn newest(self) -> &'static str {
        let v = self.versions();
        v[v.len() - 1]
    }
}

/// A CNI command, as named in `CNI_COMMAND`. The default is VERSION, the one command that
/// needs nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Command {
    /// Attach a container to a network.
    Add,
    /// Detach it; idempotent.
    Del,
    /// Verify an attachment (0.4.0 and later).
    Check,
    /// Remove stale resources (1.1.0 and later).
    Gc,
    /// Report readiness (1.1.0 and later).
    Status,
    /// Report supported versions.
    #[default]
    Version,
}

impl Command {
    /// Parses the exact, case-sensitive `CNI_COMMAND` value.
    pub fn parse(s: &str) -> Option<Command> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "GC" => Command::Gc,
            "STATUS" => Command::Status,
            "VERSION" => Command::Version,
            _ => return None,
        })
    }

    /// The `CNI_COMMAND` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Gc => "GC",
            Command::Status => "STATUS",
            Command::Version => "VERSION",
        }
    }

    /// The first spec version that defines this command.
    pub fn since(self) -> &'static str {
        match self {
            Command::Add | Command::Del => "0.1.0",
            Command::Version => "0.2.0",
            Command::Check => "0.4.0",
            Command::Gc | Command::Status => "1.1.0",
        }
    }

    /// Whether a configuration of version `version` may use this command.
    pub fn allowed_in(self, version: &str) -> Result<bool, VersionError> {
        greater_than_or_equal_to(version, self.since())
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A configuration version no plugin version matches (Go's `ErrorIncompatible`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("incompatible CNI versions: {}", self.details())]
pub struct Incompatible {
    /// The configuration's version.
    pub config: String,
    /// What the plugin supports.
    pub supported: Vec<String>,
}

impl Incompatible {
    /// Go's `Details()`: `config is "0.1.0", plugin supports ["1.2.3" "4.3.2"]`.
    pub fn details(&self) -> String {
        format!("config is {}, plugin supports {}", quote(&self.config), quote_list(&self.supported))
    }
}

impl From<Incompatible> for CniError {
    /// Code 1 ([`INCOMPATIBLE_CNI_VERSION`]), with Go's message and details (`skel`'s version
    /// check).
    fn from(e: Incompatible) -> CniError {
        CniError::with_details(INCOMPATIBLE_CNI_VERSION, "incompatible CNI versions", e.details())
    }
}

/// Exact-string reconciliation of a configuration version against a plugin's list (Go's
/// `Reconciler.Check`): `"1.1"` does not match `"1.1.0"`.
pub fn reconcile<S: AsRef<str>>(config: &str, supported: &[S]) -> Result<(), Incompatible> {
    if supported.iter().any(|s| s.as_ref() == config) {
        Ok(())
    } else {
        Err(Incompatible {
            config: config.to_string(),
            supported: supported.iter().map(|s| s.as_ref().to_string()).collect(),
        })
    }
}

/// Reads `cniVersion` from a configuration or a result (Go's `create.DecodeVersion`; the
/// skel's `version.ConfigDecoder` is the same): missing or `""` is 0.1.0.
pub fn decode_version(bytes: &[u8]) -> Result<String, DecodeError> {
    let value = crate::gojson::scan::parse(bytes).map_err(|e| version_error(e.0))?;
    decode_version_of(&value)
}

/// [`decode_version`] of a document already parsed (the skel's dispatcher parses stdin once
/// and reads the name, the version and the configuration from that one value).
pub fn decode_version_of(value: &serde_json::Value) -> Result<String, DecodeError> {
    let obj = GoStruct::root(value, "").map_err(|e| version_error(e.0))?;
    let v = obj.string("cniVersion").map_err(|e| version_error(e.0))?;
    Ok(if v.is_empty() { DEFAULT.to_string() } else { v })
}

fn version_error(e: String) -> DecodeError {
    DecodeError(format!("decoding version from network config: {e}"))
}

/// A plugin's answer to VERSION, as decoded by a runtime (Go's `PluginDecoder`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    /// The `cniVersion` the plugin printed.
    pub cni_version: String,
    /// The versions it supports.
    pub supported_versions: Vec<String>,
}

impl VersionInfo {
    /// The compact JSON a plugin prints for VERSION (without the trailing newline).
    pub fn to_json(&self) -> String {
        let v = serde_json::json!({
            "cniVersion": self.cni_version,
            "supportedVersions": self.supported_versions,
        });
        v.to_string()
    }

    /// Decodes a VERSION reply with Go's rules: an empty list under `0.2.0` means
    /// `["0.1.0","0.2.0"]`; otherwise both fields are required.
    pub fn decode(bytes: &[u8]) -> Result<VersionInfo, String> {
        let wrap = |e: String| format!("decoding version info: {e}");
        let value = crate::gojson::scan::parse(bytes).map_err(|e| wrap(e.to_string()))?;
        let obj = GoStruct::root(&value, "").map_err(|e| wrap(e.to_string()))?;
        let cni_version = obj.string("cniVersion").map_err(|e| wrap(e.to_string()))?;
        let supported = obj.string_list("supportedVersions").map_err(|e| wrap(e.to_string()))?;
        if cni_version.is_empty() {
            return Err(wrap("missing field cniVersion".into()));
        }
        if supported.is_empty() {
            if cni_version == "0.2.0" {
                return Ok(VersionInfo {
                    cni_version,
                    supported_versions: LEGACY.iter().map(|s| s.to_string()).collect(),
                });
            }
            return Err(wrap("missing field supportedVersions".into()));
        }
        Ok(VersionInfo { cni_version, supported_versions: supported })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_overflow_is_reported_like_go() {
        let err = Version::parse("99999999999999999999").unwrap_err();
        assert!(err.to_string().ends_with("value out of range"), "{err}");
    }

    #[test]
    fn families_partition_all_versions() {
        let mut seen = Vec::new();
        for f in [Family::Legacy, Family::V04, Family::V1] {
            for v in f.versions() {
                assert_eq!(Family::of(v), Some(f));
                seen.push(*v);
            }
        }
        assert_eq!(seen, ALL);
        assert_eq!(Family::of(""), Some(Family::Legacy));
        assert_eq!(Family::of("1.1"), None);
    }

    #[test]
    fn command_gates() {
        assert!(!Command::Check.allowed_in("0.3.1").unwrap());
        assert!(Command::Check.allowed_in("0.4.0").unwrap());
        assert!(!Command::Gc.allowed_in("1.0.0").unwrap());
        assert!(Command::Status.allowed_in("1.1.0").unwrap());
        assert!(!Command::Check.allowed_in("").unwrap());
        assert_eq!(Command::parse("add"), None);
    }
}
