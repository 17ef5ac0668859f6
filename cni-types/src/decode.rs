//! Reading typed fields out of a JSON object with Go's `encoding/json` rules: key matching
//! falls back to ASCII case-insensitive, `null` means absent, unknown keys are ignored, and a
//! value of the wrong type is reported as `json: cannot unmarshal number into Go struct field
//! .name of type string`.

use serde_json::{Map, Value};
use std::fmt;

/// A decoding failure, worded as Go's decoder words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub(crate) String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

impl DecodeError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl From<crate::gojson::SyntaxError> for DecodeError {
    fn from(e: crate::gojson::SyntaxError) -> Self {
        DecodeError(e.0)
    }
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

/// A view of one JSON object that remembers where it sits, for error messages.
#[derive(Clone, Copy)]
pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    /// The Go struct name of the document root ("" for anonymous structs, "Result", …).
    root: &'a str,
    /// The top-level key this object hangs under (Go names errors after it).
    top: Option<&'a str>,
}

impl<'a> Obj<'a> {
    /// The document root. `null` reads as an empty object, as in Go.
    pub(crate) fn root(v: &'a Value, root: &'a str) -> Result<Obj<'a>, DecodeError> {
        match v {
            Value::Object(map) => Ok(Obj { map, root, top: None }),
            Value::Null => Ok(Obj { map: &EMPTY, root, top: None }),
            other => Err(DecodeError(format!(
                "json: cannot unmarshal {} into Go value of type {}",
                crate::gojson::type_name(other),
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
            other => crate::gojson::type_name(other).to_string(),
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
    pub(crate) fn object(&self, key: &'a str) -> Result<Option<Obj<'a>>, DecodeError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Obj { map, root: self.root, top: Some(self.top.unwrap_or(key)) })),
            Some(v) => Err(self.type_error(key, v, "object")),
        }
    }

    /// A list of objects; absent is empty; `null` entries are skipped.
    pub(crate) fn objects(&self, key: &'a str) -> Result<Vec<Obj<'a>>, DecodeError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => {
                let top = Some(self.top.unwrap_or(key));
                items
                    .iter()
                    .filter(|v| !v.is_null())
                    .map(|item| match item {
                        Value::Object(map) => Ok(Obj { map, root: self.root, top }),
                        v => Err(self.type_error(key, v, "object")),
                    })
                    .collect()
            }
            Some(v) => Err(self.type_error(key, v, "array")),
        }
    }
}
