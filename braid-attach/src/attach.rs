//! The attach engine shared by the delegator and the merger: run a list of delegates for one
//! container, crash-safely, and undo exactly what was done. This file is its core — the
//! [`Attacher`], the lock of a container, how delegates run one by one or all at once, and the
//! replay of a recorded delegate; each command is a file of its own:
//!
//! * ADD and its rollback: [`crate::add`]. The plan — every delegate with the exact bytes it
//!   will be sent — is written durably (fsynced) as the first line of the state file *before*
//!   any delegate is sent its configuration (the first delegate's process may already be
//!   started, waiting for it); after each delegate a line with its result is appended. A crash
//!   at any point leaves a state file that names every delegate that may have done something;
//!   DEL of a planned delegate that never ran is harmless (DEL is idempotent). Appends are
//!   neither renamed nor fsynced: a power loss falls back to the durable plan (the format is
//!   [`crate::plan`]; why appends are not synced is measured in `docs/bench/NOTES.md`). If
//!   delegate *i* fails, delegates *i* … 0 get DEL in reverse (the failed one too: it may have
//!   half-attached), the state is removed once that succeeded, and the error keeps the
//!   delegate's code and names it (index, network, type, interface).
//! * A conflist delegate runs through [`Chain`] as libcni runs it, but its result is kept in
//!   the state (its appended line), not in a libcni cache of its own: DEL and CHECK replay the
//!   list with the recorded result as `prevResult` (`Chain::del_with`, `Chain::check_with`).
//!   The cache's durable write was two fsyncs per list on every ADD for bytes the state already
//!   holds (`docs/bench/NOTES.md`, the delegator's fixed cost); a cache file an older braid
//!   left is still removed by DEL.
//! * DEL: [`crate::teardown`]. It replays the state in reverse — what ADD sent, not today's
//!   configuration — attempting every delegate and reporting all failures together. Without a
//!   state file, or with a corrupt one, the configured delegates are deleted best-effort, so
//!   IPAM is released. GC deletes stale attachments the same way.
//! * CHECK, and GC's forwarding of the valid attachments: [`crate::forward`].
//! * One lock per container serialises ADD/DEL of that container.
//! * With `parallel` ([`Attacher::parallel`]) every delegate's ADD starts at once, each on a
//!   scoped thread of its own running the same path as a sequential one (its process recorded
//!   before it is sent its stdin, its result appended as it arrives — each record one
//!   `write(2)` with `O_APPEND`, so records from several threads stay whole lines). The results
//!   are returned in plan order, whatever order they arrived in. If any fails, the others are
//!   waited for, then every attempted one is deleted in reverse plan order, as above. The plan
//!   records that it was parallel: DEL and CHECK of it run the delegates at once too.

use crate::ahead::{Ahead, FirstStarted};
use crate::bounded::Bounded;
use crate::deadline::Deadline;
use crate::plan::{Attachment, Phase, Plan};
use crate::state::{ContainerLock, Key, StateStore, Wait};
use cni_runtime::chain::{Chain, RuntimeConf};
use cni_runtime::invoke::{self, Exec};
use cni_skel::log::Logger;
use cni_types::error::{DECODING_FAILURE, INTERNAL, INVALID_NETWORK_CONFIG};
use cni_types::result::AnyResult;
use cni_types::version::{self, Command};
use cni_types::{CniError, Context as _, Invocation, NetConfList};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Instant;

/// Runs delegates and keeps their state.
pub struct Attacher<'a> {
    /// How delegates are executed (from several threads at once with [`Attacher::parallel`]).
    pub exec: &'a (dyn Exec + Sync),
    /// `CNI_PATH`.
    pub paths: Vec<PathBuf>,
    /// Where state lives.
    pub store: StateStore,
    /// Start every delegate's ADD at once (the `parallel` key); recorded in the plan, which
    /// decides how its DEL and CHECK run. A DEL without a usable state follows this instead.
    pub parallel: bool,
    /// The command's deadline ([`crate::deadline`]): every delegate call and lock wait of ADD
    /// ends by its ADD part, those of a rollback, DEL, CHECK and GC by its end.
    /// [`Deadline::none`] waits as long as it takes.
    pub deadline: Deadline,
}

/// How the delegates of one step run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// One after another, in the order given.
    OneByOne,
    /// All at once, a scoped thread each.
    AllAtOnce,
}

impl Order {
    /// [`Order::AllAtOnce`] for a parallel plan (the `parallel` key).
    pub(crate) fn of(parallel: bool) -> Order {
        if parallel {
            Order::AllAtOnce
        } else {
            Order::OneByOne
        }
    }
}

