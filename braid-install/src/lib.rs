//! braid's node installer: run as a DaemonSet (or once, as an init container), it
//!
//! - copies braid's plugin binaries into the node's CNI bin dir atomically ([`binaries`]);
//! - finds the node's primary network ([`primary`]) and writes `00-braid.conflist`, the
//!   delegator with the primary as its first delegate by reference ([`config`]), keeping it
//!   current when the primary's name, version or capabilities change;
//! - mirrors network definitions from a mounted ConfigMap into the delegator's `networksDir`
//!   ([`mirror`]);
//! - with `--kubernetes-api`, mirrors NetworkAttachmentDefinitions into the same directory
//!   ([`nad_mirror`]) and publishes the pods' network-status ([`api`]), so that neither is on
//!   the pod-start path.
//!
//! Without `--kubernetes-api` it needs no Kubernetes API access. See `braid-install/README.md`
//! for the flags.

pub mod api;
pub mod binaries;
pub mod config;
pub mod dra;
pub mod error;
pub mod fsutil;
pub mod metrics;
pub mod mirror;
pub mod nad;
pub mod nad_mirror;
pub mod options;
pub mod owners;
pub mod primary;
pub mod run;
pub mod serve;

pub use error::InstallError;
pub use options::{Action, Options};

/// One line on stderr per action.
pub fn log(msg: &str) {
    eprintln!("braid-install: {msg}");
}

/// Logs `msg` unless it is what `slot` logged last: a state that repeats (a bad key, a missing
/// primary, a retried API failure) is logged when it changes, not on every pass.
pub fn log_changed(slot: &mut Option<String>, msg: String) {
    if slot.as_deref() != Some(msg.as_str()) {
        log(&msg);
        *slot = Some(msg);
    }
}
