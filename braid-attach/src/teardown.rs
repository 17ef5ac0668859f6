//! DEL — from the recorded plan, or without a usable one from the configuration — and the
//! deletion of a stale attachment that GC finds (see [`crate::attach`] for the engine's rules).
//! What a crashed ADD left running is ended first.

use crate::attach::{describe, each, thread_panicked, Attacher, Order};
use crate::deadline::Deadline;
use crate::delegate::{plan, Delegate};
use crate::plan::{Attachment, Phase, Plan};
use crate::state::Key;
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke::Started;
use cni_skel::log::Logger;
use cni_types::error::{INTERNAL, INVALID_NETWORK_CONFIG, IO_FAILURE, TRY_AGAIN_LATER};
use cni_types::version::Command;
use cni_types::CniError;
use std::time::Instant;

/// How long DEL lets a delegate that a crashed ADD left running finish on its own: half of
/// what is left of the deadline (the other half is for the DELs), at most a minute (the
/// default per-call `timeout`, which the crashed ADD would have given it).
pub fn leftover_wait(deadline: &Deadline) -> Instant {
    let now = Instant::now();
    let cap = now + std::time::Duration::from_secs(60);
    match deadline.until() {
        Some(u) => cap.min(now + u.saturating_duration_since(now) / 2),
        None => cap,
    }
}

