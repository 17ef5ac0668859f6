//! ADD: every delegate attached, or — when one fails — every attempted one rolled back in
//! reverse (see [`crate::attach`] for the engine's rules).

use crate::ahead::{Ahead, FirstStarted};
use crate::attach::{describe, each, thread_panicked, Attacher, Order};
use crate::bounded::Bounded;
use crate::delegate::{plan, plugin_stdin, Delegate, DelegateConfig, Stdins};
use crate::plan::{Phase, Plan, Process, Progress};
use crate::state::{Key, Pending, StateStore};
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke::{self, RawExec, Started};
use cni_runtime::InvokeError;
use cni_skel::log::Logger;
use cni_types::error::{INVALID_NETWORK_CONFIG, IO_FAILURE, TRY_AGAIN_LATER};
use cni_types::result::AnyResult;
use cni_types::version::Command;
use cni_types::{CniError, Invocation};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

/// The plan, written before any delegate is sent its configuration and made durable (fsynced)
/// once: by the first
/// delegate process to exist, before that process is sent its configuration — a plugin acts
/// only on its configuration, so no delegate acts before the plan would survive a power
/// failure, while the fsync overlaps that process's start-up (0.5–1 ms of each ADD here). With
/// an executor that does not report its spawns ([`Exec::reports_spawns`]), before the first
/// call. Should the fsync fail, the process that was waiting for it is killed unsent.
///
/// [`Exec::reports_spawns`]: cni_runtime::invoke::Exec::reports_spawns
struct DurablePlan<'s> {
    store: &'s StateStore,
    pending: Option<Pending>,
    done: OnceLock<Result<(), CniError>>,
}

impl DurablePlan<'_> {
    /// The plan on disk (at once if another thread did it, waiting while one does).
    fn ensure(&self) -> Result<(), CniError> {
        let Some(pending) = &self.pending else { return Ok(()) };
        self.done.get_or_init(|| self.store.make_durable(pending).map_err(CniError::from)).clone()
    }

    /// Why making it durable failed, if it was tried and did.
    fn failure(&self) -> Option<CniError> {
        self.done.get().and_then(|r| r.clone().err())
    }
}

/// One ADD's inputs, shared by its delegates' calls (from several threads in a parallel ADD).
struct Job<'j> {
    call: &'j RuntimeConf,
    delegates: &'j [Delegate],
    /// What each single-plugin delegate is sent, built once with the plan.
    stdins: &'j Stdins,
    key: &'j Key,
    durable: &'j DurablePlan<'j>,
    /// The process of the delegate whose turn is next, when it was started ahead: the first
    /// one's by [`Attacher::start_first`], and one after another each next one's while the
    /// one before it works ([`crate::ahead`]).
    ahead: &'j Ahead,
    /// Delegates run one after another: the next one's process is started ahead.
    one_by_one: bool,
}

/// The delegates whose ADD failed, in plan order: the first decides the code; in a parallel
/// ADD the `others` are named too.
struct Failures {
    first: (usize, CniError),
    others: Vec<(usize, CniError)>,
}

