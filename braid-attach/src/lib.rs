//! The attach engine below braid's meta-plugins (the delegator and the merger): attach a list
//! of delegate networks to one container crash-safely, and undo exactly what was done.
//!
//! Plugin authors writing an ordinary plugin need none of this; it is for meta-plugins that
//! run other plugins on a container's behalf and must never leak what those plugins created.
//!
//! * [`config`]: the configuration every meta-plugin shares (`delegates`, `stateDir`,
//!   `timeout`, …) and what each plugin decides about it.
//! * [`claim_record`]: the node-local record of a ResourceClaim's networks for a pod, which
//!   the node agent's DRA driver writes and the delegator's ADD reads.
//! * [`command`]: the one setup both plugins run for every command, handing it to the engine.
//! * [`delegate`]: the delegate model — one plugin or a conflist, with its interface, its
//!   runtime requests and `CNI_ARGS` — and what a plan records of it.
//! * [`delegates`]: reading the `delegates` key and validating the plan before anything runs.
//! * [`deadline`]: one deadline for a whole command, a share of it kept for rollback.
//! * [`attach`]: the engine's core — plan made durable first, one lock per container, delegates
//!   one by one or all at once, a recorded delegate replayed.
//! * [`add`]: ADD — the plan made durable before any delegate acts — and its rollback in
//!   reverse.
//! * `ahead`: a delegate's process started before its turn, so that its start-up overlaps the
//!   engine's work or the delegate before it; sent its configuration only in its turn.
//! * [`teardown`]: DEL from the recorded plan (or the configuration), and stale attachments.
//! * [`forward`]: CHECK, and GC's valid attachments passed on.
//! * [`status`]: STATUS — whether an ADD could run now (every delegate found and ready).
//! * [`update`]: a live attachment's selected delegates brought to a wanted list (the
//!   delegator's network hot-plug): exactly the difference attached and detached.
//! * [`nesting`]: braid plugins inside braid plugins (depth, held locks).
//! * [`ifnames`]: the `net<N>` names braid chooses, under a lock per pod namespace.
//! * [`sandbox`]: the pod namespace, entered once per command, and a merged result completed
//!   from its links (MACs, MTUs).
//! * [`plan`]: the on-disk format of that plan, typed and versioned.
//! * [`state`]: the locked, private, crash-safe files that hold it.
//! * [`owner`]: one state directory serves one plugin kind.
//! * [`dra_devices`]: the node's DRA devices and Multus's two attributes of each, which the
//!   node agent keeps for the delegator's helper.
#![forbid(unsafe_code)]

pub mod add;
mod ahead;
pub mod attach;
mod bounded;
pub mod claim_record;
pub mod command;
pub mod config;
pub mod deadline;
pub mod delegate;
pub mod delegates;
pub mod device_metadata;
pub mod dra_devices;
pub mod forward;
pub mod ifnames;
pub mod nesting;
pub mod owner;
pub mod plan;
pub mod sandbox;
pub mod state;
pub mod status;
pub mod teardown;
#[cfg(test)]
mod test_dir;
pub mod update;

pub use attach::Attacher;
pub use command::MetaCommand;
pub use config::{PluginRules, SharedConfig};
pub use deadline::Deadline;
pub use delegate::{Delegate, DelegateConfig};