/// Runs `f` for every index of `indices`, in `order` (all at once: a scoped thread each; a
/// thread that cannot be created runs its `f` on the calling thread once the others are
/// started). The outcomes come back in the order of `indices`; one whose thread panicked is
/// `panicked()`.
pub(crate) fn each<T: Send>(
    order: Order,
    indices: &[usize],
    f: &(dyn Fn(usize) -> T + Sync),
    panicked: &dyn Fn() -> T,
) -> Vec<T> {
    if order == Order::OneByOne || indices.len() < 2 {
        return indices.iter().map(|&i| f(i)).collect();
    }
    std::thread::scope(|s| {
        let started: Vec<_> = indices
            .iter()
            .map(|&i| (i, std::thread::Builder::new().name(format!("delegate-{i}")).spawn_scoped(s, move || f(i)).ok()))
            .collect();
        started
            .into_iter()
            .map(|(i, thread)| match thread {
                Some(t) => t.join().unwrap_or_else(|_| panicked()),
                None => f(i),
            })
            .collect()
    })
}

/// The error of a delegate whose thread panicked (see [`each`]).
pub(crate) fn thread_panicked() -> CniError {
    CniError::new(INTERNAL, "its thread panicked")
}

/// The `CNI_ARGS` a recorded attachment is replayed with: what ADD sent, `IgnoreUnknown=1` in
/// front — states written before it was added get it on replay too.
fn replay_args(call: &RuntimeConf, a: &Attachment) -> String {
    crate::delegate::ignore_unknown(a.args.as_deref().unwrap_or(&call.args))
}

/// `delegate 1 (network "p2p", type "ptp", interface net1)`: how errors and logs name one.
pub(crate) fn describe(i: usize, a: &Attachment) -> String {
    format!("delegate {i} (network {:?}, type {:?}, interface {})", a.name, a.plugin_type, a.ifname)
}

