//! An update of a live attachment: the delegates a plugin *selected* (those it gave a
//! [`Delegate::selector`]) brought to a wanted list while the container runs — the
//! delegator's network hot-plug, which its node agent drives when a pod's network annotation
//! changes. CNI has no such command (an ADD of an attachment that exists is refused, DEL
//! removes all of it); this is braid's, built from the same parts as ADD and DEL so that it
//! keeps their guarantees:
//!
//! * **Exactly the difference.** A recorded attachment whose selector is still wanted is kept
//!   as it is — its delegate is not called, its interface not touched; every other selected
//!   one gets its DEL (what ADD sent, its recorded result as `prevResult`: its IPAM released);
//!   every wanted selector without a recorded attachment gets an ADD. Configured delegates
//!   (no selector: the cluster network) are never touched.
//! * **Locks as ADD takes them**: the pod namespace's, then the container's ([`crate::ifnames`],
//!   [`crate::attach`]): an update and the pod's own ADD or DEL never interleave, and the added
//!   delegates are named (`net<N>`) after the removed ones are gone, so a freed name is free.
//! * **Crash-safe like ADD.** The plan without the removed attachments is written (atomically,
//!   durably) only after their DEL succeeded — a crash before leaves them recorded, and the next
//!   update or the pod's DEL deletes them again (DEL is idempotent); the plan with the added ones
//!   is written durably before any of them is sent its configuration, and their results are
//!   appended as ADD appends them — a crash leaves every added delegate that may have acted in
//!   the plan, which the pod's DEL (or the next update: a selected attachment without a result
//!   is never kept) deletes.
//! * **All added or none.** When an added delegate fails, every added one that was attempted
//!   gets its DEL in reverse and leaves the plan; what was kept and removed stays so, and the
//!   error names the delegate.
//! * **The caller finishes under the same locks.** The update returns its locks with what it
//!   left ([`Held`]): what the caller still does for the sandbox — routes, the rest of its
//!   chain, the files that describe the sandbox — happens before a DEL of it can start, and a
//!   step of it that fails rolls the added attachments back ([`Attacher::roll_back_added`]) as
//!   a failed ADD is rolled back.
//! * A container that has no state (its sandbox already deleted, or never attached by this
//!   plugin) is refused with [`NOT_ATTACHED`] in the message, and nothing is done.

use crate::add::{added_stdins, run_added};
use crate::attach::{describe, Attacher};
use crate::delegate::Delegate;
use crate::ifnames::NetnsLock;
use crate::plan::{Attachment, Phase, Plan};
use crate::state::ContainerLock;
use cni_runtime::chain::RuntimeConf;
use cni_skel::log::Logger;
use cni_types::error::{DECODING_FAILURE, INTERNAL, INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_types::result::AnyResult;
use cni_types::version::Command;
use cni_types::CniError;

/// Part of the message of an update refused because the container has no attachment to update.
pub const NOT_ATTACHED: &str = "has no attachment to update";

/// What an update left: every attachment of the plan in order (kept ones first as they were,
/// then the added ones), each with its result; and the update's failure, if any — the plan is
/// then what the failure left (removals done stay done, added ones rolled back).
#[derive(Debug)]
pub struct Updated {
    /// The plan's attachments after the update.
    pub attachments: Vec<Attachment>,
    /// Their results, in the same order.
    pub results: Vec<AnyResult>,
    /// Which of them this update added.
    pub added: Vec<bool>,
    /// The networks whose attachments were removed (`describe`d).
    pub removed: Vec<String>,
    /// Why the update stopped part-way.
    pub failure: Option<CniError>,
}

impl Updated {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        !self.removed.is_empty() || self.added.iter().any(|a| *a)
    }
}

/// What an update left, with the sandbox's locks still held (the pod namespace's and the
/// container's): released when this is dropped. Until then no ADD, DEL or other update of the
/// sandbox runs, so what its holder writes about the sandbox cannot outlive it.
#[derive(Debug)]
pub struct Held {
    /// What the update left.
    pub updated: Updated,
    _container: ContainerLock,
    _netns: Option<NetnsLock>,
}

impl Held {
    /// `updated` holding `container` (and `netns`, when the caller took it).
    pub fn new(updated: Updated, container: ContainerLock, netns: Option<NetnsLock>) -> Held {
        Held { updated, _container: container, _netns: netns }
    }
}

