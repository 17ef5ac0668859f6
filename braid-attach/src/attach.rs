//! The attach engine shared by the delegator and the merger: run a list of delegates for one
//! container, crash-safely, and undo exactly what was done.
//!
//! * The plan — every delegate with the exact bytes it will be sent — is written durably
//!   (fsynced) as the first line of the state file *before* the first delegate runs; after each
//!   delegate a line with its result is appended. A crash at any point leaves a state file that
//!   names every delegate that may have done something; DEL of a planned delegate that never
//!   ran is harmless (DEL is idempotent). Appends are neither renamed nor fsynced: a power loss
//!   falls back to the durable plan (the format is [`crate::plan`]; why appends are not synced
//!   is measured in `docs/bench/NOTES.md`).
//! * If delegate *i* fails, delegates *i* … 0 get DEL in reverse (the failed one too: it may
//!   have half-attached), the state is removed once that succeeded, and the error keeps the
//!   delegate's code and names it (index, network, type, interface).
//! * DEL replays the state in reverse — what ADD sent, not today's configuration — attempting
//!   every delegate and reporting all failures together. Without a state file, or with a
//!   corrupt one, the configured delegates are deleted best-effort, so IPAM is released.
//! * One lock per container serialises ADD/DEL of that container.
//! * With `parallel` ([`Attacher::parallel`]) every delegate's ADD starts at once, each on a
//!   scoped thread of its own running the same path as a sequential one (its process recorded
//!   before it is sent its stdin, its result appended as it arrives — each record one
//!   `write(2)` with `O_APPEND`, so records from several threads stay whole lines). The results
//!   are returned in plan order, whatever order they arrived in. If any fails, the others are
//!   waited for, then every attempted one is deleted in reverse plan order, as above. The plan
//!   records that it was parallel: DEL and CHECK of it run the delegates at once too.

use crate::deadline::Deadline;
use crate::plan::{Attachment, Kind, Phase, Plan, Process, Progress};
use crate::state::{Key, StateStore, Wait};
use cni_runtime::chain::{build_one_config, Chain, RuntimeConf};
use cni_runtime::invoke::{self, Exec};
use cni_skel::log::Logger;
use cni_types::config::GcAttachment;
use cni_types::error::{
    DECODING_FAILURE, INTERNAL, INVALID_NETWORK_CONFIG, IO_FAILURE, TRY_AGAIN_LATER, UNKNOWN_CONTAINER,
};
use cni_types::result::AnyResult;
use cni_types::version::{self, Command};
use cni_types::{CniError, Context as _, Invocation, NetConf, NetConfList};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Instant;

/// A delegate's configuration: one plugin, or a conflist run with libcni semantics.
#[derive(Debug, Clone, PartialEq)]
pub enum DelegateConfig {
    /// A single plugin configuration.
    Plugin(NetConf),
    /// A conflist.
    List(NetConfList),
}

impl Default for DelegateConfig {
    fn default() -> Self {
        DelegateConfig::Plugin(NetConf::default())
    }
}

/// One delegate to attach.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Delegate {
    /// What to run.
    pub config: DelegateConfig,
    /// The interface name it gets (`CNI_IFNAME` of its call).
    pub ifname: String,
    /// Whether the name is braid's to choose: the first `net<N>` free in the pod namespace at
    /// ADD (see [`crate::ifnames`]); `ifname` is then only the guess used by a DEL that has no
    /// state to read the chosen name from.
    pub auto_ifname: bool,
    /// This attachment's own runtime requests (`mac`, `ips`, …), laid over the call's
    /// `runtimeConfig` before filtering by the delegate's capabilities.
    pub runtime_config: Map<String, Value>,
    /// Extra `CNI_ARGS` pairs for this attachment, appended to the call's (later pairs win,
    /// as in Go's `LoadArgs`).
    pub args: Option<String>,
    /// Whether this attachment is offered only its own `runtime_config`, none of the call's
    /// `runtimeConfig`: a network a Kubernetes pod selected gets only its selection element's
    /// requests, the runtime's (portMappings, bandwidth, …) belong to the cluster network
    /// (NPWG §7.5).
    pub own_runtime_config_only: bool,
}

