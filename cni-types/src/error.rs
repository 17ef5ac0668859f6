//! The CNI error object (`code`, `msg`, `details`) and the well-known codes.
//!
//! Every error type of this crate converts into a [`CniError`] with the code a Go plugin would
//! report for the same failure, and the same text. Each conversion sits beside its type; the
//! table says which code each gets:
//!
//! | error | code | when |
//! | --- | --- | --- |
//! | [`DecodeError`](crate::DecodeError) | 6 [`DECODING_FAILURE`] | the JSON did not decode (Go's `json.Unmarshal` failures) |
//! | [`SyntaxError`](crate::gojson::SyntaxError) | 6 [`DECODING_FAILURE`] | the bytes are not JSON |
//! | [`PrevResultError`](crate::config::PrevResultError) | 6 [`DECODING_FAILURE`] | `prevResult` did not parse (Go's `version.ParsePrevResult`) |
//! | [`CreateError`](crate::result::CreateError) | 6 [`DECODING_FAILURE`] | a result did not parse in the version it claims |
//! | [`VersionError`](crate::version::VersionError) | 6 [`DECODING_FAILURE`] | a version string did not parse (Go's `version.ParseVersion`) |
//! | [`Incompatible`](crate::version::Incompatible) | 1 [`INCOMPATIBLE_CNI_VERSION`] | the skel's version check; Go's message and details |
//! | [`ConfListError`](crate::conflist::ConfListError) | 7 [`INVALID_NETWORK_CONFIG`] | libcni refuses the conflist (`libcni.NetworkConfFromBytes`) |
//! | [`AddrError`](crate::ip::AddrError) | 7 [`INVALID_NETWORK_CONFIG`] | an address in the configuration is not an IP or CIDR |
//! | [`MacError`](crate::ip::MacError) | 7 [`INVALID_NETWORK_CONFIG`] | a MAC address in the configuration did not parse |
//! | [`Inexpressible`](crate::merge::Inexpressible) | 7 [`INVALID_NETWORK_CONFIG`] | the configuration's version cannot carry a merged result of this many attachments |
//! | [`ArgsError`](crate::args::ArgsError) | 4 [`INVALID_ENVIRONMENT_VARIABLES`] | `CNI_ARGS` is malformed (Go's `types.LoadArgs`) |
//! | [`ConvertError`](crate::result::ConvertError) | 999 [`INTERNAL`] | a result cannot be expressed in the requested version (Go returns a plain error) |
//!
//! The other direction, a child's error object read back ([`CniError::decode`]), sits with
//! Go's decoding rules in `decode.rs`. This module imports none of the modules it lists.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Code 0: unknown error (Go only).
pub const UNKNOWN: u32 = 0;
/// Code 1: incompatible CNI version.
pub const INCOMPATIBLE_CNI_VERSION: u32 = 1;
/// Code 2: unsupported field in the network configuration; the message names key and value.
pub const UNSUPPORTED_FIELD: u32 = 2;
/// Code 3: container unknown or gone; the runtime need not call DEL.
pub const UNKNOWN_CONTAINER: u32 = 3;
/// Code 4: invalid or missing environment variables; the message names them.
pub const INVALID_ENVIRONMENT_VARIABLES: u32 = 4;
/// Code 5: I/O failure, e.g. reading stdin.
pub const IO_FAILURE: u32 = 5;
/// Code 6: failed to decode content (configuration JSON, version strings).
pub const DECODING_FAILURE: u32 = 6;
/// Code 7: invalid network configuration.
pub const INVALID_NETWORK_CONFIG: u32 = 7;
/// Code 8 (Go only): `CNI_NETNS` is the plugin's own network namespace.
pub const INVALID_NETNS: u32 = 8;
/// Code 11: try again later.
pub const TRY_AGAIN_LATER: u32 = 11;
/// Code 50 (STATUS): the plugin cannot serve ADD.
pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
/// Code 51 (STATUS): not available, and existing containers may have limited connectivity.
pub const LIMITED_CONNECTIVITY: u32 = 51;
/// Code 999 (Go only): an internal error that carried no code of its own.
pub const INTERNAL: u32 = 999;

/// A CNI error as printed on stdout. `details` is omitted when empty, and there is no
/// `cniVersion` key — exactly what Go plugins print, so runtimes see one shape from everyone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniError {
    /// The error code; 0–99 are reserved by the spec, 100 and up belong to plugins.
    pub code: u32,
    /// A short message.
    pub msg: String,
    /// A longer explanation, may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// An error without details.
    pub fn new(code: u32, msg: impl Into<String>) -> CniError {
        CniError { code, msg: msg.into(), details: String::new() }
    }

    /// An error with details.
    pub fn with_details(code: u32, msg: impl Into<String>, details: impl Into<String>) -> CniError {
        CniError { code, msg: msg.into(), details: details.into() }
    }

    /// The error as a plugin prints it: Go's `MarshalIndent` with a 4-space indent, no newline.
    pub fn to_json_pretty(&self) -> String {
        crate::gojson::print::to_go_string_pretty(self)
    }
}

impl fmt::Display for CniError {
    /// Go's `Error()`: `msg`, or `msg; details`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.details.is_empty() {
            f.write_str(&self.msg)
        } else {
            write!(f, "{}; {}", self.msg, self.details)
        }
    }
}

impl std::error::Error for CniError {}

impl CniError {
    /// The same error with `prefix: ` before its message — what a caller adds to say where
    /// it happened (`delegates[1] (macvlan): …`), code and details kept.
    pub fn context(mut self, prefix: impl fmt::Display) -> CniError {
        self.msg = format!("{prefix}: {}", self.msg);
        self
    }

    /// The same error with another code, for a caller that knows better than the default
    /// conversion (e.g. a decoding failure that is really an invalid configuration).
    pub fn with_code(mut self, code: u32) -> CniError {
        self.code = code;
        self
    }
}

/// `?`-friendly context for any error that converts into a [`CniError`]:
/// `conf.plugin_config::<T>().context("sysctl")?`.
pub trait Context<T> {
    /// Converts the error and prefixes its message.
    fn context(self, prefix: impl fmt::Display) -> Result<T, CniError>;
    /// Converts the error and replaces its code.
    fn code(self, code: u32) -> Result<T, CniError>;
}

impl<T, E: Into<CniError>> Context<T> for Result<T, E> {
    fn context(self, prefix: impl fmt::Display) -> Result<T, CniError> {
        self.map_err(|e| e.into().context(prefix))
    }
    fn code(self, code: u32) -> Result<T, CniError> {
        self.map_err(|e| e.into().with_code(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_forms() {
        let e = CniError::with_details(7, "Invalid Configuration", "bad sysctl");
        assert_eq!(e.to_string(), "Invalid Configuration; bad sysctl");
        assert_eq!(
            e.to_json_pretty(),
            "{\n    \"code\": 7,\n    \"msg\": \"Invalid Configuration\",\n    \"details\": \"bad sysctl\"\n}"
        );
        let plain = CniError::new(999, "potato");
        assert_eq!(plain.to_string(), "potato");
        assert_eq!(plain.to_json_pretty(), "{\n    \"code\": 999,\n    \"msg\": \"potato\"\n}");
    }
}
