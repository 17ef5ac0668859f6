//! A testing kit for plugin authors (feature `testing`; use it from `[dev-dependencies]`).
//!
//! * [`cmd`]: a CNI call built like a runtime would make it — `cmd(Command::Add)
//!   .netns(..).ifname(..).config(..)` — run in-process against a [`Plugin`], giving the exit
//!   code and the parsed outcome. No root, no processes: most plugin tests need nothing more
//!   (Go's `testutils.CmdAdd` needs a real namespace for every case).
//! * [`TempNetns`]: a named network namespace, loopback up, removed on drop — also when the
//!   test panics (Go's `testutils.NewNS`).
//! * [`require_root`]: the rule for tests that need a kernel: without root they print a loud
//!   `SKIPPED` line and return false, and with `BRAID_REQUIRE_ROOT_TESTS=1` (CI) they fail, so
//!   a skip can never pass for a pass.
//!
//! Test support fails loudly: these helpers panic on a broken environment.
#![allow(clippy::panic)]

use crate::dispatch::{run, Plugin};
use crate::env::TestEnv;
use cni_types::result::AnyResult;
use cni_types::version::Command;
use cni_types::{CniError, CniResult};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A CNI call under construction; see [`cmd`].
#[derive(Debug, Clone)]
pub struct Call {
    command: Command,
    vars: Vec<(String, String)>,
    stdin: Vec<u8>,
}

/// A call of `command` with what a runtime always sends: `CNI_CONTAINERID=test-container`,
/// `CNI_IFNAME=eth0`, `CNI_PATH=/opt/cni/bin`, and `CNI_NETNS` naming a namespace that does not
/// exist (set a real one with [`Call::netns`] for a plugin that enters it).
pub fn cmd(command: Command) -> Call {
    let vars = [
        ("CNI_COMMAND", command.as_str()),
        ("CNI_CONTAINERID", "test-container"),
        ("CNI_NETNS", "/run/netns/cni-skel-test-absent"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
    ];
    Call { command, vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), stdin: Vec::new() }
}

impl Call {
    /// Sets (or, with `""`, empties) any variable.
    pub fn env(mut self, key: &str, value: impl Into<String>) -> Call {
        self.vars.retain(|(k, _)| k != key);
        self.vars.push((key.to_string(), value.into()));
        self
    }

    /// `CNI_NETNS`; a path, e.g. [`TempNetns::path`].
    pub fn netns(self, path: impl Into<PathBuf>) -> Call {
        let p: PathBuf = path.into();
        self.env("CNI_NETNS", p.display().to_string())
    }

    /// `CNI_IFNAME`.
    pub fn ifname(self, name: &str) -> Call {
        self.env("CNI_IFNAME", name)
    }

    /// `CNI_CONTAINERID`.
    pub fn container_id(self, id: &str) -> Call {
        self.env("CNI_CONTAINERID", id)
    }

    /// `CNI_ARGS`.
    pub fn args(self, args: &str) -> Call {
        self.env("CNI_ARGS", args)
    }

    /// `CNI_PATH`.
    pub fn path(self, path: &str) -> Call {
        self.env("CNI_PATH", path)
    }

    /// The configuration on stdin, as JSON.
    pub fn config(mut self, config: &serde_json::Value) -> Call {
        self.stdin = config.to_string().into_bytes();
        self
    }

    /// Raw bytes on stdin.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Call {
        self.stdin = bytes.into();
        self
    }

    /// Runs the call in-process through the dispatcher, exactly as `cni_skel::main` would.
    pub fn run(&self, plugin: &dyn Plugin) -> CmdOutput {
        let mut env = TestEnv::new(self.vars.iter().cloned(), &self.stdin);
        let code = run(plugin, &mut env);
        CmdOutput { command: self.command, code, stdout: env.stdout_text(), stderr: env.stderr_text() }
    }
}

/// What a call printed and returned.
#[derive(Debug, Clone)]
pub struct CmdOutput {
    /// The command that ran.
    pub command: Command,
    /// The exit code (0 or 1).
    pub code: i32,
    /// Everything printed on stdout: a result, an error object, or nothing.
    pub stdout: String,
    /// Everything printed on stderr (logs).
    pub stderr: String,
}

impl CmdOutput {
    /// The result printed by a successful ADD, in the 1.x model; panics (with what was printed)
    /// on anything else.
    pub fn result(&self) -> CniResult {
        self.any_result().to_latest()
    }

    /// The result printed by a successful ADD, in the version it was printed in.
    pub fn any_result(&self) -> AnyResult {
        if self.code != 0 {
            panic!("{} failed (exit {}): {}{}", self.command, self.code, self.stdout, self.stderr);
        }
        AnyResult::from_bytes(self.stdout.as_bytes())
            .unwrap_or_else(|e| panic!("{} printed no result ({e}): {:?}", self.command, self.stdout))
    }

    /// The error object of a failed call; panics if the call succeeded.
    pub fn error(&self) -> CniError {
        if self.code == 0 {
            panic!("{} succeeded, printing {:?}", self.command, self.stdout);
        }
        CniError::decode(self.stdout.as_bytes())
            .unwrap_or_else(|e| panic!("{} printed no error object ({e}): {:?}", self.command, self.stdout))
    }

    /// Panics with what was printed unless the call succeeded.
    pub fn success(&self) {
        if self.code != 0 {
            panic!("{} failed (exit {}): {}{}", self.command, self.code, self.stdout, self.stderr);
        }
    }
}

/// True when a test that needs root may run. Without root it prints a loud SKIPPED line and
/// returns false — unless `BRAID_REQUIRE_ROOT_TESTS=1`, when it panics instead.
pub fn require_root(test: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        return true;
    }
    if std::env::var("BRAID_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1") {
        panic!("{test} needs root, and BRAID_REQUIRE_ROOT_TESTS=1 forbids skipping");
    }
    eprintln!("\n*** SKIPPED {test}: needs root ***\n");
    false
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A named network namespace (`ip netns add`), loopback up, deleted on drop.
#[derive(Debug)]
pub struct TempNetns {
    name: String,
}

impl TempNetns {
    /// Creates `<tag><pid>x<n>`: unique per process and call, short enough for `ip`.
    pub fn new(tag: &str) -> TempNetns {
        let name = format!("{tag}{}x{}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst));
        run_tool("ip", &["netns", "add", &name]);
        let ns = TempNetns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The name under `/run/netns`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/<name>`: what `CNI_NETNS` names.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// `ip -n <name> <args>`; its stdout, panicking on failure.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        run_tool("ip", &full)
    }

    /// Any command inside the namespace (`ip netns exec`); its stdout, panicking on failure.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut full = vec!["netns", "exec", self.name.as_str()];
        full.extend_from_slice(args);
        run_tool("ip", &full)
    }
}

impl Drop for TempNetns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "delete", &self.name]).status();
    }
}

fn run_tool(cmd: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    if !out.status.success() {
        panic!("{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}