impl Delegate {
    /// The `CNI_ARGS` this delegate is called with: the call's, its own pairs after them,
    /// and `IgnoreUnknown=1` first unless already set (see [`ignore_unknown`]).
    pub fn effective_args(&self, call: &RuntimeConf) -> String {
        let args = match (&self.args, call.args.is_empty()) {
            (None, _) => call.args.clone(),
            (Some(extra), true) => extra.clone(),
            (Some(extra), false) => format!("{};{extra}", call.args),
        };
        ignore_unknown(&args)
    }

    /// The runtime arguments offered to this delegate: the call's (unless
    /// [`own_runtime_config_only`](Self::own_runtime_config_only)), with its own laid over.
    pub fn effective_capability_args(&self, call: &RuntimeConf) -> Map<String, Value> {
        let mut m = if self.own_runtime_config_only { Map::new() } else { call.capability_args.clone() };
        m.extend(self.runtime_config.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    }

    /// The network name, for messages.
    pub fn name(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.name(),
            DelegateConfig::List(l) => &l.name,
        }
    }

    /// The plugin type (a list names its first plugin's), for messages.
    pub fn plugin_type(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.plugin_type(),
            DelegateConfig::List(l) => l.plugins.first().map_or("", |p| p.plugin_type()),
        }
    }

    /// The version it speaks.
    pub fn version(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.version(),
            DelegateConfig::List(l) => &l.cni_version,
        }
    }

    /// Its planned record: what it will be sent, with which args and runtime arguments.
    fn planned(&self, call: &RuntimeConf) -> Result<Attachment, CniError> {
        let caps = self.effective_capability_args(call);
        let config = match &self.config {
            DelegateConfig::Plugin(c) => serde_json::from_slice(&plugin_stdin(c, &caps, None)),
            DelegateConfig::List(l) => serde_json::from_slice(&l.bytes),
        };
        // Read back everything that is recorded: what would not decode (a configuration nested
        // deeper than the JSON reader allows) could never be replayed by DEL.
        let config: Value = config.map_err(|e| {
            CniError::new(
                INVALID_NETWORK_CONFIG,
                format!("network {:?}: its configuration cannot be recorded and read back: {e}", self.name()),
            )
        })?;
        Ok(Attachment {
            name: self.name().to_string(),
            plugin_type: self.plugin_type().to_string(),
            ifname: self.ifname.clone(),
            cni_version: self.version().to_string(),
            list: matches!(self.config, DelegateConfig::List(_)),
            config,
            args: Some(self.effective_args(call)),
            capability_args: Some(caps),
            result: None,
            phase: Phase::Planned,
            process: None,
        })
    }
}

/// `args` with `IgnoreUnknown=1` in front unless a pair already sets it true (`1` or `true`,
/// any case, as Go's `UnmarshallableBool`). Without it, plugins built on Go's `types.LoadArgs`
/// refuse every key they do not know (`K8S_POD_NAME` from a runtime that did not add it) — and
/// a DEL replaying such args would fail forever. Multus adds it for its delegates too.
pub fn ignore_unknown(args: &str) -> String {
    let set = cni_types::args::pairs(args).any(|(k, v)| k == "IgnoreUnknown" && cni_types::args::is_true(v));
    match (set, args.is_empty()) {
        (true, _) => args.to_string(),
        (false, true) => "IgnoreUnknown=1".to_string(),
        (false, false) => format!("IgnoreUnknown=1;{args}"),
    }
}

/// An [`Exec`] that kills what it starts at `until` at the latest (the command's deadline, or
/// its ADD part) and reports every process it starts to `spawned`: whatever runs a delegate —
/// one plugin, or a conflist through [`Chain`] — runs it through this.
struct Bounded<'a> {
    inner: &'a dyn Exec,
    spawned: &'a dyn Fn(u32),
    until: Option<Instant>,
}

