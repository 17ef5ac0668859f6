//! Reading typed fields out of a JSON object with Go's `encoding/json` rules: key matching
//! falls back to ASCII case-insensitive, `null` means absent, unknown keys are ignored, and a
//! value of the wrong type is reported as `json: cannot unmarshal number into Go struct field
//! .name of type string`.

use crate::error::{CniError, DECODING_FAILURE};
use crate::gojson::scan::{type_name, SyntaxError};
use serde_json::{Map, Value};

/// A decoding failure, worded as Go's decoder words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub(crate) String);

impl DecodeError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl From<SyntaxError> for DecodeError {
    fn from(e: SyntaxError) -> Self {
        DecodeError(e.0)
    }
}

impl From<DecodeError> for CniError {
    /// Code 6 ([`DECODING_FAILURE`]): the JSON did not decode (Go's `json.Unmarshal` failures).
    fn from(e: DecodeError) -> CniError {
        CniError::new(DECODING_FAILURE, e.0)
    }
}

impl CniError {
    /// Decodes a child's error object. Go's decoder is lenient: a missing `code` is 0.
    pub fn decode(bytes: &[u8]) -> Result<CniError, DecodeError> {
        let value = crate::gojson::scan::parse(bytes)?;
        let obj = GoStruct::root(&value, "types.Error")?;
        let code = match obj.int("code")? {
            Some(c) => u32::try_from(c).map_err(|_| {
                DecodeError(format!("json: cannot unmarshal number {c} into Go struct field Error.code of type uint"))
            })?,
            None => 0,
        };
        Ok(CniError { code, msg: obj.string("msg")?, details: obj.string("details")? })
    }
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

/// One JSON object read as Go's `encoding/json` fills a struct from it, remembering where it
/// sits for error messages.
#[derive(Clone, Copy)]
pub(crate) struct GoStruct<'a> {
    map: &'a Map<String, Value>,
    /// The Go struct name of the document root ("" for anonymous structs, "Result", …).
    root: &'a str,
    /// The top-level key this object hangs under (Go names errors after it).
    top: Option<&'a str>,
}

impl<'a> GoStruct<'a> {
    /// The document root. `null` reads as an empty object, as in Go.
    /// A JSON object already known to be one.
    pub(crate) fn of_map(map: &'a Map<String, Value>, root: &'a str) -> GoStruct<'a> {
        GoStruct { map, root, top: None }
    }

    pub(crate) fn root(v: &'a Value, root: &'a str) -> Result<GoStruct<'a>, DecodeError> {
        match v {
            Value::Object(map) => Ok(GoStruct { map, root, top: None }),
            Value::Null => Ok(GoStruct { map: &EMPTY, root, top: None }),
            other => Err(DecodeError(format!(
                "json: cannot unmarshal {} into Go value of type {}",
                type_name(other),
                if root.is_empty() { "struct" } else { root }
            ))),
        }
    }

    /// The raw map.
    pub(crate) fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// The value under `key`, exact match first, then ASCII case-insensitive; `null` is absent.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        let v = match self.map.get(key) {
            Some(v) => Some(v),
            None => self.map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v),
        };
        v.filter(|v| !v.is_null())
    }

    fn type_error(&self, key: &str, v: &Value, go_type: &str) -> DecodeError {
        let field = self.top.unwrap_or(key);
        let what = match v {
            Value::Number(n) if go_type == "int" => format!("number {n}"),
            other => type_name(other).to_string(),
        };
        DecodeError(format!(
            "json: cannot unmarshal {what} into Go struct field {}.{field} of type {go_type}",
            self.root
        ))
    }

    /// A string field; absent is `""`.
    pub(crate) fn string(&self, key: &str) -> Result<String, DecodeError> {
        Ok(self.opt_string(key)?.unwrap_or_default())
    }

    /// A string field that may be absent.
    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<String>, DecodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.type_error(key, v, "string")),
        }
    }

    /// A list of strings; absent is empty. `null` entries read as `""`, as in Go.
    pub(crate) fn string_list(&self, key: &str) -> Result<Vec<String>, DecodeError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    Value::Null => Ok(String::new()),
                    v => Err(self.type_error(key, v, "string")),
                })
                .collect(),
            Some(v) => Err(self.type_error(key, v, "[]string")),
        }
    }

    /// An integer field that may be absent. Fractions and out-of-range values are Go's errors.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, DecodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| self.type_error(key, v, "int")),
            Some(v) => Err(self.type_error(key, v, "int")),
        }
    }

    /// A nested object that may be absent.
    pub(crate) fn object(&self, key: &'a str) -> Result<Option<GoStruct<'a>>, DecodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(GoStruct { map, root: self.root, top: Some(self.top.unwrap_or(key)) })),
            Some(v) => Err(self.type_error(key, v, "object")),
        }
    }

    /// A list of objects; absent is empty; `null` entries are skipped.
    pub(crate) fn objects(&self, key: &'a str) -> Result<Vec<GoStruct<'a>>, DecodeError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => {
                let top = Some(self.top.unwrap_or(key));
                items
                    .iter()
                    .filter(|v| !v.is_null())
                    .map(|item| match item {
                        Value::Object(map) => Ok(GoStruct { map, root: self.root, top }),
                        v => Err(self.type_error(key, v, "object")),
                    })
                    .collect()
            }
            Some(v) => Err(self.type_error(key, v, "array")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_object_decodes_leniently_like_go() {
        let e = CniError::decode(br#"{"msg":"x"}"#).unwrap();
        assert_eq!(e, CniError::new(0, "x"));
        assert!(CniError::decode(b"not json").is_err());
        assert!(CniError::decode(br#"{"code":-1}"#).is_err());
    }
}