impl Attacher<'_> {
    /// ADD every delegate in order; on failure everything attempted is rolled back.
    pub fn add(
        &self,
        call: &RuntimeConf,
        delegates: &[Delegate],
        log: &mut Logger,
    ) -> Result<Vec<AnyResult>, CniError> {
        self.add_with_first(call, delegates, log, None)
    }

    /// The first delegate's process, started by `runner` before the ADD's locks, its plan and
    /// the plan's fsync — work that then overlaps the plugin's own start-up (a Go plugin spends
    /// about a millisecond before it reads its stdin) — to be handed to
    /// [`Attacher::add_with_first`], which sends it its configuration only where any delegate
    /// is sent one: once the plan and the process's record are durable. A process never sent
    /// it (the ADD refused on the way) is killed unsent; should the caller be killed first, the
    /// plugin reads an empty stdin and exits without acting. For a conflist delegate it is the
    /// list's first plugin (`braid-attach/src/ahead.rs`). `None` — the ADD then starts it in turn and
    /// reports what fails — unless the first delegate has a fixed interface name and its first
    /// plugin can be found and started now.
    pub fn start_first(&self, runner: &RawExec, call: &RuntimeConf, delegates: &[Delegate]) -> Option<Started> {
        if self.deadline.add_until().is_some_and(|u| Instant::now() >= u) {
            return None;
        }
        let d = delegates.first().filter(|d| !d.auto_ifname)?;
        let (path, inv) = self.first_add(call, d).ok()?;
        runner.start(&path, &inv.env()).ok()
    }

    /// The binary and the call of delegate `d`'s first process for ADD — a single plugin's, a
    /// conflist's first plugin's (the chain calls it with the same variables): what
    /// [`Attacher::start_first`] and [`Attacher::start_next`] start ahead is what its turn would
    /// start.
    fn first_add(&self, call: &RuntimeConf, d: &Delegate) -> Result<(PathBuf, Invocation), InvokeError> {
        let path = self.exec.find(d.plugin_type(), &self.paths)?;
        Ok((path, self.invocation(Command::Add, call, &d.ifname, &d.effective_args(call))))
    }

    /// [`Attacher::add`], with the first delegate's process perhaps already `first` started
    /// ([`cni_runtime::invoke::RawExec::start`]): it is sent its configuration when its turn
    /// comes, after the plan and its record are durable like any delegate's — if it runs the
    /// binary and has the CNI environment of the first delegate's call (the executor's own
    /// variables are the caller's to check: [`Started::started_like`]); otherwise, and when
    /// the ADD ends before its turn, it is killed unsent.
    pub fn add_with_first(
        &self,
        call: &RuntimeConf,
        delegates: &[Delegate],
        log: &mut Logger,
        first: Option<Started>,
    ) -> Result<Vec<AnyResult>, CniError> {
        let key = Self::key(call)?;
        let _lock = self.lock(call, self.deadline.add_until())?;
        // Checked under the lock: a second ADD of the same attachment must never replace the
        // first one's record (its rollback would then undo the first one's delegates).
        if self.store.read(&key)?.is_some() {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                format!(
                    "container {} is already attached on {} (state in {}): DEL it before adding it again",
                    call.container_id,
                    call.ifname,
                    self.store.dir().display()
                ),
            ));
        }
        let (state, stdins) = plan(call, delegates, self.parallel)?;
        let line = state.to_line();
        // Read back what is written: a plan that would not decode (a configuration nested
        // deeper than the JSON reader allows) could never be replayed by DEL.
        if Plan::decode(&line).is_none() {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                "the delegates' configuration cannot be recorded and read back (nested too deeply?)",
            ));
        }
        let durable =
            DurablePlan { store: &self.store, pending: self.store.create_pending(&key, &line)?, done: OnceLock::new() };
        if !self.exec.reports_spawns() {
            durable.ensure()?;
        }
        let ahead = Ahead::with(0, first);
        let job = Job {
            call,
            delegates,
            stdins: &stdins,
            key: &key,
            durable: &durable,
            ahead: &ahead,
            one_by_one: !state.parallel,
        };
        let results =
            if state.parallel { self.add_parallel(&job, state, log)? } else { self.add_sequential(&job, state, log)? };
        // Made durable by the first delegate's process; only an ADD that started none is left.
        durable.ensure()?;
        Ok(results)
    }

    /// Every delegate's ADD, one after another, until one fails.
    fn add_sequential(&self, job: &Job, mut state: Plan, log: &mut Logger) -> Result<Vec<AnyResult>, CniError> {
        let mut results = Vec::new();
        for i in 0..job.delegates.len() {
            match self.add_recorded(job, i) {
                Ok((result, value)) => {
                    state.attachments[i].result = Some(value);
                    state.attachments[i].phase = Phase::Added;
                    results.push(result);
                }
                Err((e, started)) => {
                    // The next delegate's turn will not come.
                    job.ahead.clear();
                    // The failed delegate gets a best-effort DEL (it may have half-attached),
                    // unless it never started; only failures of those that returned a result
                    // keep the state.
                    let attempted: Vec<bool> = (0..job.delegates.len()).map(|j| j < i || (j == i && started)).collect();
                    let failed = Failures { first: (i, e), others: Vec::new() };
                    return Err(self.roll_back(job.call, job.key, &state, &attempted, failed, log));
                }
            }
        }
        Ok(results)
    }

    /// ADD of delegate `i` with its result recorded. A result that cannot be recorded fails
    /// like the delegate itself: DEL could not replay what it does not know, so this delegate
    /// is rolled back with the others.
    fn add_recorded(&self, job: &Job, i: usize) -> Result<(AnyResult, Value), (CniError, bool)> {
        let result = self.add_one(job, i)?;
        let value = result.to_value();
        let record = Progress { index: i, phase: Phase::Added, result: value.clone(), process: None };
        self.store
            .append(job.key, &record.to_line())
            .map_err(|e| (CniError::new(IO_FAILURE, format!("its result could not be recorded: {e}")), true))?;
        Ok((result, value))
    }

    /// Every delegate's ADD at once; once all have returned, the results in plan order, or —
    /// when any failed — the rollback of every attempted one, as for a sequential ADD.
    fn add_parallel(&self, job: &Job, mut state: Plan, log: &mut Logger) -> Result<Vec<AnyResult>, CniError> {
        let indices: Vec<usize> = (0..job.delegates.len()).collect();
        let outcomes =
            each(Order::AllAtOnce, &indices, &|i| self.add_recorded(job, i), &|| Err((thread_panicked(), true)));
        let mut results = Vec::new();
        let mut attempted = Vec::new();
        let mut failures = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok((result, value)) => {
                    state.attachments[i].result = Some(value);
                    state.attachments[i].phase = Phase::Added;
                    results.push(result);
                    attempted.push(true);
                }
                Err((e, started)) => {
                    attempted.push(started);
                    failures.push((i, e));
                }
            }
        }
        let mut failures = failures.into_iter();
        match failures.next() {
            None => Ok(results),
            Some(first) => {
                let failed = Failures { first, others: failures.collect() };
                Err(self.roll_back(job.call, job.key, &state, &attempted, failed, log))
            }
        }
    }

    /// After the `failed` delegates: DEL every `attempted` delegate in reverse plan order (one
    /// by one, whatever the plan's order), remove the state once that succeeded, and return the
    /// error — the first failure's code, naming every failed delegate.
    fn roll_back(
        &self,
        call: &RuntimeConf,
        key: &Key,
        state: &Plan,
        attempted: &[bool],
        failed: Failures,
        log: &mut Logger,
    ) -> CniError {
        let Failures { first: (i, e), others } = failed;
        let rollback = self.del_recorded(call, state, attempted, Order::OneByOne, None, log);
        // A delegate cut off by the deadline (code 11 once the ADD part has passed) is named as
        // what the command was waiting for; one that failed by itself as failed.
        let cut_off = e.code == TRY_AGAIN_LATER && self.deadline.add_until().is_some_and(|u| Instant::now() >= u);
        let mut msg = if cut_off {
            self.deadline.passed(format_args!("{} ADD: {}", describe(i, &state.attachments[i]), e.msg)).msg
        } else {
            format!("{} failed: {}", describe(i, &state.attachments[i]), e.msg)
        };
        for (j, other) in &others {
            msg.push_str(&format!("; {} failed too: {}", describe(*j, &state.attachments[*j]), other.msg));
        }
        if rollback.is_empty() {
            if let Err(removed) = self.store.remove(key) {
                return removed.into();
            }
            if cut_off {
                msg.push_str("; every attempted delegate was rolled back");
            }
        } else {
            msg.push_str(&format!("; rollback incomplete, state kept for DEL: {}", rollback.join("; ")));
        }
        // A rollback the deadline cut short is code 11 whatever the ADD failed of: what is left
        // needs the runtime's DEL, which it sends for a failed ADD anyway.
        let rollback_cut = !rollback.is_empty() && self.deadline.until().is_some_and(|u| Instant::now() >= u);
        let code = if rollback_cut { TRY_AGAIN_LATER } else { e.code };
        let e = CniError { code, msg, details: e.details };
        log.error(&e);
        e
    }

    /// Starts delegate `i`'s first process ahead of its turn ([`crate::ahead`]), when it can be
    /// found; otherwise its turn starts (or fails to start) it.
    fn start_next(&self, job: &Job, i: usize) {
        let Some(d) = job.delegates.get(i) else { return };
        if let Ok((path, inv)) = self.first_add(job.call, d) {
            job.ahead.start(self.exec, i, &path, &inv.env(), self.deadline.add_until());
        }
    }

    /// Runs one delegate's ADD. The error says whether the delegate was started at all: one
    /// whose binary was not found or could not be executed did nothing, and needs no DEL.
    /// Every process it starts is recorded (pid and start time) before it is sent its
    /// configuration, so that a DEL after a crash can end it first. A single plugin is sent
    /// `stdin`, the bytes its plan recorded.
    fn add_one(&self, job: &Job, i: usize) -> Result<AnyResult, (CniError, bool)> {
        let Job { call, key, durable, .. } = *job;
        let d = &job.delegates[i];
        let stdin = job.stdins.get(i).and_then(|s| s.as_deref());
        let record = |pid: u32| {
            if durable.ensure().is_err() {
                // Not sent anything yet: it ends without having acted.
                if let Ok(pid) = i32::try_from(pid) {
                    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
                }
                return;
            }
            let Some(started) = cni_runtime::procs::RecordedProcess::of(pid) else { return };
            let process = Some(Process { pid, start: started.start });
            let line = Progress { index: i, phase: Phase::Running, result: Value::Null, process }.to_line();
            // Best effort: without the record a crash right now leaves what it always did.
            let _ = self.store.append(key, &line);
        };
        let bounded = Bounded { inner: self.exec, spawned: &record, until: self.deadline.add_until() };
        // Its first process: started ahead for exactly this call, or killed unsent and started
        // anew. One after another, this one's first, then the next delegate's, whose start-up
        // overlaps this one's work; it is sent its configuration in its turn.
        let first = self.first_add(call, d);
        let started = first.as_ref().ok().and_then(|(path, inv)| {
            let env = inv.env();
            if !job.one_by_one {
                return job.ahead.take(i, path, &env);
            }
            let started = job.ahead.take_or_start(self.exec, i, path, &env, self.deadline.add_until());
            self.start_next(job, i + 1);
            started
        });
        let exec = FirstStarted::new(&bounded, started);
        let outcome = match &d.config {
            DelegateConfig::Plugin(c) => {
                let built;
                let stdin = match stdin {
                    Some(s) => s,
                    None => {
                        built = plugin_stdin(c, &d.effective_capability_args(call), None);
                        &built
                    }
                };
                let (path, inv) = first.map_err(|e| (e.into(), false))?;
                invoke::add(&exec, &path, stdin, &inv).map_err(|e| {
                    use cni_runtime::InvokeError::{DeadlinePassed, Spawn};
                    let started = !matches!(e, Spawn { .. } | DeadlinePassed { started: false, .. });
                    (e.into(), started)
                })
            }
            DelegateConfig::List(l) => {
                let rt = RuntimeConf {
                    ifname: d.ifname.clone(),
                    args: d.effective_args(call),
                    capability_args: d.effective_capability_args(call),
                    ..call.clone()
                };
                // Some plugins of the list may have run: always worth a DEL. Its result is kept
                // in the state, not in a libcni cache of its own ([`crate::attach`]).
                self.chain_with(&exec).add_uncached(l, &rt).map_err(|e| (e.into(), true))
            }
        };
        // A plan that could not be made durable stopped the delegate before it was sent
        // anything: that is the failure, and the delegate needs no DEL.
        outcome.map_err(|(e, started)| durable.failure().map_or((e, started), |f| (f, false)))
    }
}