impl Exec for Bounded<'_> {
    fn exec(
        &self,
        plugin: &std::path::Path,
        stdin: &[u8],
        env: &[(String, String)],
    ) -> Result<Vec<u8>, cni_runtime::InvokeError> {
        self.inner.exec_until(plugin, stdin, env, self.spawned, self.until)
    }
    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, cni_runtime::InvokeError> {
        self.inner.find(name, paths)
    }
}

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

/// The state of a plan: every delegate with the exact configuration it is (to be) sent.
fn plan(call: &RuntimeConf, delegates: &[Delegate], parallel: bool) -> Result<Plan, CniError> {
    let attachments = delegates.iter().map(|d| d.planned(call)).collect::<Result<_, _>>()?;
    Ok(Plan { kind: Kind::V1, netns: call.netns.clone(), attachments, parallel })
}

/// Runs `f` for every index of `indices`: one after another in that order, or with `parallel`
/// all at once, a scoped thread each (a thread that cannot be created runs its `f` on the
/// calling thread once the others are started). The outcomes come back in the order of
/// `indices`; `None` for one whose thread panicked.
fn each<T: Send>(parallel: bool, indices: &[usize], f: &(dyn Fn(usize) -> T + Sync)) -> Vec<Option<T>> {
    if !parallel || indices.len() < 2 {
        return indices.iter().map(|&i| Some(f(i))).collect();
    }
    std::thread::scope(|s| {
        let started: Vec<_> = indices
            .iter()
            .map(|&i| (i, std::thread::Builder::new().name(format!("delegate-{i}")).spawn_scoped(s, move || f(i)).ok()))
            .collect();
        started
            .into_iter()
            .map(|(i, thread)| match thread {
                Some(t) => t.join().ok(),
                None => Some(f(i)),
            })
            .collect()
    })
}

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

/// `delegate 1 (network "p2p", type "ptp", interface net1)`: how errors and logs name one.
fn describe(i: usize, a: &Attachment) -> String {
    format!("delegate {i} (network {:?}, type {:?}, interface {})", a.name, a.plugin_type, a.ifname)
}

/// The bytes a single-plugin delegate is sent (libcni's request building).
fn plugin_stdin(conf: &NetConf, caps: &Map<String, Value>, prev: Option<&AnyResult>) -> Vec<u8> {
    build_one_config(conf, conf.name(), conf.version(), prev, caps)
}

