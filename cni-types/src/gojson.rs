//! JSON the way Go's `encoding/json` reads and writes it.
//!
//! Runtimes and operators see the error texts the Go reference library produces
//! (`unexpected end of JSON input`, `invalid character 'n' looking for beginning of object key
//! string`), and tests compare against them. serde_json words its errors differently, so input
//! is first run through [`check_syntax`], an iterative (stack-safe) port of the behaviour of Go's
//! JSON scanner, and only valid documents reach serde_json.
//!
//! Output is serde_json's own compact printer, then two byte passes over its output:
//!
//! * Indenting is Go's own way: `json.MarshalIndent` is `Marshal` followed by `Indent`
//!   (`encoding/json/indent.go`), and so is [`to_go_string_pretty`]. serde_json's
//!   `PrettyFormatter` would give the same bytes, but every type printed both ways would then be
//!   compiled twice, once per formatter — kilobytes in each plugin. One compact printer per type
//!   and one indent pass keep the plugins small.
//! * Go's HTML escaping (`encode.go`, `appendString` with `escapeHTML`): `<`, `>`, `&`, U+2028
//!   and U+2029 can appear in serde_json's output only inside strings (keys or values); they are
//!   no part of its structure, numbers or literals. Escaping them in the finished bytes
//!   therefore escapes exactly what Go escapes.

use serde::Serialize;
use serde_json::Value;
use std::fmt;

/// A JSON document that Go's decoder would reject, with Go's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError(pub(crate) String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SyntaxError {}

impl SyntaxError {
    /// The message, as the Go library words it.
    pub fn message(&self) -> &str {
        &self.0
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

/// Go's `strconv.Quote` for valid UTF-8 text: printable characters kept, others escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if !is_go_printable(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `strconv.IsPrint` good for the characters CNI input contains:
/// controls, the C1 block, and the non-ASCII spaces and format characters are not printable.
fn is_go_printable(c: char) -> bool {
    let u = c as u32;
    !(c.is_control()
        || u == 0xa0
        || u == 0xad
        || (0x2000..=0x200f).contains(&u)
        || (0x2028..=0x202f).contains(&u)
        || u == 0x205f
        || u == 0x3000
        || u == 0xfeff)
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", inner.join(" "))
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

/// `json.MarshalIndent(v, "", "    ")`: 4-space indent, no trailing newline, Go escaping.
pub fn to_go_string_pretty<T: Serialize + ?Sized>(value: &T) -> String {
    finish(serde_json::to_vec(value).map(|compact| indent(&compact)))
}

/// `json.Marshal(v)`: compact, Go escaping.
pub fn to_go_string<T: Serialize + ?Sized>(value: &T) -> String {
    finish(serde_json::to_vec(value))
}

/// Go's `json.Indent` with a 4-space indent (`encoding/json/indent.go`, `appendIndent`), which
/// is how `MarshalIndent` makes its output from `Marshal`'s: a newline and indent after `{`,
/// `[` and `,`, a space after `:`, and `{}` / `[]` left empty. `compact` is serde_json's
/// compact output (no whitespace outside strings).
fn indent(compact: &[u8]) -> Vec<u8> {
    fn newline(out: &mut Vec<u8>, depth: usize) {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', 4 * depth));
    }
    let mut out = Vec::with_capacity(compact.len() * 2);
    let (mut depth, mut need_indent, mut in_string, mut escaped) = (0usize, false, false, false);
    for &c in compact {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        // Delayed, so that an empty object or array stays `{}` / `[]`.
        if need_indent && c != b'}' && c != b']' {
            need_indent = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            b'"' => {
                in_string = true;
                out.push(c);
            }
            b'{' | b'[' => {
                need_indent = true;
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b'}' | b']' => {
                if need_indent {
                    need_indent = false;
                } else {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Go's escaping of the printed bytes. Serialising braid's own types (strings, numbers, maps
/// with string keys) into a `Vec` cannot fail; an error here would be a bug, and an empty
/// document is the safe answer.
fn finish(printed: Result<Vec<u8>, serde_json::Error>) -> String {
    match printed {
        Ok(bytes) => {
            String::from_utf8(escape_html(bytes)).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        }
        Err(_) => "{}".to_string(),
    }
}

/// `<`, `>`, `&`, U+2028 and U+2029 as `\u00XX` / `\u20XX` sequences.
fn escape_html(json: Vec<u8>) -> Vec<u8> {
    // U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8.
    if !json.iter().any(|b| matches!(b, b'<' | b'>' | b'&' | 0xe2)) {
        return json;
    }
    let mut out = Vec::with_capacity(json.len() + 16);
    let mut rest = json.as_slice();
    while let Some((&first, tail)) = rest.split_first() {
        let (escape, len): (&[u8], usize) = match rest {
            [b'<', ..] => (b"\\u003c", 1),
            [b'>', ..] => (b"\\u003e", 1),
            [b'&', ..] => (b"\\u0026", 1),
            [0xe2, 0x80, 0xa8, ..] => (b"\\u2028", 3),
            [0xe2, 0x80, 0xa9, ..] => (b"\\u2029", 3),
            _ => {
                out.push(first);
                rest = tail;
                continue;
            }
        };
        out.extend_from_slice(escape);
        rest = &rest[len..];
    }
    out
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

    #[test]
    fn go_quoting() {
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
        assert_eq!(quote("x\u{a0}y"), "\"x\\u00a0y\"");
        assert_eq!(quote_list(&["1.2.3", "4.3.2"]), "[\"1.2.3\" \"4.3.2\"]");
    }

    #[test]
    fn go_escaping_on_output() {
        let v = serde_json::json!({"k": "<a&b>"});
        assert_eq!(to_go_string(&v), "{\"k\":\"\\u003ca\\u0026b\\u003e\"}");
        assert_eq!(to_go_string_pretty(&v), "{\n    \"k\": \"\\u003ca\\u0026b\\u003e\"\n}");
    }

    #[test]
    fn indenting_compact_output_gives_serde_jsons_own_pretty_bytes() {
        let values = [
            serde_json::json!({"a": [], "b": {}, "c": "x,{:}\\\"]\n[", "d": [1, {"e": null, "f": [true, -0.5]}]}),
            serde_json::json!([]),
            serde_json::json!("{,}"),
            serde_json::json!([[[]], {"k": {"": []}}]),
        ];
        for v in values {
            let mut pretty = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            v.serialize(&mut serde_json::Serializer::with_formatter(&mut pretty, formatter)).unwrap();
            assert_eq!(indent(&serde_json::to_vec(&v).unwrap()), pretty, "{v}");
        }
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped_in_keys_and_values() {
        let v = serde_json::json!({"a\u{2028}": ["\u{2029}é€", ""], "<": {}});
        assert_eq!(to_go_string(&v), "{\"\\u003c\":{},\"a\\u2028\":[\"\\u2029é€\",\"\"]}");
        assert_eq!(
            to_go_string_pretty(&v),
            "{\n    \"\\u003c\": {},\n    \"a\\u2028\": [\n        \"\\u2029é€\",\n        \"\"\n    ]\n}"
        );
    }
}
