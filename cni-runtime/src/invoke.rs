//! Running other plugins: finding them in `CNI_PATH`, executing them with an explicit CNI
//! environment, and decoding what they print — the Go library's `pkg/invoke`, with a timeout
//! that kills the child and everything it spawned, and the child's stderr always forwarded.

use cni_types::error::{INTERNAL, TRY_AGAIN_LATER};
use cni_types::result::AnyResult;
use cni_types::{CniError, Invocation};
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A failure to run a plugin, worded as the Go library words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// `no plugin name provided`
    #[error("no plugin name provided")]
    NoName,
    /// `invalid plugin name: <name>` (it contains a path separator).
    #[error("invalid plugin name: {0}")]
    InvalidName(String),
    /// `no paths provided`
    #[error("no paths provided")]
    NoPaths,
    /// `failed to find plugin "<name>" in path [<dirs>]`
    #[error("failed to find plugin {name:?} in path [{}]", joined(.paths))]
    NotFound {
        /// The plugin type.
        name: String,
        /// The directories searched.
        paths: Vec<PathBuf>,
    },
    /// The binary could not be started.
    #[error("cannot execute {}: {reason}", .path.display())]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why (the system's error, as text: the error stays comparable and cloneable).
        reason: String,
    },
    /// The plugin ran longer than allowed and was killed with everything it spawned.
    #[error("{} timed out after {}", .path.display(), humanize(*.after))]
    TimedOut {
        /// The binary.
        path: PathBuf,
        /// The limit.
        after: Duration,
    },
    /// The caller's deadline passed: the plugin was killed with everything it spawned (or, when
    /// it had already passed, never started). Code 11, "try again later".
    #[error("{}", deadline_passed(.path, *.started))]
    DeadlinePassed {
        /// The binary.
        path: PathBuf,
        /// Whether it had been started.
        started: bool,
    },
    /// The plugin was started and sent its stdin, then our side of its pipes failed (our
    /// `poll(2)`, `fcntl(2)` or `waitpid(2)`, not the plugin): it was killed with everything it
    /// spawned. It may have acted, so it counts as started — a meta-plugin rolls it back.
    #[error("{} was killed: serving its pipes failed on our side: {reason}", .path.display())]
    PipesFailed {
        /// The binary.
        path: PathBuf,
        /// Why (the system's error, as text).
        reason: String,
    },
    /// The plugin failed with a CNI error object; its code is kept.
    #[error(transparent)]
    Plugin(CniError),
    /// The plugin failed without a usable error object (Go's `netplugin failed …` texts).
    #[error("{0}")]
    Failed(String),
    /// The plugin succeeded but its result could not be decoded (Go's `failed to unmarshal
    /// raw result: …`).
    #[error("failed to unmarshal raw result: {0}")]
    BadResult(#[source] OutputError),
    /// The plugin's VERSION answer could not be decoded (in `VersionInfo::decode`'s words).
    #[error("{0}")]
    BadVersionInfo(String),
}