impl Attacher<'_> {
    /// Brings the selected attachments of `call`'s container to `wanted` (every one with a
    /// selector; see the module). `name` gives the added delegates their interface names,
    /// under the pod namespace's lock the caller holds.
    pub fn update(
        &self,
        call: &RuntimeConf,
        mut wanted: Vec<Delegate>,
        name: &mut dyn FnMut(&mut [Delegate]) -> Result<(), CniError>,
        log: &mut Logger,
    ) -> Result<(Updated, ContainerLock), CniError> {
        if let Some(d) = wanted.iter().find(|d| d.selector.is_none()) {
            return Err(CniError::new(INTERNAL, format!("network {:?} has no selector to update by", d.name())));
        }
        let key = Self::key(call)?;
        let lock = self.lock(call, self.deadline.add_until())?;
        let Some(bytes) = self.store.read(&key)? else {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                format!(
                    "container {} {NOT_ATTACHED} on {} (no state in {})",
                    call.container_id,
                    call.ifname,
                    self.store.dir().display()
                ),
            ));
        };
        let mut plan = Plan::decode(&bytes).ok_or_else(|| {
            CniError::new(
                DECODING_FAILURE,
                format!(
                    "the state of container {} on {} is corrupt: nothing updated (DEL still deletes the configured delegates)",
                    call.container_id, call.ifname
                ),
            )
        })?;
        // Processes of an update (or ADD) killed part-way end before anything is decided.
        self.end_leftovers(&plan, log)?;
        let mut kept = vec![false; plan.attachments.len()];
        wanted.retain(|d| {
            let found = plan.attachments.iter().enumerate().position(|(i, a)| {
                !kept[i] && a.selector.is_some() && a.selector == d.selector && a.phase == Phase::Added
            });
            match found {
                Some(i) => {
                    kept[i] = true;
                    false
                }
                None => true,
            }
        });
        let remove: Vec<usize> =
            (0..plan.attachments.len()).filter(|&i| plan.attachments[i].selector.is_some() && !kept[i]).collect();
        let mut removed = Vec::new();
        let mut failure = None;
        // Last first, as DEL goes; one that fails keeps its record (a later update or the
        // pod's DEL tries again) unless its ADD never returned a result.
        let mut gone = vec![false; plan.attachments.len()];
        for &i in remove.iter().rev() {
            let a = &plan.attachments[i];
            match self.replay(Command::Del, call, a) {
                Ok(()) => {
                    log.info(format_args!("update: removed {}", describe(i, a)));
                    removed.push(describe(i, a));
                    gone[i] = true;
                }
                Err(e) if a.phase != Phase::Added => {
                    log.warn(format_args!("update: {}: {} (its ADD never returned a result)", describe(i, a), e.msg));
                    gone[i] = true;
                }
                Err(e) => {
                    let e = CniError::new(e.code, format!("removing {}: {}", describe(i, a), e.msg));
                    log.error(&e);
                    failure.get_or_insert(e);
                }
            }
        }
        if gone.iter().any(|g| *g) {
            let mut i = 0;
            plan.attachments.retain(|_| {
                i += 1;
                !gone[i - 1]
            });
            self.store.write(&key, &plan.to_line()).map_err(|e| {
                CniError::new(IO_FAILURE, format!("the removed networks' DEL succeeded, but their state: {e}"))
            })?;
        }
        let before = plan.attachments.len();
        if failure.is_none() && !wanted.is_empty() {
            if let Err(e) = self.add_wanted(call, &key, &mut plan, &mut wanted, name, log) {
                failure = Some(e);
            }
        }
        // An attachment whose ADD never returned (a rollback left incomplete) is the pod's DEL's.
        let before =
            plan.attachments[..before.min(plan.attachments.len())].iter().filter(|a| a.result.is_some()).count();
        plan.attachments.retain(|a| a.result.is_some());
        let results = plan
            .attachments
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let v = a
                    .result
                    .as_ref()
                    .ok_or_else(|| CniError::new(INTERNAL, format!("{} has no recorded result", describe(i, a))))?;
                AnyResult::from_bytes(&serde_json::to_vec(v).unwrap_or_default()).map_err(|e| {
                    CniError::new(DECODING_FAILURE, format!("{}: its recorded result: {e}", describe(i, a)))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let added = (0..plan.attachments.len()).map(|i| i >= before).collect();
        Ok((Updated { attachments: plan.attachments, results, added, removed, failure }, lock))
    }

    /// Undoes what an update added, with its locks still held (`updated`: what it left): each
    /// added attachment gets its DEL, last first, and leaves the plan — what a failed ADD does
    /// with its delegates, for a step after the delegates that failed (the default route, a
    /// later plugin of the chain). `updated` then lists what is attached. One whose DEL fails
    /// stays attached and recorded (the next update, or the pod's DEL, deletes it again) and is
    /// named in the error.
    pub fn roll_back_added(&self, call: &RuntimeConf, updated: &mut Updated, log: &mut Logger) -> Result<(), CniError> {
        let added: Vec<String> = updated
            .attachments
            .iter()
            .zip(&updated.added)
            .filter(|(_, a)| **a)
            .map(|(a, _)| a.ifname.clone())
            .collect();
        if added.is_empty() {
            return Ok(());
        }
        let key = Self::key(call)?;
        let bytes = self.store.read(&key)?.unwrap_or_default();
        let mut plan = Plan::decode(&bytes).ok_or_else(|| {
            CniError::new(
                DECODING_FAILURE,
                format!("the state of container {} is unreadable: not rolled back", call.container_id),
            )
        })?;
        let attempted: Vec<bool> =
            plan.attachments.iter().map(|a| a.selector.is_some() && added.contains(&a.ifname)).collect();
        let errors = self.del_recorded(call, &plan, &attempted, crate::attach::Order::OneByOne, None, log);
        // What was deleted leaves the plan; what failed its DEL stays recorded and attached.
        let gone: Vec<String> = plan
            .attachments
            .iter()
            .enumerate()
            .filter(|(i, a)| attempted[*i] && !errors.iter().any(|e| e.starts_with(&describe(*i, a))))
            .map(|(i, a)| {
                log.info(format_args!("update: rolled back {}", describe(i, a)));
                a.ifname.clone()
            })
            .collect();
        plan.attachments.retain(|a| !gone.contains(&a.ifname));
        self.store
            .write(&key, &plan.to_line())
            .map_err(|e| CniError::new(IO_FAILURE, format!("the added networks were deleted, but their state: {e}")))?;
        let keep: Vec<bool> = updated.attachments.iter().map(|a| !gone.contains(&a.ifname)).collect();
        let mut k = keep.iter();
        updated.attachments.retain(|_| k.next().copied().unwrap_or(true));
        let mut k = keep.iter();
        updated.results.retain(|_| k.next().copied().unwrap_or(true));
        let mut k = keep.iter();
        updated.added.retain(|_| k.next().copied().unwrap_or(true));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(CniError::new(
                INTERNAL,
                format!("rollback incomplete, kept for the next update or the pod's DEL: {}", errors.join("; ")),
            ))
        }
    }

    /// ADD of the `wanted` delegates that have no attachment yet: named, appended to the plan,
    /// the plan made durable, then each one's ADD; on a failure every attempted one is deleted
    /// in reverse and the plan written without them.
    fn add_wanted(
        &self,
        call: &RuntimeConf,
        key: &crate::state::Key,
        plan: &mut Plan,
        wanted: &mut [Delegate],
        name: &mut dyn FnMut(&mut [Delegate]) -> Result<(), CniError>,
        log: &mut Logger,
    ) -> Result<(), CniError> {
        name(wanted)?;
        let taken: Vec<&str> = plan.attachments.iter().map(|a| a.ifname.as_str()).collect();
        if let Some(d) = wanted.iter().find(|d| taken.contains(&d.ifname.as_str())) {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                format!("network {:?}: interface {} is taken by an attachment of this pod", d.name(), d.ifname),
            ));
        }
        let first = plan.attachments.len();
        let (planned, stdins) = added_stdins(call, wanted)?;
        plan.attachments.extend(planned);
        let line = plan.to_line();
        if Plan::decode(&line).is_none() {
            plan.attachments.truncate(first);
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                "the added networks' configuration cannot be recorded and read back (nested too deeply?)",
            ));
        }
        self.store.write(key, &line).inspect_err(|_| plan.attachments.truncate(first))?;
        match run_added(self, call, key, wanted, stdins, first) {
            Ok(results) => {
                for (k, value) in results.into_iter().enumerate() {
                    let a = &mut plan.attachments[first + k];
                    a.result = Some(value);
                    a.phase = Phase::Added;
                    log.info(format_args!("update: added {}", describe(first + k, a)));
                }
                Ok(())
            }
            Err((k, e, started)) => {
                let attempted: Vec<bool> = (0..plan.attachments.len())
                    .map(|i| i >= first && (i < first + k || (i == first + k && started)))
                    .collect();
                let failed = describe(first + k, &plan.attachments[first + k]);
                let errors = self.del_recorded(call, plan, &attempted, crate::attach::Order::OneByOne, None, log);
                let mut msg = format!("{failed} failed: {}", e.msg);
                if errors.is_empty() {
                    plan.attachments.truncate(first);
                    if let Err(w) = self.store.write(key, &plan.to_line()) {
                        msg.push_str(&format!("; rolled back, but the state still names them: {w}"));
                    }
                } else {
                    msg.push_str(&format!("; rollback incomplete, kept for the pod's DEL: {}", errors.join("; ")));
                    // What the state now says; the ones without a result are left out of the
                    // update's report (their DEL is the pod's).
                    if let Some(p) = self.store.read(key).ok().flatten().and_then(|b| Plan::decode(&b)) {
                        *plan = p;
                    }
                }
                let e = CniError { code: e.code, msg, details: e.details };
                log.error(&e);
                Err(e)
            }
        }
    }
}
