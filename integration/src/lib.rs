//! The integration harness: throwaway "host" and "container" network namespaces, the test acting
//! as the runtime (conflists run through `cni_runtime::chain` inside the host namespace), and
//! inspection of the kernel's state with iproute2's JSON output.
//!
//! Nothing here touches the machine's own network namespace: every plugin runs on a thread that
//! has entered the test's host namespace (children inherit it), and every namespace is removed
//! on drop, also when a test panics.
// Test support: failing loudly (panicking) is how it reports a broken environment to a test.
#![allow(clippy::print_stderr, clippy::panic)]

pub mod agent;
pub mod cluster;
#[cfg(feature = "cri")]
pub mod containerd;
#[cfg(feature = "cri")]
pub mod cri;
#[cfg(feature = "fault-proxy")]
pub mod fault_proxy;
pub mod metaplugin;
#[cfg(feature = "cri")]
pub mod node;
pub mod podman;
pub mod runtime;
pub mod stale_netns;
pub mod vm;

use cni_runtime::chain::{Chain, ChainError, RuntimeConf};
use cni_runtime::invoke::RawExec;
use cni_skel::testing::TempNetns;
use cni_types::result::AnyResult;
use cni_types::NetConfList;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The CNI reference plugins the suite and the bench run (containernetworking/plugins at the
/// version `integration/cni-plugins/go.mod` pins, v1.10.0): `$BRAID_CNI_PLUGINS` when set
/// (`scripts/test.sh` and `scripts/bench.sh` export what `scripts/build-cni-plugins.sh` built),
/// else built now by that script (once per machine, into its cache) — never Debian's 2022
/// package, so a test cannot pass on plugins operators no longer run. A path without plugins
/// when neither works: [`require_root`] then says why.
pub fn reference_plugins() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("BRAID_CNI_PLUGINS").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-cni-plugins.sh");
        match Command::new("bash").arg(&script).stderr(std::process::Stdio::inherit()).output() {
            Ok(out) if out.status.success() => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
            }
            Ok(out) => {
                eprintln!("{}: {}", script.display(), out.status);
                PathBuf::from("/nonexistent/braid-cni-plugins")
            }
            Err(e) => {
                eprintln!("{}: {e}", script.display());
                PathBuf::from("/nonexistent/braid-cni-plugins")
            }
        }
    })
}

/// True when a namespace test may run: root (the rule of `cni_skel::testing::require_root`:
/// a loud SKIPPED line, or a failure under `BRAID_REQUIRE_ROOT_TESTS=1`) and the reference
/// plugins built ([`reference_plugins`]).
pub fn require_root(test: &str) -> bool {
    if !cni_skel::testing::require_root(test) {
        return false;
    }
    if reference_plugins().join("bridge").exists() {
        return true;
    }
    let why = format!(
        "needs the reference plugins ({}: scripts/build-cni-plugins.sh builds them, Go 1.26.8 or later)",
        reference_plugins().display()
    );
    if std::env::var("BRAID_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1") {
        panic!("{test} {why}, and BRAID_REQUIRE_ROOT_TESTS=1 forbids skipping");
    }
    eprintln!("\n*** SKIPPED {test}: {why} ***\n");
    false
}

