//! The attach engine below braid's meta-plugins (the delegator and the merger): attach a list
//! of delegate networks to one container crash-safely, and undo exactly what was done.
//!
//! Plugin authors writing an ordinary plugin need none of this; it is for meta-plugins that
//! run other plugins on a container's behalf and must never leak what those plugins created.
//!
//! * [`meta`]: the configuration every meta-plugin shares (`delegates`, `stateDir`,
//!   `timeout`) and the one setup both plugins run for every command.
//! * [`delegates`]: reading the `delegates` key and validating the plan before anything runs.
//! * [`deadline`]: one deadline for a whole command, a share of it kept for rollback.
//! * [`attach`]: the engine — plan made durable first, rollback in reverse, DEL and CHECK from
//!   the recorded plan.
//! * [`ifnames`]: the `net<N>` names braid chooses, under a lock per pod namespace.
//! * [`sandbox`]: the pod namespace's links, and a merged result completed from them (MACs, MTUs).
//! * [`plan`]: the on-disk format of that plan, typed and versioned.
//! * [`state`]: the locked, private, crash-safe files that hold it.
//! * [`status`]: STATUS — whether an ADD could run now (every delegate found and ready).
#![forbid(unsafe_code)]

pub mod attach;
pub mod deadline;
pub mod delegates;
pub mod ifnames;
pub mod meta;
pub mod plan;
pub mod sandbox;
pub mod state;
pub mod status;

pub use attach::{Attacher, Delegate, DelegateConfig};
pub use deadline::Deadline;
pub use meta::{Meta, MetaConfig, Spec};
