//! The CNI data model, for every spec version from 0.1.0 to 1.1.0.
//!
//! This crate does no I/O. It reads and writes the JSON that plugins and runtimes exchange,
//! with the Go reference library's observable behaviour: its version rules, its result
//! conversions (edges, losses and error texts), its JSON presence rules and its messages. Where
//! braid deliberately differs from Go, the item's documentation says so and why.
//!
//! * [`version`]: versions, families, command gates, reconciliation.
//! * [`result`]: results of all three families and conversion between them.
//! * [`config`], [`conflist`]: plugin configurations (unknown keys kept) and conflists.
//! * [`runtime_config`]: the capabilities a runtime passes in `runtimeConfig`.
//! * [`error`]: the CNI error object and codes; every error type here converts into it.
//! * [`invocation`]: the `CNI_*` parameters of one plugin call.
//! * [`args`], [`validate`]: `CNI_ARGS`, and container-ID / interface-name / network-name rules.
//! * [`merge`]: merging the results of several attachments into one.
//! * [`ip`]: addresses that keep their host bits; MACs compared as bytes.
//! * [`gojson`]: Go-compatible JSON errors, output formatting and quoting.
#![forbid(unsafe_code)]

pub mod args;
pub mod config;
pub mod conflist;
mod decode;
pub mod error;
pub mod gojson;
pub mod invocation;
pub mod ip;
pub mod merge;
pub mod result;
pub mod runtime_config;
pub mod validate;
pub mod version;

pub use config::NetConf;
pub use conflist::NetConfList;
pub use decode::DecodeError;
pub use error::{CniError, Context};
pub use invocation::Invocation;
pub use ip::{IpNet, Mac};
pub use result::{AnyResult, CniResult};
pub use runtime_config::RuntimeConfig;
