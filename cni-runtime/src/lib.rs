//! Running CNI plugins the way a runtime does — for runtimes, test harnesses and meta-plugins,
//! not for a plugin that only configures a namespace (that needs [`cni-skel`] alone).
//!
//! * [`invoke`]: finding a plugin in `CNI_PATH` and executing it with an explicit CNI
//!   environment and a timeout — the Go library's `pkg/invoke`.
//! * [`chain`]: running a conflist with libcni's semantics (`libcni/api.go`: `AddNetworkList`,
//!   `CheckNetworkList`, `DelNetworkList`, `GCNetworkList`, `GetStatusNetworkList`) and its
//!   `cniCacheV1` result cache.
//! * [`procs`]: finding and ending a plugin process that outlived the one that started it.
//! * [`child_io`]: a child's three pipes and its exit, served on the calling thread with a
//!   deadline (no helper threads), each output capped.
//! * [`files`]: reading conflists, cached results and state without blocking on a FIFO, past a
//!   cap, or (where asked) through a symlink; and the one atomic, durable replacement every
//!   braid file is written with (state, the result cache, status and DAN files, the
//!   installer's). It lives here, the lowest crate with file I/O (`cni-types` has none), so
//!   the plugins, `braid-attach` and the installer all reach it by an arrow pointing down.
//!
//! With the `testing` feature, `testing::FakeExec` records calls and answers from a script.
//!
//! [`cni-skel`]: https://docs.rs/cni-skel
//!
//! The one `unsafe` block family is in [`child_io`]: `pidfd_open(2)`, which neither std (its
//! `PidFd` is unstable) nor nix 0.31 wraps; its SAFETY argument is at the call.

pub mod chain;
pub mod child_io;
pub mod files;
pub mod invoke;
pub mod procs;
#[cfg(feature = "testing")]
pub mod testing;

pub use chain::{CacheError, Chain, ChainError, RuntimeConf};
pub use invoke::{Exec, InvokeError, RawExec};
