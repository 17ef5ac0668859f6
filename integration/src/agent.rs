//! braid's node agent (`braid-install --kubernetes-api`) run as the DaemonSet runs it, in a
//! node's network namespace (where the cluster's API server is reachable): `--host-root /`,
//! every directory in a test directory, a primary network file present (so the installer half
//! is content), its API credentials from a kubeconfig (`KUBECONFIG`), its node from
//! `NODE_NAME`. Its log (stderr) goes to a file the test reads; the process is killed by PID
//! and reaped on drop, also when the test fails.

use crate::build_dir;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The agent's directories, as the node (and so the delegator) sees them.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// `--cni-conf-dir` (holds the primary network `10-cluster.conflist`).
    pub conf: PathBuf,
    /// `--nad-conf-dir`.
    pub nad_conf: PathBuf,
    /// `--networks-dir`.
    pub networks: PathBuf,
    /// `--status-dir`.
    pub status: PathBuf,
    /// `--state-dir`.
    pub state: PathBuf,
}

impl Dirs {
    /// The directories below `base`, created, with a primary network in the conf dir.
    pub fn under(base: &Path) -> Dirs {
        let d = Dirs {
            conf: base.join("net.d"),
            nad_conf: base.join("multus.d"),
            networks: base.join("braid.d"),
            status: base.join("status"),
            state: base.join("state"),
        };
        for dir in [&d.conf, &d.nad_conf, &d.networks, &d.status, &d.state] {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        let primary = r#"{"cniVersion":"1.0.0","name":"cluster","plugins":[{"type":"ptp","ipam":{"type":"host-local","subnet":"198.18.250.0/24"}}]}"#;
        std::fs::write(d.conf.join("10-cluster.conflist"), primary).unwrap_or_else(|e| panic!("primary: {e}"));
        d
    }
}

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    /// Starts `braid-install --kubernetes-api` in the network namespace `netns` (`nsenter`
    /// execs it: the child is the agent itself) for node `node`, credentials from `kubeconfig`,
    /// its log in `log`; `extra` are further flags (`--api-timeout 1`).
    pub fn start(netns: &Path, dirs: &Dirs, kubeconfig: &Path, node: &str, log: &Path, extra: &[&str]) -> Agent {
        let s = |p: &Path| p.display().to_string();
        let err = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let child = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .arg("--")
            .arg(build_dir().join("braid-install"))
            .args(["--kubernetes-api", "--host-root", "/", "--skip-binaries", "--interval", "1"])
            .args(["--cni-conf-dir", &s(&dirs.conf), "--nad-conf-dir", &s(&dirs.nad_conf)])
            .args(["--networks-dir", &s(&dirs.networks), "--status-dir", &s(&dirs.status)])
            .args(["--state-dir", &s(&dirs.state), "--conf-file", "00-braid.conflist"])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("NODE_NAME", node)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting braid-install: {e}"));
        Agent { child, log: log.to_path_buf() }
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `needle` `times` times; panics with the log when the agent
    /// exited first, or when it is stuck ([`wait_until`]'s hang guard).
    pub fn wait_log(&mut self, needle: &str, times: usize) {
        let what = format!("braid-install logging {needle:?} {times}×");
        let log = self.log.clone();
        let child = &mut self.child;
        wait_until(
            &what,
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.matches(needle).count() >= times {
                    return true;
                }
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("braid-install exited ({status}) before logging {needle:?}:\n{text}");
                }
                false
            },
            || std::fs::read_to_string(&log).unwrap_or_default(),
        );
    }

    /// Stops it the way the kubelet does (SIGTERM) and reaps it; its exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let status = self.child.wait().unwrap_or_else(|e| panic!("waiting for braid-install: {e}"));
        // Drop then finds it reaped; kill of a reaped child fails harmlessly.
        status
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// How long a wait goes on before the test calls the agent stuck: a guard against a hang, never
/// a measurement of the agent (nothing it does waits longer than its 30 s retry backoff; its
/// timing is measured in scripts/bench.sh).
pub const HANG_GUARD: Duration = Duration::from_secs(300);

/// Waits until `f` holds, looking again every 20 ms; a test that would otherwise hang forever
/// panics naming `what` and showing `context()` once [`HANG_GUARD`] has passed.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool, context: impl Fn() -> String) {
    let give_up = Instant::now() + HANG_GUARD;
    while !f() {
        if Instant::now() >= give_up {
            panic!("{what} did not happen (stuck):\n{}", context());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
