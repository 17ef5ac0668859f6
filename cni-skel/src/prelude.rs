//! What nearly every plugin names, in one import: `use cni_skel::prelude::*;`.
//!
//! The trait to implement and what its methods take and return ([`Plugin`], [`CmdArgs`],
//! [`CniResult`], [`CniError`]), a result in its own version family ([`AnyResult`]), the
//! configuration ([`NetConf`]) and `?` with a message naming the step ([`Context`]).

pub use crate::dispatch::{CmdArgs, Plugin};
pub use cni_types::{AnyResult, CniError, CniResult, Context, NetConf};