/// Why a plugin's output on success is not a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// Not JSON as Go reads it.
    #[error(transparent)]
    Syntax(#[from] cni_types::gojson::SyntaxError),
    /// JSON, but not a result of its version.
    #[error(transparent)]
    Result(#[from] cni_types::result::CreateError),
}

/// The directories of [`InvokeError::NotFound`], as Go prints a slice.
fn joined(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
}

/// The text of [`InvokeError::DeadlinePassed`].
fn deadline_passed(path: &Path, started: bool) -> String {
    if started {
        format!("{} was killed at the command's deadline", path.display())
    } else {
        format!("{} was not started: the command's deadline had passed", path.display())
    }
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

impl From<InvokeError> for CniError {
    /// A child's typed error keeps its code; a passed deadline is code 11 (`TRY_AGAIN_LATER`:
    /// the runtime may retry once the node is less busy); everything else is code 999, as in
    /// Go (`invoke.ExecPluginWithResult` returns plain errors), with the text above.
    fn from(e: InvokeError) -> CniError {
        match e {
            InvokeError::Plugin(e) => e,
            e @ InvokeError::DeadlinePassed { .. } => CniError::new(TRY_AGAIN_LATER, e.to_string()),
            other => CniError::new(INTERNAL, other.to_string()),
        }
    }
}

/// Go's `FindInPath`: the first regular file `dir/name` in order (symlinks followed, the exec
/// bit not checked).
pub fn find_in_path(name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
    if name.is_empty() {
        return Err(InvokeError::NoName);
    }
    if name.contains('/') {
        return Err(InvokeError::InvalidName(name.to_string()));
    }
    if paths.is_empty() {
        return Err(InvokeError::NoPaths);
    }
    for dir in paths {
        let candidate = dir.join(name);
        if std::fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
            return Ok(candidate);
        }
    }
    Err(InvokeError::NotFound { name: name.to_string(), paths: paths.to_vec() })
}

/// The variables a call adds to the process environment: its CNI ones, and any other.
pub type Env = [(String, String)];

/// How a caller watches a plugin process it has an [`Exec`] start.
#[derive(Clone, Copy)]
pub struct Watch<'a> {
    /// Told each child's pid (also its process group) once it exists and before it is sent its
    /// stdin — a plugin acts only after reading its configuration, so a caller that records the
    /// pid there can always find what it started, even if it is killed right after.
    pub spawned: &'a dyn Fn(u32),
    /// The caller's deadline for its whole command: the child is killed there (with everything
    /// it spawned) at the latest, on top of any per-call limit, failing with
    /// [`InvokeError::DeadlinePassed`]; `None` adds no limit.
    pub until: Option<Instant>,
}

impl Watch<'static> {
    /// Nobody is told of a pid; no deadline.
    pub const NONE: Watch<'static> = Watch { spawned: &ignore_pid, until: None };
}

fn ignore_pid(_: u32) {}

/// How a plugin binary is run: the real implementation is [`RawExec`]; tests use a fake.
pub trait Exec {
    /// Runs `plugin` with `stdin` and the process environment plus `env`, and returns its
    /// stdout on success.
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &Env) -> Result<Vec<u8>, InvokeError>;

    /// [`Exec::exec`], the process watched as `watch` says: its pid reported, killed at the
    /// deadline. The default only refuses to start once the deadline has passed (it reports
    /// no pid and kills nothing).
    fn exec_until(&self, plugin: &Path, stdin: &[u8], env: &Env, watch: Watch<'_>) -> Result<Vec<u8>, InvokeError> {
        before(plugin, watch.until)?;
        self.exec(plugin, stdin, env)
    }

    /// Finds a plugin binary; the default is [`find_in_path`].
    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        find_in_path(name, paths)
    }

    /// Whether [`Exec::exec_until`] tells its watcher of every process it starts, before it is
    /// sent its stdin. A caller may then defer work that must precede the plugin's acting
    /// (braid's engine makes its plan durable there) until the process exists. The default
    /// says no; [`RawExec`] says yes.
    fn reports_spawns(&self) -> bool {
        false
    }

    /// Starts `plugin` with `env` and leaves it waiting for its stdin ([`RawExec::start`]), so
    /// that its own start-up (a Go runtime's: about a millisecond before it reads its stdin)
    /// overlaps the caller's work until [`Started::finish`] sends it its configuration. `None`
    /// when this executor cannot start a process ahead (the default) or the start failed: the
    /// caller then runs the plugin with [`Exec::exec_until`] in its turn, which retries a busy
    /// binary or reports what failed.
    fn start_ahead(&self, _plugin: &Path, _env: &Env) -> Option<Started> {
        None
    }
}

