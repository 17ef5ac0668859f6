//! What a CNI plugin needs, so that a correct plugin is a trait implementation and a one-line
//! `main` — the Rust counterpart of the Go library's `pkg/skel` (with `pkg/ns`'s namespace
//! entry).
//!
//! * [`dispatch`]: the dispatcher that behaves exactly like Go's `skel.PluginMainFuncs`
//!   ([`Plugin`], [`run`], [`main`], [`CmdArgs`]).
//! * [`env`](mod@env): the injected environment (the process's, or a test's).
//! * [`netns`]: running work inside a network namespace on a dedicated thread (netlink inside
//!   it is `cni-netlink`'s).
//! * [`keys`]: reading a plugin's own configuration keys, with errors that name them.
//! * [`log`](mod@log): logging that never touches stdout.
//! * [`prelude`]: the names nearly every plugin uses, in one import.
//! * [`testing`] (feature `testing`): a CNI environment builder, a temporary named network
//!   namespace removed on drop, and the root-or-skip rule for namespace tests.
//!
//! A plugin that runs other plugins (a meta-plugin, a runtime) also needs `cni-runtime`;
//! braid's own meta-plugins build on `braid-attach`. `cni_types` and `serde_json` are
//! re-exported so a plugin's `Cargo.toml` needs only this crate.
#![forbid(unsafe_code)]

pub mod dispatch;
pub mod env;
pub mod keys;
pub mod log;
pub mod netns;
pub mod prelude;
#[cfg(feature = "testing")]
pub mod testing;

pub use cni_types;
pub use dispatch::{main, run, CmdArgs, Plugin};
pub use env::{Environment, ProcessEnv, TestEnv};
pub use serde_json;
