//! JSON the way Go's `encoding/json` reads and writes it, and Go's quoting of text in messages.
//!
//! * Input: runtimes and operators see the error texts the Go reference library produces
//!   (`unexpected end of JSON input`, `invalid character 'n' looking for beginning of object key
//!   string`), so every document first goes through [`check_syntax`], a port of Go's scanner,
//!   and only valid ones reach serde_json ([`parse`]).
//! * Output: [`to_go_string`] and [`to_go_string_pretty`] are Go's `json.Marshal` and
//!   `json.MarshalIndent(v, "", "    ")`, HTML escaping included.
//! * Messages: [`quote`] and [`quote_list`] are Go's `strconv.Quote` and `%q`.

pub(crate) mod print;
pub(crate) mod quote;
pub(crate) mod scan;

pub use print::{to_go_string, to_go_string_pretty};
pub use quote::{quote, quote_list};
pub use scan::{check_syntax, parse, type_name, SyntaxError};