impl Attacher<'_> {
    /// Ends every delegate process a crashed ADD left running (recorded, same start time, still
    /// alive) before DEL undoes its work: otherwise it could finish after the DEL and leave an
    /// attachment nobody knows of.
    ///
    /// A leftover is first given time to finish on its own ([`leftover_wait`]); only one still
    /// running then is killed with its process group. Killing at once would cut a delegate at
    /// an arbitrary instruction — and some are not safe to cut: host-local creates its
    /// reservation file (`O_EXCL`) and writes the container ID into it in a second step
    /// (`backend/disk/backend.go`, `Reserve`), so a SIGKILL between the two leaves an empty
    /// file that no DEL releases (`ReleaseByID` matches the contents). That was the rare leak
    /// of the crash runs; what a finished ADD did, the DEL that follows undoes.
    pub(crate) fn end_leftovers(&self, state: &Plan, log: &mut Logger) -> Result<(), CniError> {
        for (i, a) in state.attachments.iter().enumerate() {
            let Some(p) = a.process.filter(|_| a.phase == Phase::Running) else { continue };
            let leftover = cni_runtime::procs::RecordedProcess { pid: p.pid, start: p.start };
            if !leftover.alive() {
                continue;
            }
            if leftover.wait_gone(leftover_wait(&self.deadline)) {
                log.warn(format_args!(
                    "{}: its ADD (pid {}) was still running: it finished on its own",
                    describe(i, a),
                    p.pid
                ));
                continue;
            }
            match leftover.kill_group(std::time::Duration::from_secs(5)) {
                Ok(true) => {
                    log.warn(format_args!("{}: its ADD (pid {}) was still running: killed", describe(i, a), p.pid))
                }
                Ok(false) => {}
                Err(e) => return Err(CniError::new(INTERNAL, format!("{}: {e}", describe(i, a)))),
            }
        }
        Ok(())
    }

    /// DEL every configured delegate (no usable state): every failure is reported, since
    /// nothing recorded says which of them may hold something — except a delegate whose binary
    /// does not exist, which cannot have attached anything and cannot be asked to DEL.
    fn del_configured(&self, call: &RuntimeConf, state: &Plan, log: &mut Logger) -> Vec<String> {
        let mut indices = Vec::new();
        for (i, a) in state.attachments.iter().enumerate().rev() {
            match self.missing_binary(a) {
                Some(e) => log.warn(format_args!("{}: not deleted: {e}", describe(i, a))),
                None => indices.push(i),
            }
        }
        let del = |i: usize| self.replay(Command::Del, call, &state.attachments[i]);
        let outcomes = each(Order::of(state.parallel), &indices, &del, &|| Err(thread_panicked()));
        let mut errors = Vec::new();
        for (&i, outcome) in indices.iter().zip(outcomes) {
            if let Err(e) = outcome {
                errors.push(format!("{}: {}", describe(i, &state.attachments[i]), e.msg));
            }
        }
        errors
    }

    /// Why one of the binaries an attachment needs cannot be found, if so.
    fn missing_binary(&self, a: &Attachment) -> Option<String> {
        a.plugin_types().into_iter().find_map(|t| self.exec.find(t, &self.paths).err().map(|e| e.to_string()))
    }

    /// DEL from the state (or, without a usable one, from `configured`), every delegate tried.
    pub fn del(&self, call: &RuntimeConf, configured: &[Delegate], log: &mut Logger) -> Result<(), CniError> {
        self.del_with(call, configured, None, None, log)
    }

    /// The process DEL runs first, started ahead from the configuration — the last configured
    /// delegate's first DEL process (a single plugin's, a conflist's last plugin's) — before
    /// the container's lock and the state are read, work that then overlaps the plugin's own
    /// start-up (a Go plugin spends about a millisecond before it reads its stdin), as
    /// [`Attacher::start_first`] does for ADD. [`Attacher::del_with_last`] sends it its
    /// configuration in its turn if it runs exactly what the recorded plan runs there;
    /// otherwise, and when the DEL ends first, it is killed unsent (killed with its caller, it
    /// reads an empty stdin and exits without acting). `None` when the executor does not start
    /// ahead, the deadline has passed, the last delegate's interface is named at ADD
    /// (`net<N>`: known only from the state), or its plugin is not found.
    pub fn start_last(&self, call: &RuntimeConf, configured: &[Delegate]) -> Option<Started> {
        if self.deadline.until().is_some_and(|u| Instant::now() >= u) {
            return None;
        }
        let d = configured.last().filter(|d| !d.auto_ifname)?;
        let path = self.exec.find(d.del_plugin_type(), &self.paths).ok()?;
        let inv = self.invocation(Command::Del, call, &d.ifname, &d.effective_args(call));
        self.exec.start_ahead(&path, &inv.env())
    }

    /// [`Attacher::del`] with the process [`Attacher::start_last`] started (`last`), used in
    /// the turn of the last configured delegate's recorded attachment when it runs exactly
    /// that turn's binary and variables, killed unsent otherwise.
    pub fn del_with_last(
        &self,
        call: &RuntimeConf,
        configured: &[Delegate],
        last: Option<Started>,
        log: &mut Logger,
    ) -> Result<(), CniError> {
        let last = last.and_then(|p| Some((configured.len().checked_sub(1)?, p)));
        self.del_with(call, configured, None, last, log)
    }

    /// DEL when the state directory itself is unusable (`why`): the configured delegates are
    /// deleted, so that their IP reservations are released, and the state is left alone.
    pub fn del_without_state(
        &self,
        call: &RuntimeConf,
        configured: &[Delegate],
        why: &CniError,
        log: &mut Logger,
    ) -> Result<(), CniError> {
        self.del_with(call, configured, Some(why), None, log)
    }

    fn del_with(
        &self,
        call: &RuntimeConf,
        configured: &[Delegate],
        unusable_dir: Option<&CniError>,
        last: Option<(usize, Started)>,
        log: &mut Logger,
    ) -> Result<(), CniError> {
        let key = Self::key(call)?;
        if unusable_dir.is_none() {
            // Earlier DELs' retired state files ([`crate::state::StateStore::retire`]),
            // unlinked on a thread of their own while this DEL takes its lock, reads its state
            // and its delegates work; not waited for (what the exit cuts short, the next DEL
            // sweeps).
            let store = self.store.clone();
            let _ = std::thread::Builder::new().spawn(move || store.sweep_retired());
        }
        // What made the state unusable: DEL then deletes the configured delegates, as for a
        // corrupt state, and never blocks or gives up before they are released.
        let mut unusable: Vec<String> = unusable_dir.map(|e| e.msg.clone()).into_iter().collect();
        let _lock = match unusable_dir.map_or_else(|| self.lock(call, self.deadline.until()).map(Some), |_| Ok(None)) {
            Ok(l) => l,
            // Still held at the deadline (an ADD of this container is running): deleting without
            // the lock would race it. The runtime tries again; nothing was touched.
            Err(e) if e.code == TRY_AGAIN_LATER => {
                log.error(&e);
                return Err(e);
            }
            // Nested, with the lock held above us: our ADD would have been refused by the same
            // rule, so there is nothing of ours to delete (a cycle's DEL must end too).
            Err(e) if crate::nesting::nested() && e.code == INVALID_NETWORK_CONFIG => {
                log.info(format_args!("{e}; nothing of this network's own to delete"));
                return Ok(());
            }
            Err(e) => {
                unusable.push(e.msg);
                None
            }
        };
        let read = if unusable_dir.is_some() { Ok(None) } else { self.store.read(&key) };
        let state = match read {
            Ok(None) => None,
            Ok(Some(bytes)) => match Plan::decode(&bytes) {
                Some(v) => Some(v),
                None => {
                    log.error(format_args!(
                        "state file for {}@{} is corrupt ({} bytes); deleting the configured delegates instead",
                        call.container_id,
                        call.ifname,
                        bytes.len()
                    ));
                    None
                }
            },
            Err(e) => {
                unusable.push(e.to_string());
                None
            }
        };
        if !unusable.is_empty() {
            log.error(format_args!("{}; deleting the configured delegates instead", unusable.join("; ")));
        }
        let n;
        let errors = match state {
            Some(state) => {
                n = state.attachments.len();
                self.end_leftovers(&state, log)?;
                self.del_recorded(call, &state, &vec![true; n], Order::of(state.parallel), last, log)
            }
            None => {
                // Nothing recorded to match it against: not used.
                drop(last);
                let (state, _) = plan(call, configured, self.parallel)?;
                n = state.attachments.len();
                self.del_configured(call, &state, log)
            }
        };
        if !errors.is_empty() {
            let e =
                CniError::new(INTERNAL, format!("{} of {n} delegates failed DEL: {}", errors.len(), errors.join("; ")));
            log.error(&e);
            return Err(e);
        }
        if unusable_dir.is_some() {
            return Ok(());
        }
        // A state that could not be used is removed if it can be (a planted symlink or FIFO
        // goes with it); one that cannot (a read-only directory) is reported, its delegates
        // released. A regular one is retired: its blocks are freed by a later DEL's sweep.
        self.store.retire(&key).map_err(|e| {
            let e = CniError::new(IO_FAILURE, format!("the delegates were deleted, but {e}"));
            log.error(&e);
            e
        })
    }

    /// DEL one stale attachment from its recorded state, then drop the state — as libcni's GC
    /// does for its cache (`libcni/api.go`, `GCNetworkList`): dropping the record alone would
    /// leave its links and IP reservations with nothing left that knows them.
    pub(crate) fn gc_stale(&self, key: &Key, log: &mut Logger) -> Result<(), CniError> {
        let call = RuntimeConf {
            container_id: key.container_id().to_string(),
            ifname: key.ifname().to_string(),
            ..RuntimeConf::default()
        };
        let _lock = self.lock(&call, self.deadline.until())?;
        let Some(bytes) = self.store.read(key)? else { return Ok(()) };
        if let Some(state) = Plan::decode(&bytes) {
            let call = RuntimeConf { netns: state.netns.clone(), ..call };
            self.end_leftovers(&state, log)?;
            // GC stays as it was: one stale attachment after another, its delegates in turn.
            let errors =
                self.del_recorded(&call, &state, &vec![true; state.attachments.len()], Order::OneByOne, None, log);
            if !errors.is_empty() {
                return Err(CniError::new(
                    INTERNAL,
                    format!("stale attachment {}@{}: {}", key.container_id(), key.ifname(), errors.join("; ")),
                ));
            }
        } else {
            log.warn(format_args!("stale attachment {}@{}: corrupt state dropped", key.container_id(), key.ifname()));
        }
        log.info(format_args!("stale attachment {}@{} deleted", key.container_id(), key.ifname()));
        Ok(self.store.remove(key)?)
    }
}