/// Refuses to start `plugin` once `until` has passed: [`InvokeError::DeadlinePassed`], not
/// started — it did nothing.
fn before(plugin: &Path, until: Option<Instant>) -> Result<(), InvokeError> {
    match until {
        Some(u) if Instant::now() >= u => {
            Err(InvokeError::DeadlinePassed { path: plugin.to_path_buf(), started: false })
        }
        _ => Ok(()),
    }
}

/// Executes plugins as child processes.
#[derive(Debug, Clone, Default)]
pub struct RawExec {
    /// Kill the child (and its process group) after this long; `None` waits forever. A deadline
    /// given to [`Exec::exec_until`] that comes first wins. For a child [started
    /// ahead](RawExec::start), counted from [`Started::finish`]: from when it is sent its stdin.
    pub timeout: Option<Duration>,
    /// Variables every child gets besides its CNI ones (a meta-plugin tells its delegates what
    /// it holds: see `braid-attach`'s `ifnames`).
    pub env: Vec<(String, String)>,
}

fn status_text(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(9)) => "signal: killed".to_string(),
        (None, Some(s)) => format!("signal: {s}"),
        _ => "unknown exit".to_string(),
    }
}

impl Exec for RawExec {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &Env) -> Result<Vec<u8>, InvokeError> {
        self.exec_until(plugin, stdin, env, Watch::NONE)
    }

    fn reports_spawns(&self) -> bool {
        true
    }

    fn start_ahead(&self, plugin: &Path, env: &Env) -> Option<Started> {
        self.start(plugin, env).ok()
    }

    fn exec_until(&self, plugin: &Path, stdin: &[u8], env: &Env, watch: Watch<'_>) -> Result<Vec<u8>, InvokeError> {
        let until = watch.until;
        before(plugin, until)?;
        let mut attempt = 0;
        let started = loop {
            match self.start(plugin, env) {
                Ok(c) => break c,
                // The retry's sleep draws on the deadline like everything else.
                Err(StartError::Busy(_)) if attempt < 5 => {
                    attempt += 1;
                    let nap = Duration::from_secs(1);
                    if until.is_some_and(|u| Instant::now() + nap >= u) {
                        return Err(InvokeError::DeadlinePassed { path: plugin.to_path_buf(), started: false });
                    }
                    std::thread::sleep(nap);
                }
                Err(StartError::Busy(e) | StartError::Other(e)) => return Err(e),
            }
        };
        started.finish(stdin, watch)
    }
}

/// Why [`RawExec::start`] could not start a plugin.
#[derive(Debug)]
pub enum StartError {
    /// `ETXTBSY`: the binary is still open for writing (being installed); worth another try, as
    /// Go's `pkg/invoke` does.
    Busy(InvokeError),
    /// Anything else ([`InvokeError::Spawn`]).
    Other(InvokeError),
}

