//! Input: Go's JSON scanner, for Go's syntax-error texts (`encoding/json/scanner.go`).
//!
//! serde_json words its errors differently, so input is first run through [`check_syntax`], an
//! iterative (stack-safe) port of the behaviour of Go's scanner, and only valid documents reach
//! serde_json.

use super::quote::quote;
use crate::error::{CniError, DECODING_FAILURE};
use serde_json::Value;

/// A JSON document that Go's decoder would reject, with Go's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub(crate) String);

impl SyntaxError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl From<SyntaxError> for CniError {
    /// Code 6 ([`DECODING_FAILURE`]): the bytes are not JSON.
    fn from(e: SyntaxError) -> CniError {
        CniError::new(DECODING_FAILURE, e.0)
    }
}

/// Go's `quoteChar`: how the scanner names an unexpected byte.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => {
            let s = quote(&char::from(c).to_string());
            format!("'{}'", &s[1..s.len() - 1])
        }
    }
}

#[derive(Clone, Copy)]
enum Ctx {
    Object,
    Array,
}

/// Validates JSON syntax exactly as Go's scanner does and returns its error text.
pub fn check_syntax(data: &[u8]) -> Result<(), SyntaxError> {
    let err = |c: u8, context: &str| Err(SyntaxError(format!("invalid character {} {}", quote_char(c), context)));
    let eof = || Err(SyntaxError("unexpected end of JSON input".to_string()));
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let mut stack: Vec<Ctx> = Vec::new();
    let mut i = 0usize;
    let n = data.len();

    // States are spelled out as loops: `value` parses one value, then `after` decides.
    'value: loop {
        // Begin a value.
        while i < n && is_space(data[i]) {
            i += 1;
        }
        if i >= n {
            return eof();
        }
        let c = data[i];
        match c {
            b'{' => {
                i += 1;
                while i < n && is_space(data[i]) {
                    i += 1;
                }
                if i >= n {
                    return eof();
                }
                if data[i] == b'}' {
                    i += 1;
                } else {
                    stack.push(Ctx::Object);
                    // Object key.
                    if data[i] != b'"' {
                        return err(data[i], "looking for beginning of object key string");
                    }
                    i = scan_string(data, i)?;
                    i = expect_colon(data, i)?;
                    continue 'value;
                }
            }
            b'[' => {
                i += 1;
                while i < n && is_space(data[i]) {
                    i += 1;
                }
                if i >= n {
                    return eof();
                }
                if data[i] == b']' {
                    i += 1;
                } else {
                    stack.push(Ctx::Array);
                    continue 'value;
                }
            }
            b'"' => i = scan_string(data, i)?,
            b'-' | b'0'..=b'9' => i = scan_number(data, i)?,
            b't' => i = scan_literal(data, i, b"true")?,
            b'f' => i = scan_literal(data, i, b"false")?,
            b'n' => i = scan_literal(data, i, b"null")?,
            _ => return err(c, "looking for beginning of value"),
        }
        // After a complete value: close containers or move to the next element.
        loop {
            while i < n && is_space(data[i]) {
                i += 1;
            }
            match stack.last().copied() {
                None => {
                    return match data.get(i) {
                        None => Ok(()),
                        Some(&c) => err(c, "after top-level value"),
                    };
                }
                Some(ctx) => {
                    if i >= n {
                        return eof();
                    }
                    let c = data[i];
                    match (ctx, c) {
                        (Ctx::Object, b',') => {
                            i += 1;
                            while i < n && is_space(data[i]) {
                                i += 1;
                            }
                            if i >= n {
                                return eof();
                            }
                            if data[i] != b'"' {
                                return err(data[i], "looking for beginning of object key string");
                            }
                            i = scan_string(data, i)?;
                            i = expect_colon(data, i)?;
                            continue 'value;
                        }
                        (Ctx::Object, b'}') | (Ctx::Array, b']') => {
                            stack.pop();
                            i += 1;
                        }
                        (Ctx::Array, b',') => {
                            i += 1;
                            continue 'value;
                        }
                        (Ctx::Object, _) => return err(c, "after object key:value pair"),
                        (Ctx::Array, _) => return err(c, "after array element"),
                    }
                }
            }
        }
    }
}

