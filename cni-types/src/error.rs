//! The CNI error object (`code`, `msg`, `details`) and the well-known codes.

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
        crate::gojson::to_go_string_pretty(self)
    }

    /// Decodes a child's error object. Go's decoder is lenient: a missing `code` is 0.
    pub fn decode(bytes: &[u8]) -> Result<CniError, crate::decode::DecodeError> {
        let value = crate::gojson::parse(bytes)?;
        let obj = crate::decode::Obj::root(&value, "types.Error")?;
        let code = match obj.int("code")? {
            Some(c) => u32::try_from(c).map_err(|_| {
                crate::decode::DecodeError(format!(
                    "json: cannot unmarshal number {c} into Go struct field Error.code of type uint"
                ))
            })?,
            None => 0,
        };
        Ok(CniError { code, msg: obj.string("msg")?, details: obj.string("details")? })
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

/// Each error type of this crate becomes a CNI error with the code a Go plugin would report
/// for the same failure, and the same text.
macro_rules! into_cni_error {
    ($($ty:ty => $code:expr, $why:literal;)*) => {$(
        #[doc = concat!("Code ", stringify!($code), ": ", $why)]
        impl From<$ty> for CniError {
            fn from(e: $ty) -> CniError {
                CniError::new($code, e.to_string())
            }
        }
    )*};
}

into_cni_error! {
    crate::decode::DecodeError => DECODING_FAILURE, "the JSON did not decode (Go's `json.Unmarshal` failures).";
    crate::gojson::SyntaxError => DECODING_FAILURE, "the bytes are not JSON.";
    crate::config::PrevResultError => DECODING_FAILURE, "`prevResult` did not parse (Go's `version.ParsePrevResult`).";
    crate::result::CreateError => DECODING_FAILURE, "a result did not parse in the version it claims.";
    crate::version::VersionError => DECODING_FAILURE, "a version string did not parse (Go's `version.ParseVersion`).";
    crate::conflist::ConfListError => INVALID_NETWORK_CONFIG, "libcni refuses the conflist (`libcni.NetworkConfFromBytes`).";
    crate::ip::AddrError => INVALID_NETWORK_CONFIG, "an address in the configuration is not an IP or CIDR.";
    crate::ip::MacError => INVALID_NETWORK_CONFIG, "a MAC address in the configuration did not parse.";
    crate::args::ArgsError => INVALID_ENVIRONMENT_VARIABLES, "`CNI_ARGS` is malformed (Go's `types.LoadArgs`).";
    crate::merge::Inexpressible => INVALID_NETWORK_CONFIG, "the configuration's version cannot carry a merged result of this many attachments.";
    crate::result::ConvertError => INTERNAL, "a result cannot be expressed in the requested version (Go returns a plain error).";
}

impl From<crate::version::Incompatible> for CniError {
    /// Code 1, with Go's message and details (`skel`'s version check).
    fn from(e: crate::version::Incompatible) -> CniError {
        CniError::with_details(INCOMPATIBLE_CNI_VERSION, "incompatible CNI versions", e.details())
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

    #[test]
    fn decode_is_lenient_like_go() {
        let e = CniError::decode(br#"{"msg":"x"}"#).unwrap();
        assert_eq!(e, CniError::new(0, "x"));
        assert!(CniError::decode(b"not json").is_err());
        assert!(CniError::decode(br#"{"code":-1}"#).is_err());
    }
}