impl Attacher<'_> {
    /// A conflist run with `exec` (a [`Bounded`] one).
    pub(crate) fn chain_with<'e>(&self, exec: &'e dyn Exec) -> Chain<'e> {
        Chain { exec, paths: self.paths.clone(), cache_dir: self.store.dir().join("cache") }
    }

    /// The exec of every call that must end by the command's deadline.
    pub(crate) fn until_end(&self) -> Bounded<'_> {
        Bounded { inner: self.exec, spawned: &|_| {}, until: self.deadline.until() }
    }

    pub(crate) fn invocation(&self, command: Command, call: &RuntimeConf, ifname: &str, args: &str) -> Invocation {
        let rt = RuntimeConf { ifname: ifname.to_string(), args: args.to_string(), ..call.clone() };
        rt.invocation(command, &cni_types::invocation::join_path(&self.paths))
    }

    pub(crate) fn key(call: &RuntimeConf) -> Result<Key, CniError> {
        Key::new(&call.container_id, &call.ifname)
    }

    /// The container's lock, waited for until `until` (code 11 then, naming the holder). Inside
    /// another braid plugin ([`crate::nesting::nested`]) a held lock is refused at once: the
    /// holder may be the enclosing plugin itself, waiting for us (a delegate that refers back,
    /// directly or through a conflist, to a network with the same `stateDir`) — waiting would
    /// only end at the deadline.
    pub(crate) fn lock(&self, call: &RuntimeConf, until: Option<Instant>) -> Result<ContainerLock, CniError> {
        let wait = if crate::nesting::nested() { Wait::No } else { Wait::Until(until) };
        let locked = self.store.lock_until(&call.container_id, wait).map_err(|e| match e.source.kind() {
            std::io::ErrorKind::TimedOut => self.deadline.passed(format_args!(
                "the lock of container {} ({}: {})",
                call.container_id,
                e.path.display(),
                e.source
            )),
            _ => e.into(),
        })?;
        locked.ok_or_else(|| {
            CniError::new(
                INVALID_NETWORK_CONFIG,
                format!(
                    "the state of container {} in {} is locked by an enclosing braid plugin: a delegate refers back to a network that uses the same stateDir",
                    call.container_id,
                    self.store.dir().display()
                ),
            )
        })
    }

    /// Sends DEL or CHECK to one recorded attachment: what ADD sent, with its recorded result
    /// as `prevResult` where its version has one (0.4.0 and later), with its recorded args.
    pub(crate) fn replay(&self, command: Command, call: &RuntimeConf, a: &Attachment) -> Result<(), CniError> {
        self.replay_in_turn(command, call, (0, a), None, &Ahead::default())
    }

    /// The binary and the call of the first process with which a recorded attachment is
    /// replayed ([`crate::ahead`]): a single plugin's; a conflist's first plugin's for CHECK,
    /// its last one's for DEL (the chain runs DEL in reverse) — the chain calls it with the
    /// same variables.
    fn replay_first(
        &self,
        command: Command,
        call: &RuntimeConf,
        a: &Attachment,
    ) -> Result<(PathBuf, Invocation), CniError> {
        let types = a.plugin_types();
        let first = if command == Command::Del { types.last() } else { types.first() };
        let path = self.exec.find(first.copied().unwrap_or_default(), &self.paths)?;
        Ok((path, self.invocation(command, call, &a.ifname, &replay_args(call, a))))
    }

    /// [`Attacher::replay`] of attachment `i` of a plan, one after another: its first process
    /// taken from `ahead` when it was started there, and the `next` one's started ahead while it
    /// runs ([`crate::ahead`]).
    fn replay_in_turn(
        &self,
        command: Command,
        call: &RuntimeConf,
        (i, a): (usize, &Attachment),
        next: Option<(usize, &Attachment)>,
        ahead: &Ahead,
    ) -> Result<(), CniError> {
        let until = self.deadline.until();
        let first = self.replay_first(command, call, a);
        let started = first.as_ref().ok().and_then(|(path, inv)| match next {
            Some(_) => ahead.take_or_start(self.exec, i, path, &inv.env(), until),
            None => ahead.take(i, path, &inv.env()),
        });
        if let Some((j, b)) = next {
            if let Ok((path, inv)) = self.replay_first(command, call, b) {
                ahead.start(self.exec, j, &path, &inv.env(), until);
            }
        }
        let bounded = self.until_end();
        let exec = FirstStarted::new(&bounded, started);
        let args = replay_args(call, a);
        if !a.list {
            let (path, inv) = first?;
            let mut conf = a.config.clone();
            let has_prev = version::Version::V0_4_0.reached_by(&a.cni_version);
            if let (true, Some(result), Value::Object(map)) = (has_prev, &a.result, &mut conf) {
                map.insert("prevResult".into(), result.clone());
            }
            let stdin = serde_json::to_vec(&conf).unwrap_or_default();
            return Ok(invoke::exec_without_result(&exec, &path, &stdin, &inv)?);
        }
        let bytes = serde_json::to_vec(&a.config).unwrap_or_default();
        let list = NetConfList::parse(&bytes).code(DECODING_FAILURE)?;
        let caps = a.capability_args.clone().unwrap_or_else(|| call.capability_args.clone());
        let rt = RuntimeConf { ifname: a.ifname.clone(), args, capability_args: caps, ..call.clone() };
        let chain = self.chain_with(&exec);
        // The list's result as the state recorded it, in place of a libcni cache of its own.
        let prev = a.result.as_ref().and_then(|v| AnyResult::from_bytes(&serde_json::to_vec(v).ok()?).ok());
        Ok(if command == Command::Check {
            chain.check_with(&list, &rt, prev.as_ref())
        } else {
            chain.del_with(&list, &rt, prev.as_ref())
        }?)
    }

    /// DEL the `attempted` attachments of a recorded plan, last first (all at once in `order`
    /// [`Order::AllAtOnce`]); returns the failures that must keep the state. A delegate that
    /// returned a result keeps it until its DEL succeeds; one that never finished its ADD
    /// (failed, or cut off by a crash) gets a best-effort DEL whose failure is logged:
    /// otherwise a delegate whose DEL fails as its ADD did (a typo'd type, a vanished macvlan
    /// master) would make every later DEL of the pod fail, and the runtime could never finish
    /// its teardown. Shared by ADD's rollback, DEL and GC.
    pub(crate) fn del_recorded(
        &self,
        call: &RuntimeConf,
        state: &Plan,
        attempted: &[bool],
        order: Order,
        first: Option<(usize, invoke::Started)>,
        log: &mut Logger,
    ) -> Vec<String> {
        let indices: Vec<usize> =
            (0..state.attachments.len()).rev().filter(|&i| attempted.get(i).copied().unwrap_or(false)).collect();
        let outcomes = if order == Order::OneByOne {
            // A process started ahead for delegate `i` is used in `i`'s turn if it runs exactly
            // what that turn runs; otherwise it is killed unsent.
            let ahead = first.map_or_else(Ahead::default, |(i, p)| Ahead::with(i, Some(p)));
            let at = |k: usize| indices.get(k).map(|&i| (i, &state.attachments[i]));
            (0..indices.len())
                .filter_map(|k| Some(self.replay_in_turn(Command::Del, call, at(k)?, at(k + 1), &ahead)))
                .collect()
        } else {
            each(order, &indices, &|i| self.replay(Command::Del, call, &state.attachments[i]), &|| {
                Err(thread_panicked())
            })
        };
        let mut errors = Vec::new();
        for (&i, outcome) in indices.iter().zip(outcomes) {
            let a = &state.attachments[i];
            if let Err(e) = outcome {
                let line = format!("{}: {}", describe(i, a), e.msg);
                if a.phase == Phase::Added {
                    errors.push(line);
                } else {
                    log.warn(format_args!("{line} (its ADD never returned a result; not retried)"));
                }
            }
        }
        errors
    }
}
