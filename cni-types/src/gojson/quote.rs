//! Go's quoting of text in messages (`strconv.Quote`, `fmt`'s `%q`): libcni and the skel quote
//! versions, names and pairs this way, and braid's messages must read the same.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quoting() {
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
        assert_eq!(quote("x\u{a0}y"), "\"x\\u00a0y\"");
        assert_eq!(quote_list(&["1.2.3", "4.3.2"]), "[\"1.2.3\" \"4.3.2\"]");
    }
}
