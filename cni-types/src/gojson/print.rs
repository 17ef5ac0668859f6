//! Output as Go's `encoding/json` writes it: serde_json's own compact printer, then two byte
//! passes over its output.
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
