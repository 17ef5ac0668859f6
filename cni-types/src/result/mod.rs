//! CNI results of every spec version.
//!
//! Three wire families exist (see [`Family`](crate::version::Family)); each has its own type
//! here, because Go's conversions between them lose and invent information in specific ways
//! that a single type would hide: [`ResultLegacy`] (0.1.0/0.2.0), [`ResultV04`]
//! (0.3.0/0.3.1/0.4.0) and [`CniResult`] (1.0.0/1.1.0, the internal model every plugin works in).
//! [`AnyResult`] holds one of them with its version label, and [`AnyResult::convert_to`]
//! follows the Go library's conversion graph edge for edge.
//!
//! One job a file: the model (`model.rs`), decoding (`parse.rs`, [`AnyResult::create`]),
//! conversion (`convert.rs`), printing with Go's key order (`wire.rs`,
//! [`AnyResult::to_json_pretty`]) and which interfaces are a VM's NIC and its tap (`vm.rs`,
//! [`vm_pairs`]).

mod convert;
mod model;
mod parse;
mod vm;
mod wire;

pub use convert::ConvertError;
pub use model::{
    AnyResult, CniResult, Dns, Interface, InterfaceV04, IpConfig, IpConfigLegacy, IpConfigV04, ResultLegacy, ResultV04,
    Route,
};
pub use parse::CreateError;
pub use vm::{is_vm_interface, vm_pairs, VmPair};