impl RawExec {
    /// Starts `plugin` with the process environment plus this executor's and `env`, and leaves
    /// it waiting for its stdin: a plugin reads its whole configuration before it acts, so
    /// until [`Started::finish`] sends it, the process has done nothing. A caller with work to
    /// do before a plugin may act (braid's engine: its locks, its plan made durable) can start
    /// the plugin first, and the plugin's own start-up (a Go runtime's) overlaps that work.
    /// No retry here: [`Exec::exec_until`] retries a [`StartError::Busy`] binary.
    pub fn start(&self, plugin: &Path, env: &Env) -> Result<Started, StartError> {
        let mut cmd = std::process::Command::new(plugin);
        cmd.envs(self.env.iter().chain(env).map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout kills whatever it spawned too.
            .process_group(0);
        match cmd.spawn() {
            Ok(child) => Ok(Started {
                child: Some(child),
                plugin: plugin.to_path_buf(),
                env: env.to_vec(),
                runner_env: self.env.clone(),
                timeout: self.timeout,
                communicate: crate::child_io::communicate,
            }),
            Err(e) => {
                let err = InvokeError::Spawn { path: plugin.to_path_buf(), reason: e.to_string() };
                Err(if e.raw_os_error() == Some(nix::libc::ETXTBSY) {
                    StartError::Busy(err)
                } else {
                    StartError::Other(err)
                })
            }
        }
    }
}

/// A plugin process started by [`RawExec::start`], waiting for its stdin. Dropped without
/// [`Started::finish`], it is killed (with its process group) unsent and reaped: it never acted.
#[derive(Debug)]
pub struct Started {
    child: Option<std::process::Child>,
    plugin: PathBuf,
    env: Vec<(String, String)>,
    runner_env: Vec<(String, String)>,
    timeout: Option<Duration>,
    /// Our side of the child's pipes: [`crate::child_io::communicate`]. A field, so that a test
    /// can make it fail as a `poll(2)` or `fcntl(2)` of ours would — nothing else can.
    communicate: Communicate,
}

/// Feeds a child its stdin and collects its output until it exits or the deadline passes.
type Communicate =
    fn(&mut std::process::Child, &[u8], Option<Instant>) -> std::io::Result<crate::child_io::ChildOutput>;

impl Started {
    /// The binary it runs.
    pub fn plugin(&self) -> &Path {
        &self.plugin
    }

    /// Its process id, also its process group's.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The variables it was started with besides the executor's own (its CNI ones).
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Whether `exec` would have started it as it was: the same variables of its own and the
    /// same timeout. A caller that started it ahead, then changed its executor, checks this.
    pub fn started_like(&self, exec: &RawExec) -> bool {
        self.runner_env == exec.env && self.timeout == exec.timeout
    }

    /// Tells the watcher its pid (also its process group), then sends it `stdin` and collects
    /// what it prints, killing it (and everything it spawned) at the executor's timeout or at
    /// the watcher's deadline, whichever comes first — [`Exec::exec_until`] for a process already started. A
    /// deadline already passed kills it unsent (`DeadlinePassed { started: false }`: it did
    /// nothing). Should our side of its pipes fail once it has its stdin, it is killed and
    /// reaped, and the error ([`InvokeError::PipesFailed`]) says it was started.
    pub fn finish(mut self, stdin: &[u8], watch: Watch<'_>) -> Result<Vec<u8>, InvokeError> {
        let Watch { spawned, until } = watch;
        let plugin = self.plugin.clone();
        before(&plugin, until)?;
        let Some(mut child) = self.child.take() else {
            return Err(InvokeError::Spawn { path: plugin, reason: "already finished".into() });
        };
        let pid = child.id();
        spawned(pid);
        let timeout_at = self.timeout.map(|t| Instant::now() + t);
        // Whichever limit comes first; `by_deadline` says which one it was.
        let (deadline, by_deadline) = match (timeout_at, until) {
            (Some(t), Some(u)) if u <= t => (Some(u), true),
            (None, Some(u)) => (Some(u), true),
            (t, _) => (t, false),
        };
        let outcome = match (self.communicate)(&mut child, stdin, deadline) {
            Ok(o) => o,
            Err(e) => {
                end(&mut child);
                return Err(InvokeError::PipesFailed { path: plugin, reason: e.to_string() });
            }
        };
        let Some(status) = outcome.status else {
            end(&mut child);
            forward_stderr(&outcome);
            if by_deadline {
                return Err(InvokeError::DeadlinePassed { path: plugin, started: true });
            }
            return Err(InvokeError::TimedOut { path: plugin, after: self.timeout.unwrap_or_default() });
        };
        forward_stderr(&outcome);
        let (stdout, stderr) = (outcome.stdout, outcome.stderr);
        if outcome.stdout_dropped > 0 {
            return Err(InvokeError::Failed(format!(
                "{} printed more than {} bytes on stdout ({})",
                plugin.display(),
                crate::child_io::MAX_OUTPUT,
                status_text(status)
            )));
        }
        if status.success() {
            return Ok(stdout);
        }
        Err(failure(&stdout, &stderr, &status_text(status)))
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            end(&mut child);
        }
    }
}

