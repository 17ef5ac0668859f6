//! `CNI_ARGS` parsing with the Go library's `types.LoadArgs` semantics (`pkg/types/args.go`).
//!
//! Go fills a struct by reflection; here the caller names its fields and their kinds in an
//! [`ArgSpec`] list. The rules are Go's: pairs split on `;`, each pair must have exactly one `=`,
//! keys are matched case-sensitively, values are checked by kind, and unknown keys are an error
//! unless `IgnoreUnknown` (always known) is true somewhere in the string.

use crate::error::{CniError, INVALID_ENVIRONMENT_VARIABLES};
use crate::gojson::quote::{quote, quote_list};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// How a known key's value is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// Any text (Go's `UnmarshallableString`).
    String,
    /// `1`/`true`/`0`/`false`, case-insensitive (Go's `UnmarshallableBool`).
    Bool,
    /// An IP address without prefix (Go's `net.IP`); empty means unset.
    Ip,
}

/// A key the caller understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgSpec {
    /// The exact, case-sensitive key.
    pub key: &'static str,
    /// How its value is parsed.
    pub kind: ArgKind,
}

/// A parsed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgValue {
    /// Text.
    String(String),
    /// A boolean.
    Bool(bool),
    /// An address; `None` for an empty value.
    Ip(Option<IpAddr>),
}

/// Why `CNI_ARGS` was refused; the text is Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgsError(pub(crate) String);

impl From<ArgsError> for CniError {
    /// Code 4 ([`INVALID_ENVIRONMENT_VARIABLES`]): `CNI_ARGS` is malformed (Go's
    /// `types.LoadArgs`).
    fn from(e: ArgsError) -> CniError {
        CniError::new(INVALID_ENVIRONMENT_VARIABLES, e.0)
    }
}

impl ArgsError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
    }
}

/// The result of [`load_args`]: the known keys that were set, and every pair in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Args {
    /// Known keys and their values (the last occurrence wins, as in Go).
    pub values: BTreeMap<String, ArgValue>,
    /// `IgnoreUnknown`.
    pub ignore_unknown: bool,
    /// Every `(key, value)` pair, known or not, in order.
    pub pairs: Vec<(String, String)>,
}

impl Args {
    /// A known string value.
    pub fn string(&self, key: &str) -> Option<&str> {
        match self.values.get(key) {
            Some(ArgValue::String(s)) => Some(s),
            _ => None,
        }
    }

    /// A known IP value.
    pub fn ip(&self, key: &str) -> Option<IpAddr> {
        match self.values.get(key) {
            Some(ArgValue::Ip(ip)) => *ip,
            _ => None,
        }
    }

    /// A known boolean value (false when unset).
    pub fn bool(&self, key: &str) -> bool {
        matches!(self.values.get(key), Some(ArgValue::Bool(true)))
    }
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(format!("boolean unmarshal error: invalid input {s}")),
    }
}

/// Whether a value reads as true to Go's `UnmarshallableBool`: `1` or `true`, any case.
pub fn is_true(value: &str) -> bool {
    parse_bool(value) == Ok(true)
}

/// `CNI_ARGS` read leniently: each `;`-separated piece split at its first `=`, pieces without
/// one skipped. For a caller that only picks out keys of its own (`K8S_POD_NAME`) from args it
/// does not own: unlike [`load_args`], it never fails, so a DEL still finds what it needs in
/// args a runtime sent malformed.
pub fn pairs(args: &str) -> impl Iterator<Item = (&str, &str)> {
    args.split(';').filter_map(|pair| pair.split_once('='))
}

/// Splits `CNI_ARGS` into pairs with Go's exactly-one-`=` rule, without interpreting keys.
pub fn split_pairs(args: &str) -> Result<Vec<(String, String)>, ArgsError> {
    if args.is_empty() {
        return Ok(Vec::new());
    }
    args.split(';')
        .map(|pair| {
            let mut kv = pair.split('=');
            match (kv.next(), kv.next(), kv.next()) {
                (Some(k), Some(v), None) => Ok((k.to_string(), v.to_string())),
                _ => Err(ArgsError(format!("ARGS: invalid pair {}", quote(pair)))),
            }
        })
        .collect()
}

/// Go's `types.LoadArgs` against the keys in `spec` (plus `IgnoreUnknown`).
pub fn load_args(args: &str, spec: &[ArgSpec]) -> Result<Args, ArgsError> {
    let mut out = Args::default();
    let mut unknown: Vec<String> = Vec::new();
    for (key, value) in split_pairs(args)? {
        let pair = format!("{key}={value}");
        let kind = if key == "IgnoreUnknown" {
            Some(ArgKind::Bool)
        } else {
            spec.iter().find(|s| s.key == key).map(|s| s.kind)
        };
        let Some(kind) = kind else {
            unknown.push(pair);
            out.pairs.push((key, value));
            continue;
        };
        let fail = |e: String| ArgsError(format!("ARGS: error parsing value of pair {}: {e}", quote(&pair)));
        let parsed = match kind {
            ArgKind::String => ArgValue::String(value.clone()),
            ArgKind::Bool => ArgValue::Bool(parse_bool(&value).map_err(fail)?),
            ArgKind::Ip if value.is_empty() => ArgValue::Ip(None),
            ArgKind::Ip => ArgValue::Ip(Some(crate::ip::parse_ip(&value).map_err(|e| fail(e.to_string()))?)),
        };
        if key == "IgnoreUnknown" {
            out.ignore_unknown = matches!(parsed, ArgValue::Bool(true));
        }
        out.values.insert(key.clone(), parsed);
        out.pairs.push((key, value));
    }
    if !unknown.is_empty() && !out.ignore_unknown {
        return Err(ArgsError(format!("ARGS: unknown args {}", quote_list(&unknown))));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_pairs_skip_what_load_args_refuses() {
        let got: Vec<_> = pairs("A=1;junk;B=x=y;;C=").collect();
        assert_eq!(got, [("A", "1"), ("B", "x=y"), ("C", "")]);
        assert!(load_args("A=1;junk", &[]).is_err());
        assert!(is_true("TRUE") && is_true("1") && !is_true("0") && !is_true("yes"));
    }
}