/// For an update ([`crate::update`]): the planned records of delegates added to a live plan,
/// and what each single-plugin one is sent.
pub(crate) fn added_stdins(
    call: &RuntimeConf,
    wanted: &[Delegate],
) -> Result<(Vec<crate::plan::Attachment>, Stdins), CniError> {
    wanted.iter().map(|d| d.planned(call)).unzip_results()
}

/// For an update: the ADD of `wanted`, appended to a durable plan from index `first`, one after
/// another, each exactly as an ADD runs a delegate (its process recorded, its result appended).
/// Their recorded results; or which one failed (counted from 0), why, and whether it started.
pub(crate) fn run_added(
    a: &Attacher,
    call: &RuntimeConf,
    key: &Key,
    wanted: &[Delegate],
    stdins: Stdins,
    first: usize,
) -> Result<Vec<Value>, (usize, CniError, bool)> {
    let mut delegates = vec![Delegate::default(); first];
    delegates.extend(wanted.iter().cloned());
    let mut all: Stdins = vec![None; first];
    all.extend(stdins);
    // The plan is durable already (the update wrote it with its fsyncs).
    let durable = DurablePlan { store: &a.store, pending: None, done: OnceLock::new() };
    let ahead = Ahead::with(0, None);
    let job =
        Job { call, delegates: &delegates, stdins: &all, key, durable: &durable, ahead: &ahead, one_by_one: false };
    let mut out = Vec::new();
    for k in 0..wanted.len() {
        match a.add_recorded(&job, first + k) {
            Ok((_, value)) => out.push(value),
            Err((e, started)) => return Err((k, e, started)),
        }
    }
    Ok(out)
}

/// Collects `(record, stdin)` pairs, stopping at the first error.
trait UnzipResults<A, B> {
    fn unzip_results(self) -> Result<(Vec<A>, Vec<B>), CniError>;
}

impl<A, B, I: Iterator<Item = Result<(A, B), CniError>>> UnzipResults<A, B> for I {
    fn unzip_results(self) -> Result<(Vec<A>, Vec<B>), CniError> {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for item in self {
            let (x, y) = item?;
            a.push(x);
            b.push(y);
        }
        Ok((a, b))
    }
}