/// Kills the child's process group and reaps it. The wait is bounded: a child the kill cannot
/// reach at once (in uninterruptible sleep) must not hold its caller past its deadline.
fn end(child: &mut std::process::Child) {
    kill_group(child.id());
    let _ = crate::child_io::wait_until(child, Some(Instant::now() + Duration::from_secs(2)));
}

/// SIGKILL to the process group `pid` leads.
fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

/// Always forwards the child's stderr (Go drops it when stdout holds an error object), saying
/// how much was dropped beyond the cap.
fn forward_stderr(outcome: &crate::child_io::ChildOutput) {
    let mut err = std::io::stderr();
    if !outcome.stderr.is_empty() {
        let _ = err.write_all(&outcome.stderr);
    }
    if outcome.stderr_dropped > 0 {
        let _ = writeln!(err, "\n[{} more bytes of the plugin's stderr dropped]", outcome.stderr_dropped);
    }
}

/// Makes `command`'s child start with no signal blocked. A process inherits its parent's
/// signal mask across `execve(2)` (`sigprocmask(2)`: "the signal mask is preserved across
/// execve"), and Rust's `Command` does not reset it: a parent that blocks SIGTERM and SIGINT to
/// read them from a signalfd (braid-install's agent) would otherwise start children that
/// neither signal can stop. Costs a `fork(2)` where `Command` could use `posix_spawn(3)`, so
/// it is for the programs run off the common path (the agent's updates, the delegator's
/// `braid-podresources`), not for every delegate.
pub fn empty_signal_mask(command: &mut std::process::Command) {
    let empty = nix::sys::signal::SigSet::empty();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed; it makes one, pthread_sigmask(2) (sigprocmask), with
    // a set built before the fork, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(&empty), None)
                .map_err(std::io::Error::from)
        });
    }
}

/// Go's interpretation of a failed plugin's output.
pub fn failure(stdout: &[u8], stderr: &[u8], status: &str) -> InvokeError {
    if stdout.is_empty() {
        if stderr.is_empty() {
            return InvokeError::Failed(format!("netplugin failed with no error message: {status}"));
        }
        let text = String::from_utf8_lossy(stderr);
        return InvokeError::Failed(format!("netplugin failed: {}: {status}", cni_types::gojson::quote(&text)));
    }
    match CniError::decode(stdout) {
        Ok(e) => InvokeError::Plugin(e),
        Err(e) => InvokeError::Failed(format!(
            "netplugin failed but error parsing its diagnostic message {}: {e}",
            cni_types::gojson::quote(&String::from_utf8_lossy(stdout))
        )),
    }
}

/// Decodes an ADD result (Go's `ExecPluginWithResult`): `null` is `{}`, and a result without
/// `cniVersion` is taken to be in the configuration's version.
pub fn decode_result(stdout: &[u8], conf_version: &str) -> Result<AnyResult, InvokeError> {
    let mut value = cni_types::gojson::parse(stdout).map_err(|e| InvokeError::BadResult(e.into()))?;
    if value.is_null() {
        value = serde_json::Value::Object(Default::default());
    }
    let version = match value.get("cniVersion").and_then(|v| v.as_str()) {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => {
            let v = if conf_version.is_empty() { cni_types::version::DEFAULT } else { conf_version };
            if let serde_json::Value::Object(map) = &mut value {
                map.insert("cniVersion".into(), v.into());
            }
            v.to_string()
        }
    };
    AnyResult::create_from_value(&version, &value).map_err(|e| InvokeError::BadResult(e.into()))
}

/// Runs ADD and decodes the result (Go's `invoke.ExecPluginWithResult`).
pub fn add(exec: &dyn Exec, plugin: &Path, stdin: &[u8], inv: &Invocation) -> Result<AnyResult, InvokeError> {
    let out = exec.exec(plugin, stdin, &inv.env())?;
    add_result(&out, stdin)
}