impl Attacher<'_> {
    /// A conflist run with `exec` (a [`Bounded`] one).
    fn chain_with<'e>(&self, exec: &'e dyn Exec) -> Chain<'e> {
        Chain { exec, paths: self.paths.clone(), cache_dir: self.store.dir().join("cache") }
    }

    /// The exec of every call that must end by the command's deadline.
    fn until_end(&self) -> Bounded<'_> {
        Bounded { inner: self.exec, spawned: &|_| {}, until: self.deadline.until() }
    }

    fn invocation(&self, command: Command, call: &RuntimeConf, ifname: &str, args: &str) -> Invocation {
        let rt = RuntimeConf { ifname: ifname.to_string(), args: args.to_string(), ..call.clone() };
        rt.invocation(command, &cni_types::invocation::join_path(&self.paths))
    }

    fn key(call: &RuntimeConf) -> Result<Key, CniError> {
        Key::new(&call.container_id, &call.ifname)
    }

    /// The container's lock, waited for until `until` (code 11 then, naming the holder). Inside
    /// another braid plugin ([`crate::meta::depth`] > 0) a held lock is refused at once: the
    /// holder may be the enclosing plugin itself, waiting for us (a delegate that refers back,
    /// directly or through a conflist, to a network with the same `stateDir`) — waiting would
    /// only end at the deadline.
    fn lock(&self, call: &RuntimeConf, until: Option<Instant>) -> Result<crate::state::ContainerLock, CniError> {
        let nested = crate::meta::depth() > 0;
        let wait = if nested { Wait::No } else { Wait::Until(until) };
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
                cni_types::error::INVALID_NETWORK_CONFIG,
                format!(
                    "the state of container {} in {} is locked by an enclosing braid plugin: a delegate refers back to a network that uses the same stateDir",
                    call.container_id,
                    self.store.dir().display()
                ),
            )
        })
    }

    /// Runs one delegate's ADD. The error says whether the delegate was started at all: one
    /// whose binary was not found or could not be executed did nothing, and needs no DEL.
    /// Every process it starts is recorded (pid and start time) before it is sent its
    /// configuration, so that a DEL after a crash can end it first.
    fn add_one(&self, call: &RuntimeConf, d: &Delegate, key: &Key, i: usize) -> Result<AnyResult, (CniError, bool)> {
        let record = |pid: u32| {
            let Some(started) = cni_runtime::procs::Started::of(pid) else { return };
            let process = Some(Process { pid, start: started.start });
            let line = Progress { index: i, phase: Phase::Running, result: Value::Null, process }.to_line();
            // Best effort: without the record a crash right now leaves what it always did.
            let _ = self.store.append(key, &line);
        };
        let exec = Bounded { inner: self.exec, spawned: &record, until: self.deadline.add_until() };
        let args = d.effective_args(call);
        match &d.config {
            DelegateConfig::Plugin(c) => {
                let stdin = plugin_stdin(c, &d.effective_capability_args(call), None);
                let inv = self.invocation(Command::Add, call, &d.ifname, &args);
                let path = self.exec.find(c.plugin_type(), &self.paths).map_err(|e| (e.into(), false))?;
                invoke::add(&exec, &path, &stdin, &inv).map_err(|e| {
                    use cni_runtime::InvokeError::{DeadlinePassed, Spawn};
                    let started = !matches!(e, Spawn { .. } | DeadlinePassed { started: false, .. });
                    (e.into(), started)
                })
            }
            DelegateConfig::List(l) => {
                let rt = RuntimeConf {
                    ifname: d.ifname.clone(),
                    args,
                    capability_args: d.effective_capability_args(call),
                    ..call.clone()
                };
                // Some plugins of the list may have run: always worth a DEL.
                let chain = Chain { exec: &exec, paths: self.paths.clone(), cache_dir: self.store.dir().join("cache") };
                chain.add(l, &rt).map_err(|e| (e.into(), true))
            }
        }
    }

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
    fn end_leftovers(&self, state: &Plan, log: &mut Logger) -> Result<(), CniError> {
        for (i, a) in state.attachments.iter().enumerate() {
            let Some(p) = a.process.filter(|_| a.phase == Phase::Running) else { continue };
            let leftover = cni_runtime::procs::Started { pid: p.pid, start: p.start };
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

    /// ADD every delegate in order; on failure everything attempted is rolled back.
    pub fn add(
        &self,
        call: &RuntimeConf,
        delegates: &[Delegate],
        log: &mut Logger,
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
        let mut state = plan(call, delegates, self.parallel)?;
        let line = state.to_line();
        // Read back what is written: a plan that would not decode (a configuration nested
        // deeper than the JSON reader allows) could never be replayed by DEL.
        if Plan::decode(&line).is_none() {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                "the delegates' configuration cannot be recorded and read back (nested too deeply?)",
            ));
        }
        self.store.create(&key, &line)?;
        if state.parallel {
            return self.add_parallel(call, delegates, &key, state, log);
        }
        let mut results = Vec::new();
        for (i, d) in delegates.iter().enumerate() {
            match self.add_recorded(call, d, &key, i) {
                Ok((result, value)) => {
                    state.attachments[i].result = Some(value);
                    state.attachments[i].phase = Phase::Added;
                    results.push(result);
                }
                Err((e, started)) => {
                    // The failed delegate gets a best-effort DEL (it may have half-attached),
                    // unless it never started; only failures of those that returned a result
                    // keep the state.
                    let attempted: Vec<bool> = (0..delegates.len()).map(|j| j < i || (j == i && started)).collect();
                    return Err(self.roll_back(call, &key, &state, &attempted, (i, e), Vec::new(), log));
                }
            }
        }
        Ok(results)
    }

    /// ADD of delegate `i` with its result recorded. A result that cannot be recorded fails
    /// like the delegate itself: DEL could not replay what it does not know, so this delegate
    /// is rolled back with the others.
    fn add_recorded(
        &self,
        call: &RuntimeConf,
        d: &Delegate,
        key: &Key,
        i: usize,
    ) -> Result<(AnyResult, Value), (CniError, bool)> {
        let result = self.add_one(call, d, key, i)?;
        let value = result.to_value();
        let record = Progress { index: i, phase: Phase::Added, result: value.clone(), process: None };
        self.store
            .append(key, &record.to_line())
            .map_err(|e| (CniError::new(IO_FAILURE, format!("its result could not be recorded: {e}")), true))?;
        Ok((result, value))
    }

    /// Every delegate's ADD at once; once all have returned, the results in plan order, or —
    /// when any failed — the rollback of every attempted one, as for a sequential ADD.
    fn add_parallel(
        &self,
        call: &RuntimeConf,
        delegates: &[Delegate],
        key: &Key,
        mut state: Plan,
        log: &mut Logger,
    ) -> Result<Vec<AnyResult>, CniError> {
        let indices: Vec<usize> = (0..delegates.len()).collect();
        let outcomes = each(true, &indices, &|i| self.add_recorded(call, &delegates[i], key, i));
        let mut results = Vec::new();
        let mut attempted = Vec::new();
        let mut failures = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let outcome = outcome.unwrap_or_else(|| Err((CniError::new(INTERNAL, "its thread panicked"), true)));
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
            Some(first) => Err(self.roll_back(call, key, &state, &attempted, first, failures.collect(), log)),
        }
    }

    /// After delegate `first.0` failed (and, in a parallel ADD, the `others` too): DEL every
    /// `attempted` delegate in reverse plan order, remove the state once that succeeded, and
    /// return the error — the first failure's code, naming every failed delegate.
    #[allow(clippy::too_many_arguments)]
    fn roll_back(
        &self,
        call: &RuntimeConf,
        key: &Key,
        state: &Plan,
        attempted: &[bool],
        first: (usize, CniError),
        others: Vec<(usize, CniError)>,
        log: &mut Logger,
    ) -> CniError {
        let (i, e) = first;
        let rollback = self.del_recorded(call, state, attempted, false, log);
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

    /// Sends DEL or CHECK to one recorded attachment: what ADD sent, with its recorded result
    /// as `prevResult` where its version has one (0.4.0 and later), with its recorded args.
    fn replay(&self, command: Command, call: &RuntimeConf, a: &Attachment) -> Result<(), CniError> {
        // States written before IgnoreUnknown was added get it on replay too.
        let args = ignore_unknown(a.args.as_deref().unwrap_or(&call.args));
        if a.list {
            let bytes = serde_json::to_vec(&a.config).unwrap_or_default();
            let list = NetConfList::parse(&bytes).code(DECODING_FAILURE)?;
            let caps = a.capability_args.clone().unwrap_or_else(|| call.capability_args.clone());
            let rt = RuntimeConf { ifname: a.ifname.clone(), args, capability_args: caps, ..call.clone() };
            let exec = self.until_end();
            let chain = self.chain_with(&exec);
            return Ok(if command == Command::Check { chain.check(&list, &rt) } else { chain.del(&list, &rt) }?);
        }
        let mut conf = a.config.clone();
        let has_prev = version::greater_than_or_equal_to(&a.cni_version, "0.4.0").unwrap_or(false);
        if let (true, Some(result), Value::Object(map)) = (has_prev, &a.result, &mut conf) {
            map.insert("prevResult".into(), result.clone());
        }
        let stdin = serde_json::to_vec(&conf).unwrap_or_default();
        let inv = self.invocation(command, call, &a.ifname, &args);
        let path = self.exec.find(&a.plugin_type, &self.paths)?;
        Ok(invoke::exec_without_result(&self.until_end(), &path, &stdin, &inv)?)
    }

    /// DEL the first `count` attachments of a recorded plan, last first; returns the failures
    /// that must keep the state. A delegate that returned a result keeps it until its DEL
    /// succeeds; one that never finished its ADD (failed, or cut off by a crash) gets a
    /// best-effort DEL whose failure is logged: otherwise a delegate whose DEL fails as its ADD
    /// did (a typo'd type, a vanished macvlan master) would make every later DEL of the pod
    /// fail, and the runtime could never finish its teardown.
    fn del_recorded(
        &self,
        call: &RuntimeConf,
        state: &Plan,
        attempted: &[bool],
        parallel: bool,
        log: &mut Logger,
    ) -> Vec<String> {
        let indices: Vec<usize> =
            (0..state.attachments.len()).rev().filter(|&i| attempted.get(i).copied().unwrap_or(false)).collect();
        let outcomes = each(parallel, &indices, &|i| self.replay(Command::Del, call, &state.attachments[i]));
        let mut errors = Vec::new();
        for (&i, outcome) in indices.iter().zip(outcomes) {
            let a = &state.attachments[i];
            let outcome = outcome.unwrap_or_else(|| Err(CniError::new(INTERNAL, "its thread panicked")));
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
        let outcomes = each(state.parallel, &indices, &|i| self.replay(Command::Del, call, &state.attachments[i]));
        let mut errors = Vec::new();
        for (&i, outcome) in indices.iter().zip(outcomes) {
            let outcome = outcome.unwrap_or_else(|| Err(CniError::new(INTERNAL, "its thread panicked")));
            if let Err(e) = outcome {
                errors.push(format!("{}: {}", describe(i, &state.attachments[i]), e.msg));
            }
        }
        errors
    }

    /// Why one of the binaries an attachment needs cannot be found, if so.
    fn missing_binary(&self, a: &Attachment) -> Option<String> {
        let types: Vec<String> = if a.list {
            let plugins = a.config.get("plugins").and_then(Value::as_array).cloned().unwrap_or_default();
            plugins.iter().map(|p| p.get("type").and_then(Value::as_str).unwrap_or_default().to_string()).collect()
        } else {
            vec![a.plugin_type.clone()]
        };
        types.iter().find_map(|t| self.exec.find(t, &self.paths).err().map(|e| e.to_string()))
    }

    /// DEL from the state (or, without a usable one, from `configured`), every delegate tried.
    pub fn del(&self, call: &RuntimeConf, configured: &[Delegate], log: &mut Logger) -> Result<(), CniError> {
        self.del_with(call, configured, None, log)
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
        self.del_with(call, configured, Some(why), log)
    }

    fn del_with(
        &self,
        call: &RuntimeConf,
        configured: &[Delegate],
        unusable_dir: Option<&CniError>,
        log: &mut Logger,
    ) -> Result<(), CniError> {
        let key = Self::key(call)?;
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
            Err(e) if crate::meta::depth() > 0 && e.code == INVALID_NETWORK_CONFIG => {
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
                self.del_recorded(call, &state, &vec![true; n], state.parallel, log)
            }
            None => {
                let state = plan(call, configured, self.parallel)?;
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
        // released.
        self.store.remove(&key).map_err(|e| {
            let e = CniError::new(IO_FAILURE, format!("the delegates were deleted, but {e}"));
            log.error(&e);
            e
        })
    }

    /// CHECK every recorded delegate with its own result as prevResult; delegates below 0.4.0
    /// are skipped (logged at info). Errors name the delegate.
    pub fn check(&self, call: &RuntimeConf, log: &mut Logger) -> Result<(), CniError> {
        let key = Self::key(call)?;
        let Some(bytes) = self.store.read(&key)? else {
            return Err(CniError::new(
                UNKNOWN_CONTAINER,
                format!("no attachment state for {}@{}: was ADD run?", call.container_id, call.ifname),
            ));
        };
        let state = Plan::decode(&bytes).ok_or_else(|| {
            CniError::new(
                DECODING_FAILURE,
                format!("corrupt attachment state for {}@{} ({} bytes)", call.container_id, call.ifname, bytes.len()),
            )
        })?;
        let mut indices = Vec::new();
        for (i, a) in state.attachments.iter().enumerate() {
            if version::greater_than_or_equal_to(&a.cni_version, "0.4.0").unwrap_or(false) {
                indices.push(i);
            } else {
                log.info(format_args!("{} speaks {}: CHECK skipped", describe(i, a), a.cni_version));
            }
        }
        if !state.parallel {
            for &i in &indices {
                let a = &state.attachments[i];
                self.replay(Command::Check, call, a)
                    .map_err(|e| e.context(format_args!("{} CHECK failed", describe(i, a))))?;
            }
            return Ok(());
        }
        // All at once; the first failure in plan order is the answer.
        let outcomes = each(true, &indices, &|i| self.replay(Command::Check, call, &state.attachments[i]));
        for (&i, outcome) in indices.iter().zip(outcomes) {
            let outcome = outcome.unwrap_or_else(|| Err(CniError::new(INTERNAL, "its thread panicked")));
            outcome.map_err(|e| e.context(format_args!("{} CHECK failed", describe(i, &state.attachments[i]))))?;
        }
        Ok(())
    }

    /// DEL one stale attachment from its recorded state, then drop the state — as libcni's GC
    /// does for its cache (`libcni/api.go`, `GCNetworkList`): dropping the record alone would
    /// leave its links and IP reservations with nothing left that knows them.
    fn gc_stale(&self, key: &Key, log: &mut Logger) -> Result<(), CniError> {
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
            let errors = self.del_recorded(&call, &state, &vec![true; state.attachments.len()], false, log);
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

    /// GC: DEL every recorded attachment not in `valid` from its state and drop the state, then
    /// forward the valid attachments to every delegate (of 1.1.0 or later). Everything is
    /// tried; failures are reported together.
    pub fn gc(&self, delegates: &[Delegate], valid: &[GcAttachment], log: &mut Logger) -> Result<(), CniError> {
        let mut errors = Vec::new();
        for key in self.store.keys()? {
            if !valid.iter().any(|a| a.container_id == key.container_id() && a.ifname == key.ifname()) {
                if let Err(e) = self.gc_stale(&key, log) {
                    errors.push(e.msg);
                }
            }
        }
        let attachments: Value =
            valid.iter().map(|a| json!({"containerID": a.container_id, "ifname": a.ifname})).collect();
        let call = RuntimeConf::default();
        for (i, d) in delegates.iter().enumerate() {
            let result = match &d.config {
                // As libcni does for lists: GC does not exist below 1.1.0.
                DelegateConfig::Plugin(c) if !Command::Gc.allowed_in(c.version()).unwrap_or(false) => Ok(()),
                DelegateConfig::Plugin(c) => {
                    let mut conf = c.clone();
                    conf.set(cni_types::config::GC_VALID_ATTACHMENTS, attachments.clone());
                    conf.set(cni_types::config::GC_ATTACHMENTS_LEGACY, attachments.clone());
                    let inv = self.invocation(Command::Gc, &call, "", &ignore_unknown(""));
                    self.exec
                        .find(c.plugin_type(), &self.paths)
                        .and_then(|p| invoke::exec_without_result(&self.until_end(), &p, &conf.to_bytes(), &inv))
                        .map_err(|e| e.to_string())
                }
                DelegateConfig::List(l) => self.chain_with(&self.until_end()).gc(l, Some(valid)).map_err(|e| e.msg),
            };
            if let Err(e) = result {
                errors.push(format!("delegate {i} (network {:?}): {e}", d.name()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(CniError::new(INTERNAL, format!("GC failed: {}", errors.join("; "))))
        }
    }
}