fn expect_colon(data: &[u8], mut i: usize) -> Result<usize, SyntaxError> {
    while i < data.len() && matches!(data[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    match data.get(i) {
        None => Err(SyntaxError("unexpected end of JSON input".into())),
        Some(b':') => Ok(i + 1),
        Some(&c) => Err(SyntaxError(format!("invalid character {} after object key", quote_char(c)))),
    }
}

/// Scans a string starting at the opening quote; returns the index after the closing quote.
fn scan_string(data: &[u8], start: usize) -> Result<usize, SyntaxError> {
    let bad = |c: u8, ctx: &str| SyntaxError(format!("invalid character {} {}", quote_char(c), ctx));
    let mut i = start + 1;
    loop {
        let Some(&c) = data.get(i) else {
            return Err(SyntaxError("unexpected end of JSON input".into()));
        };
        match c {
            b'"' => return Ok(i + 1),
            b'\\' => {
                let Some(&e) = data.get(i + 1) else {
                    return Err(SyntaxError("unexpected end of JSON input".into()));
                };
                match e {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => i += 2,
                    b'u' => {
                        for k in 0..4 {
                            let Some(&h) = data.get(i + 2 + k) else {
                                return Err(SyntaxError("unexpected end of JSON input".into()));
                            };
                            if !h.is_ascii_hexdigit() {
                                return Err(bad(h, "in \\u hexadecimal character escape"));
                            }
                        }
                        i += 6;
                    }
                    _ => return Err(bad(e, "in string escape code")),
                }
            }
            c if c < 0x20 => return Err(bad(c, "in string literal")),
            _ => i += 1,
        }
    }
}

fn scan_number(data: &[u8], start: usize) -> Result<usize, SyntaxError> {
    let bad = |c: u8, ctx: &str| SyntaxError(format!("invalid character {} {}", quote_char(c), ctx));
    let eof = || SyntaxError("unexpected end of JSON input".into());
    let mut i = start;
    if data[i] == b'-' {
        i += 1;
        match data.get(i) {
            None => return Err(eof()),
            Some(b'0'..=b'9') => {}
            Some(&c) => return Err(bad(c, "in numeric literal")),
        }
    }
    if data[i] == b'0' {
        i += 1;
    } else {
        while data.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if data.get(i) == Some(&b'.') {
        i += 1;
        match data.get(i) {
            None => return Err(eof()),
            Some(b'0'..=b'9') => {}
            Some(&c) => return Err(bad(c, "after decimal point in numeric literal")),
        }
        while data.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if matches!(data.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(data.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        match data.get(i) {
            None => return Err(eof()),
            Some(b'0'..=b'9') => {}
            Some(&c) => return Err(bad(c, "in exponent of numeric literal")),
        }
        while data.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    Ok(i)
}

fn scan_literal(data: &[u8], start: usize, word: &[u8]) -> Result<usize, SyntaxError> {
    let name = std::str::from_utf8(word).unwrap_or("literal");
    for (k, &want) in word.iter().enumerate().skip(1) {
        match data.get(start + k) {
            None => return Err(SyntaxError("unexpected end of JSON input".into())),
            Some(&c) if c == want => {}
            Some(&c) => {
                return Err(SyntaxError(format!(
                    "invalid character {} in literal {} (expecting {})",
                    quote_char(c),
                    name,
                    quote_char(want)
                )))
            }
        }
    }
    Ok(start + word.len())
}

/// Parses a JSON document with Go's syntax errors. Invalid UTF-8 inside strings is replaced
/// by U+FFFD, as Go does, instead of failing.
pub fn parse(data: &[u8]) -> Result<Value, SyntaxError> {
    check_syntax(data)?;
    let result = match std::str::from_utf8(data) {
        Ok(s) => serde_json::from_str(s),
        Err(_) => serde_json::from_str(&String::from_utf8_lossy(data)),
    };
    // The syntax is valid; what remains is serde_json's own limits (nesting depth, numbers
    // beyond f64). Say so plainly rather than pretending to be Go.
    result.map_err(|e| SyntaxError(format!("json: {e}")))
}

/// The name Go's decoder gives a JSON value's type in `cannot unmarshal X into ...` errors.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> String {
        check_syntax(s.as_bytes()).unwrap_err().0
    }

    #[test]
    fn go_scanner_messages() {
        assert_eq!(e(""), "unexpected end of JSON input");
        assert_eq!(e("{not json"), "invalid character 'n' looking for beginning of object key string");
        assert_eq!(e("{{{"), "invalid character '{' looking for beginning of object key string");
        assert_eq!(e("garbage"), "invalid character 'g' looking for beginning of value");
        assert_eq!(e("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(e("{\"a\":1 2}"), "invalid character '2' after object key:value pair");
        assert_eq!(e("{\"a\":1,}"), "invalid character '}' looking for beginning of object key string");
        assert_eq!(e("[1 2]"), "invalid character '2' after array element");
        assert_eq!(e("[1,]"), "invalid character ']' looking for beginning of value");
        assert_eq!(e("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(e("tru"), "unexpected end of JSON input");
        assert_eq!(e("trux"), "invalid character 'x' in literal true (expecting 'e')");
        assert_eq!(e("-x"), "invalid character 'x' in numeric literal");
        assert_eq!(e("1.x"), "invalid character 'x' after decimal point in numeric literal");
        assert_eq!(e("1ex"), "invalid character 'x' in exponent of numeric literal");
        assert_eq!(e("\"\\q\""), "invalid character 'q' in string escape code");
        assert_eq!(e("\"\\u12g4\""), "invalid character 'g' in \\u hexadecimal character escape");
        assert_eq!(e("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(e("01"), "invalid character '1' after top-level value");
        assert_eq!(e("'a'"), "invalid character '\\'' looking for beginning of value");
    }

    #[test]
    fn valid_documents_pass() {
        for ok in ["{}", "[]", " 1 ", "-0.5e+3", "{\"a\":[1,{\"b\":null}],\"c\":true}", "\"\\u00e9\""] {
            check_syntax(ok.as_bytes()).unwrap();
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let deep = "[".repeat(1_000_000);
        assert_eq!(e(&deep), "unexpected end of JSON input");
        let closed = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        check_syntax(closed.as_bytes()).unwrap();
        assert!(parse(closed.as_bytes()).is_err());
    }
}