/// [`add`] for a plugin already [started](RawExec::start) with the ADD's environment.
pub fn add_started(started: Started, stdin: &[u8], watch: Watch<'_>) -> Result<AnyResult, InvokeError> {
    let out = started.finish(stdin, watch)?;
    add_result(&out, stdin)
}

/// An ADD's stdout decoded in the version of the configuration it was sent.
fn add_result(stdout: &[u8], stdin: &[u8]) -> Result<AnyResult, InvokeError> {
    let conf_version = cni_types::version::decode_version(stdin).unwrap_or_default();
    decode_result(stdout, &conf_version)
}

/// Runs a command whose stdout is ignored on success: DEL, CHECK, GC, STATUS (Go's
/// `invoke.ExecPluginWithoutResult`).
pub fn exec_without_result(exec: &dyn Exec, plugin: &Path, stdin: &[u8], inv: &Invocation) -> Result<(), InvokeError> {
    exec.exec(plugin, stdin, &inv.env()).map(|_| ())
}

/// Asks a plugin which versions it supports (Go's `GetVersionInfo`), sending the dummy values
/// old plugins insist on.
pub fn version_info(exec: &dyn Exec, plugin: &Path) -> Result<cni_types::version::VersionInfo, InvokeError> {
    let probe = Invocation {
        netns: "dummy".into(),
        ifname: "dummy".into(),
        path: "dummy".into(),
        ..Invocation::new(cni_types::version::Command::Version)
    };
    let env = probe.env();
    match exec.exec(plugin, br#"{"cniVersion":"1.1.0"}"#, &env) {
        Ok(out) => cni_types::version::VersionInfo::decode(&out).map_err(InvokeError::BadVersionInfo),
        Err(InvokeError::Plugin(e)) if e.to_string() == "unknown CNI_COMMAND: VERSION" => {
            Ok(cni_types::version::VersionInfo {
                cni_version: "0.1.0".into(),
                supported_versions: vec!["0.1.0".into()],
            })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procs::RecordedProcess;
    use crate::testing::ScriptDir;

    /// Our own `poll(2)` (or `fcntl(2)`, or `waitpid(2)`) failing while the child runs is not the
    /// child failing to start: it has its stdin, it may have acted. `finish` kills and reaps it
    /// and says it was started, so that a meta-plugin rolls it back (a DEL follows).
    #[test]
    fn our_side_of_the_pipes_failing_kills_the_child_and_counts_as_started() {
        let dir = ScriptDir::new("pipes-fail").unwrap();
        let plugin = dir.script("acts", "cat >/dev/null; sleep 60").unwrap();
        let mut started = RawExec::default().start(&plugin, &[]).unwrap_or_else(|_| unreachable!("start"));
        started.communicate = |child, input, _| {
            // The child is sent its stdin, then our poll fails.
            if let Some(mut w) = child.stdin.take() {
                let _ = w.write_all(input);
            }
            Err(std::io::Error::other("poll: injected failure"))
        };
        let pid = started.pid().unwrap();
        let process = RecordedProcess::of(pid).unwrap();
        let e = started.finish(b"{}", Watch::NONE).unwrap_err();
        let alive = process.alive();
        let reaped = !std::path::Path::new(&format!("/proc/{pid}")).exists();
        let _ = process.kill_group(Duration::from_secs(5));
        assert!(!matches!(e, InvokeError::Spawn { .. }), "reported as never started: {e}");
        assert!(matches!(e, InvokeError::PipesFailed { .. }), "{e:?}");
        assert!(e.to_string().contains("poll: injected failure"), "{e}");
        assert!(!alive, "the child (pid {pid}) still runs");
        assert!(reaped, "the child (pid {pid}) was not reaped");
    }
}
