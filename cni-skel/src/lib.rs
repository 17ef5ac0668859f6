//! What every braid plugin needs, so that a correct CNI plugin is a trait implementation and a
//! one-line `main`.
//!
//! * [`alloc`]: the small-object allocator plugin binaries install (fast under musl).
//! * [`attach`]: the crash-safe multi-delegate engine below the delegator and the merger.
//! * [`chain`]: running conflists with libcni semantics and its result cache.
//! * [`child_io`]: a child's three pipes and its exit, on the calling thread, with a deadline.
//! * [`delegates`]: reading a meta-plugin's `delegates` key and validating the plan.
//! * [`dispatch`]: the Go-exact dispatcher ([`Plugin`], [`run`], [`main`]).
//! * [`env`](mod@env): the injected environment (real and test).
//! * [`keys`]: a plugin's own configuration keys, with errors that name them.
//! * [`invoke`]: finding and running other plugins, with timeouts.
//! * [`netns`]: running work inside a network namespace on a dedicated thread.
//! * [`state`]: crash-safe, locked per-attachment state files.
//! * [`log`](mod@log): logging that never touches stdout.

pub mod alloc;
pub mod attach;
pub mod chain;
pub mod child_io;
pub mod delegates;
pub mod dispatch;
pub mod env;
pub mod invoke;
pub mod keys;
pub mod log;
pub mod netns;
pub mod state;

pub use dispatch::{main, run, CmdArgs, Plugin};
pub use env::{Environment, ProcessEnv, TestEnv};