/// Whether this kernel can create a link of this kind: `ip link add probe0 type <kind_args…>`
/// in a throwaway namespace; `Err` with iproute2's words when it cannot (VRF on a kernel built
/// without `CONFIG_NET_VRF` says "Unknown device type").
pub fn kernel_supports_link(kind_args: &[&str]) -> Result<(), String> {
    let ns = Netns::new("probe");
    let out = Command::new("ip")
        .args(["-n", ns.name(), "link", "add", "probe0", "type"])
        .args(kind_args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Says loudly that `test` did not run because the kernel lacks a feature. Written to the
/// process's stderr itself, not with `eprintln!` (which libtest captures from passing tests):
/// the line must reach the run's log, where `scripts/test.sh` counts it as skipped, never as
/// passed. Not a failure under `BRAID_REQUIRE_ROOT_TESTS=1`: that variable demands root, and
/// root cannot add a feature to the running kernel.
pub fn skip_for_kernel(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: {why} — the kernel lacks it (root does not help); not counted as passed ***\n"
    );
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A unique short tag for names (namespaces, networks, directories).
pub fn unique(tag: &str) -> String {
    format!("{tag}{}x{}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst))
}

/// A named network namespace (cni-skel's [`TempNetns`], deleted on drop) with the kernel
/// inspection the tests need.
#[derive(Debug)]
pub struct Netns {
    ns: TempNetns,
}

impl Netns {
    /// Creates `braid-<tag><unique>` with its loopback up. The first one a process makes also
    /// deletes the namespaces killed processes left ([`stale_netns`]).
    pub fn new(tag: &str) -> Netns {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            for name in stale_netns::remove_dead_owners() {
                eprintln!("removed network namespace {name}: its process is gone");
            }
        });
        Netns { ns: TempNetns::new(&format!("braid-{tag}")) }
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.ns.name()
    }

    /// `/run/netns/<name>`.
    pub fn path(&self) -> PathBuf {
        self.ns.path()
    }

    /// Runs `ip <args>` inside the namespace and returns stdout; panics on failure.
    pub fn ip(&self, args: &[&str]) -> String {
        self.ns.ip(args)
    }

    /// Runs `program <args>` inside the namespace (`ip netns exec`: iptables-save, tc, …) and
    /// returns stdout; panics on failure.
    pub fn exec(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", self.name(), program])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("ip netns exec {} {program}: {e}", self.name()));
        assert!(
            out.status.success(),
            "ip netns exec {} {program} {args:?} failed: {}",
            self.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ip -j` output parsed.
    pub fn ip_json(&self, args: &[&str]) -> Value {
        let mut full = vec!["-j"];
        full.extend_from_slice(args);
        let text = self.ip(&full);
        serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text }).unwrap_or(Value::Null)
    }

    /// Link names.
    pub fn links(&self) -> Vec<String> {
        self.ip_json(&["link", "show"])
            .as_array()
            .map(|a| a.iter().filter_map(|l| l["ifname"].as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    }

    /// One link's JSON (`ip -j -d link show <name>`), `None` if absent.
    pub fn link(&self, name: &str) -> Option<Value> {
        self.ip_json(&["-d", "link", "show"]).as_array()?.iter().find(|l| l["ifname"] == name).cloned()
    }

    /// `address/prefix` strings on a link (all families, no link-local IPv6).
    pub fn addresses(&self, link: &str) -> Vec<String> {
        self.ip_json(&["addr", "show", "dev", link])
            .as_array()
            .and_then(|a| a.first().cloned())
            .and_then(|l| l["addr_info"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|a| a["scope"] != "link")
            .filter_map(|a| Some(format!("{}/{}", a["local"].as_str()?, a["prefixlen"].as_u64()?)))
            .collect()
    }

    /// Routes of every table and family, as `ip -j route show table all` objects.
    pub fn routes(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for fam in ["-4", "-6"] {
            if let Some(a) = self.ip_json(&[fam, "route", "show", "table", "all"]).as_array() {
                out.extend(a.iter().cloned());
            }
        }
        out
    }
}

/// A temporary directory removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `/tmp/braid-<tag><unique>`.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("braid-{}", unique(tag)));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        TempDir(p)
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Every file below, relative (to assert that nothing was left behind).
    pub fn files(&self) -> Vec<String> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(base, &p, out);
                } else if let Ok(rel) = p.strip_prefix(base) {
                    out.push(rel.display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &self.0, &mut out);
        out.sort();
        out
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One test's world: a host namespace (where plugins run), a work directory (result cache,
/// IPAM data, logs) and the plugin search path.
#[derive(Debug)]
pub struct Harness {
    /// The "host" namespace.
    pub host: Netns,
    /// Cache, IPAM data and other per-test files.
    pub dir: TempDir,
    /// `CNI_PATH`.
    pub paths: Vec<PathBuf>,
    /// Delegate timeout.
    pub timeout: Duration,
}

impl Harness {
    /// A fresh host namespace and work directory; the reference plugins and braid's binaries
    /// (the build directory) on the path.
    pub fn new(tag: &str) -> Harness {
        ensure_binaries();
        let dir = TempDir::new(tag);
        std::fs::create_dir_all(dir.path().join("ipam")).unwrap_or_default();
        Harness {
            host: Netns::new(&format!("{tag}h")),
            dir,
            paths: vec![build_dir(), reference_plugins().to_path_buf()],
            timeout: Duration::from_secs(20),
        }
    }

    /// A container namespace.
    pub fn container(&self, tag: &str) -> Netns {
        Netns::new(&format!("{tag}c"))
    }

    /// Where host-local keeps its reservations in this test (use as `ipam.dataDir`).
    pub fn ipam_dir(&self) -> PathBuf {
        self.dir.path().join("ipam")
    }

    /// A host-local IPAM section for 198.18.`<subnet>`.0/24 with its data in this test's
    /// directory, and a route to 198.19.`<subnet>`.0/24 via the gateway (so CHECK has a `gw`).
    pub fn host_local(&self, subnet: u8) -> Value {
        serde_json::json!({
            "type": "host-local",
            "dataDir": self.ipam_dir(),
            "ranges": [[{"subnet": format!("198.18.{subnet}.0/24"), "gateway": format!("198.18.{subnet}.1")}]],
            "routes": [{"dst": format!("198.19.{subnet}.0/24"), "gw": format!("198.18.{subnet}.1")}]
        })
    }

    /// The result cache root.
    pub fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn in_host<T: Send>(&self, f: impl FnOnce(&Chain<'_>) -> T + Send) -> T {
        self.in_host_with(Vec::new(), f)
    }

    /// [`Harness::in_host`], the plugins run with `env` besides the test's environment.
    fn in_host_with<T: Send>(&self, env: Vec<(String, String)>, f: impl FnOnce(&Chain<'_>) -> T + Send) -> T {
        let (timeout, paths, cache_dir) = (self.timeout, self.paths.clone(), self.cache_dir());
        cni_skel::netns::run_in(&self.host.path(), move || {
            let exec = RawExec { timeout: Some(timeout), env };
            f(&Chain { exec: &exec, paths, cache_dir })
        })
        .unwrap_or_else(|e| panic!("entering host netns: {e}"))
    }

    /// ADD a conflist (JSON) for a container.
    pub fn add(&self, list: &Value, rt: &RuntimeConf) -> Result<AnyResult, ChainError> {
        let list = parse_list(list);
        self.in_host(|c| c.add(&list, rt))
    }

    /// ADD, the plugins (and what they start) run with `env` besides the test's environment:
    /// `BRAID_FAULT_STARTED` for braid-fault (see its documentation).
    pub fn add_with_env(&self, list: &Value, rt: &RuntimeConf, env: &[(&str, &Path)]) -> Result<AnyResult, ChainError> {
        let list = parse_list(list);
        let env = env.iter().map(|(k, v)| (k.to_string(), v.display().to_string())).collect();
        self.in_host_with(env, |c| c.add(&list, rt))
    }

    /// CHECK.
    pub fn check(&self, list: &Value, rt: &RuntimeConf) -> Result<(), ChainError> {
        let list = parse_list(list);
        self.in_host(|c| c.check(&list, rt))
    }

    /// DEL.
    pub fn del(&self, list: &Value, rt: &RuntimeConf) -> Result<(), ChainError> {
        let list = parse_list(list);
        self.in_host(|c| c.del(&list, rt))
    }

    /// DEL, with `env` as for [`Harness::add_with_env`].
    pub fn del_with_env(&self, list: &Value, rt: &RuntimeConf, env: &[(&str, &Path)]) -> Result<(), ChainError> {
        let list = parse_list(list);
        let env = env.iter().map(|(k, v)| (k.to_string(), v.display().to_string())).collect();
        self.in_host_with(env, |c| c.del(&list, rt))
    }

    /// GC.
    pub fn gc(&self, list: &Value, valid: Option<&[cni_types::config::GcAttachment]>) -> Result<(), ChainError> {
        let list = parse_list(list);
        self.in_host(|c| c.gc(&list, valid))
    }

    /// STATUS.
    pub fn status(&self, list: &Value) -> Result<(), ChainError> {
        let list = parse_list(list);
        self.in_host(|c| c.status(&list))
    }

    /// Runs one plugin binary (found on the harness path) directly inside the host namespace
    /// with explicit CNI variables; returns its stdout or the invoke error.
    pub fn exec_plugin(
        &self,
        plugin: &str,
        command: cni_types::version::Command,
        rt: &RuntimeConf,
        stdin: &[u8],
    ) -> Result<Vec<u8>, cni_runtime::invoke::InvokeError> {
        use cni_runtime::invoke::Exec;
        let (timeout, paths) = (self.timeout, self.paths.clone());
        let req = rt.invocation(command, &cni_types::invocation::join_path(&paths));
        let stdin = stdin.to_vec();
        let plugin = plugin.to_string();
        cni_skel::netns::run_in(&self.host.path(), move || {
            let exec = RawExec { timeout: Some(timeout), ..RawExec::default() };
            let path = exec.find(&plugin, &paths)?;
            exec.exec(&path, &stdin, &req.env())
        })
        .unwrap_or_else(|e| panic!("entering host netns: {e}"))
    }

    /// Runs a command (a binary of the build directory, found by name) inside the host
    /// namespace with `stdin`; returns its exit status, stdout and stderr. For tools such as the
    /// verifier's operators' mode.
    pub fn run_tool(&self, binary: &str, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
        use std::io::Write;
        let path = build_dir().join(binary);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let stdin = stdin.to_vec();
        let out = cni_skel::netns::run_in(&self.host.path(), move || {
            let mut child = Command::new(&path)
                .args(&args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
            if let Some(mut i) = child.stdin.take() {
                let _ = i.write_all(&stdin);
            }
            child.wait_with_output().unwrap_or_else(|e| panic!("waiting for {}: {e}", path.display()))
        })
        .unwrap_or_else(|e| panic!("entering host netns: {e}"));
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
    }

    /// A rendezvous of `count` braid-fault calls (its `meet` keys) in this test's directory:
    /// how a test shows that delegates ran at once without timing them.
    pub fn meeting(&self, tag: &str, count: usize) -> Meeting {
        let dir = self.dir.path().join(format!("meet-{tag}"));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        Meeting { dir, count }
    }

    /// IP reservations host-local still holds in the harness's IPAM data (it names each file
    /// after the address it reserves).
    pub fn reservations(&self) -> Vec<String> {
        self.dir.files().into_iter().filter(|f| f.starts_with("ipam/") && f.contains("198.1")).collect()
    }

    /// braid's attachment records anywhere in the harness's directory: files named
    /// `<containerID>@<ifname>` (the libcni cache, lock files and a state directory's owner file
    /// are not records).
    pub fn state_files(&self) -> Vec<String> {
        self.dir.files().into_iter().filter(|f| f.rsplit('/').next().is_some_and(|n| n.contains('@'))).collect()
    }

    /// Starts braid's `plugin` (from the build dir) with ADD for `rt` inside the host
    /// namespace, feeds it `stdin`, and SIGKILLs it once `until` returns true (polled every
    /// 20 ms, at most 10 s): a crash at a moment the test chooses. Returns when it is reaped.
    pub fn kill_during_add(&self, plugin: &str, rt: &RuntimeConf, stdin: &[u8], until: impl Fn() -> bool + Send) {
        self.kill_during_add_with_env(plugin, rt, stdin, &[], until)
    }

    /// [`Harness::kill_during_add`], the plugin run with `env` besides the test's environment
    /// (see [`Harness::add_with_env`]).
    pub fn kill_during_add_with_env(
        &self,
        plugin: &str,
        rt: &RuntimeConf,
        stdin: &[u8],
        env: &[(&str, &Path)],
        until: impl Fn() -> bool + Send,
    ) {
        let env: Vec<(String, PathBuf)> = env.iter().map(|(k, v)| (k.to_string(), v.to_path_buf())).collect();
        let bin = build_dir().join(plugin);
        let path = cni_types::invocation::join_path(&self.paths);
        let stdin = stdin.to_vec();
        let ran = cni_skel::netns::run_in(&self.host.path(), move || {
            use std::io::Write;
            let mut child = Command::new(&bin)
                .env("CNI_COMMAND", "ADD")
                .env("CNI_CONTAINERID", &rt.container_id)
                .env("CNI_NETNS", &rt.netns)
                .env("CNI_IFNAME", &rt.ifname)
                .env("CNI_ARGS", &rt.args)
                .env("CNI_PATH", &path)
                .envs(env)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
            if let Some(mut input) = child.stdin.take() {
                let _ = input.write_all(&stdin);
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !until() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        });
        ran.unwrap_or_else(|e| panic!("host namespace: {e}"));
    }

    /// The stdin a runtime sends the first plugin of `list` (its object with the list's `name`
    /// and `cniVersion`).
    pub fn first_plugin_stdin(list: &Value) -> Vec<u8> {
        let mut conf = list["plugins"][0].as_object().cloned().unwrap_or_default();
        conf.insert("name".into(), list["name"].clone());
        conf.insert("cniVersion".into(), list["cniVersion"].clone());
        serde_json::to_vec(&conf).unwrap_or_default()
    }

    /// The runtime parameters for a container namespace.
    pub fn runtime(&self, ns: &Netns, container_id: &str, ifname: &str) -> RuntimeConf {
        RuntimeConf {
            container_id: container_id.into(),
            netns: ns.path().display().to_string(),
            ifname: ifname.into(),
            args: "IgnoreUnknown=1;K8S_POD_NAME=pod".into(),
            capability_args: Default::default(),
        }
    }
}

fn parse_list(v: &Value) -> NetConfList {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    NetConfList::parse(&bytes).unwrap_or_else(|e| panic!("test conflist: {e}"))
}

/// braid's plugin binaries, which the tests run as delegates and runtimes run as plugins.
pub const BRAID_BINARIES: &[&str] = &["delegator", "merger", "verifier", "vmtap", "braid-fault", "braid-cnitool"];

/// `cargo test` builds only the binaries of the package under test; the plugins live in other
/// packages, so build them once (same profile) when one is missing.
fn ensure_binaries() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let dir = build_dir();
        // The installer too: tests run it as the DaemonSet would (`--host-root /`).
        if BRAID_BINARIES.iter().chain(&["braid-install"]).all(|b| dir.join(b).exists()) {
            return;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--workspace", "--bins", "-q"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let ok = cmd.status().is_ok_and(|s| s.success());
        assert!(ok, "building braid's binaries failed");
    });
}

/// A rendezvous of braid-fault calls (see [`Harness::meeting`]).
#[derive(Debug, Clone)]
pub struct Meeting {
    dir: PathBuf,
    count: usize,
}

impl Meeting {
    /// `delegate` (a braid-fault configuration) with this rendezvous on `command`.
    pub fn join(&self, mut delegate: Value, command: &str) -> Value {
        delegate["meet"] = Value::String(self.dir.display().to_string());
        delegate["meetCount"] = Value::from(self.count);
        delegate["meetOn"] = Value::String(command.to_string());
        delegate
    }

    /// How many calls met all the others, and how many waited in vain (ran alone).
    pub fn outcome(&self) -> (usize, usize) {
        let ending = |suffix: &str| {
            std::fs::read_dir(&self.dir)
                .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(suffix)).count())
                .unwrap_or(0)
        };
        (ending(".met"), ending(".alone"))
    }
}

/// The cargo build directory holding braid's binaries: the parent of a test executable's
/// `deps/` (or an example's `examples/`), or the directory of a workspace binary that sits
/// beside them (`braid-bench` in `scripts/build-release.sh`'s directory).
pub fn build_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let dir = exe.parent()?;
            if dir.file_name().is_some_and(|n| n == "deps" || n == "examples") {
                dir.parent().map(Path::to_path_buf)
            } else {
                Some(dir.to_path_buf())
            }
        })
        .unwrap_or_else(|| PathBuf::from("target/debug"))
}

/// Results of several interfaces of one pod, concatenated as braid's delegator merges them
/// (interfaces and IPs in order, each IP's `interface` renumbered): the `prevResult` vmtap's
/// converging ADD gets after a network is added to or removed from the pod.
pub fn merged_results(results: &[&Value]) -> Value {
    let (mut interfaces, mut ips, mut routes) = (Vec::new(), Vec::new(), Vec::new());
    for r in results {
        let offset = interfaces.len() as u64;
        interfaces.extend(r["interfaces"].as_array().into_iter().flatten().cloned());
        for ip in r["ips"].as_array().into_iter().flatten() {
            let mut ip = ip.clone();
            if let Some(i) = ip["interface"].as_u64() {
                ip["interface"] = serde_json::json!(i + offset);
            }
            ips.push(ip);
        }
        routes.extend(r["routes"].as_array().into_iter().flatten().cloned());
    }
    serde_json::json!({"cniVersion": "1.0.0", "interfaces": interfaces, "ips": ips, "routes": routes})
}
