//! The real Kubernetes cluster of `scripts/node.sh` (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, and per node containerd 2.x, kubelet and
//! kube-proxy, built from the Go modules under `integration/node/`), with braid installed by
//! `kubectl apply -k deploy/kubernetes`, for the tests that do what an operator does with
//! `kubectl`.
//!
//! `scripts/test.sh` brings a two-node cluster up before `cargo test` and names its directory
//! in `BRAID_NODE_DIR`; without it these tests print a loud SKIPPED line (and fail under
//! `BRAID_REQUIRE_ROOT_TESTS=1`). The tests share the cluster, so they hold [`Cluster::lock`]
//! (one at a time: some stop its parts) and work in Kubernetes namespaces of their own, which
//! [`Namespace`] deletes on drop, also when a test fails.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One test at a time on the shared cluster.
static LOCK: Mutex<()> = Mutex::new(());

/// The upper bound of every wait: a stuck cluster, never a measurement.
pub const HANG_GUARD: Duration = Duration::from_secs(240);

/// The annotation a pod selects its networks with (Network Plumbing WG).
pub const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
/// The annotation braid's agent publishes a pod's attachments in.
pub const NETWORK_STATUS: &str = "k8s.v1.cni.cncf.io/network-status";
/// The image of the tests' pods (static busybox, imported by `scripts/node.sh`).
pub const BUSYBOX: &str = "localhost/braid/busybox:1";

/// A cluster brought up by `scripts/node.sh up`.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    kubectl: PathBuf,
    _guard: MutexGuard<'static, ()>,
}

impl Cluster {
    /// The pod's network-status annotation, parsed (None until the agent has published it).
    pub fn network_status(&self, ns: &str, name: &str) -> Option<Value> {
        let path = format!("jsonpath={{.metadata.annotations.{}}}", NETWORK_STATUS.replace('.', "\\."));
        let out = self.kubectl(&["get", "pod", name, "-n", ns, "-o", &path]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !text.trim().is_empty()).then(|| serde_json::from_str(&text).unwrap())
    }

    /// Waits for the pod to be Running (its network-status can come before its container has
    /// started, and `kubectl exec` into a container not started yet fails).
    pub fn wait_running(&self, ns: &str, name: &str) {
        self.wait(
            &format!("pod {ns}/{name} Running"),
            || self.get(&["pod", name, "-n", ns])["status"]["phase"] == "Running",
            || String::from_utf8_lossy(&self.kubectl(&["describe", "pod", name, "-n", ns]).stdout).into_owned(),
        );
    }

    /// braid's hot-plug layout (`deploy/kubernetes-hotplug`) applied for one test; the API
    /// layout and its grants as they were when the guard drops.
    pub fn hotplug_layout(&self) -> Defer<impl FnMut() + '_> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let rollout = ["rollout", "status", "daemonset/braid-install", "-n", "kube-system", "--timeout=240s"];
        self.ok(&["apply", "-k", &repo.join("deploy/kubernetes-hotplug").display().to_string()]);
        self.ok(&rollout);
        Defer(move || {
            let _ = self.kubectl(&["apply", "-k", &repo.join("deploy/kubernetes").display().to_string()]);
            let _ = self.kubectl(&[
                "delete",
                "clusterrolebinding,clusterrole",
                "braid-node-agent-hotplug",
                "--ignore-not-found",
            ]);
            let _ = self.kubectl(&rollout);
        })
    }

    /// braid's DRA layout (`deploy/kubernetes-dra`: the agent with `--dra`, its grants, its
    /// admission policy and DeviceClass) applied for one test; when the guard drops, the API
    /// layout as it was, the DRA objects deleted and no ResourceSlice of braid's driver left.
    pub fn dra_layout(&self) -> Defer<impl FnMut() + '_> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let rollout = ["rollout", "status", "daemonset/braid-install", "-n", "kube-system", "--timeout=240s"];
        let layout = repo.join("deploy/kubernetes-dra").display().to_string();
        // What the layout adds beyond the API layout (`kind.group/name` of each object), to
        // delete afterwards: its objects are cluster-scoped or braid's namespace's.
        let names = |dir: &str| -> Vec<String> {
            self.ok(&["apply", "-k", dir, "--dry-run=client", "-o", "name"]).lines().map(str::to_string).collect()
        };
        let base = names(&repo.join("deploy/kubernetes").display().to_string());
        let added: Vec<String> = names(&layout).into_iter().filter(|n| !base.contains(n)).collect();
        self.ok(&["apply", "-k", &layout]);
        self.ok(&rollout);
        Defer(move || {
            // A test's claim pods are deleted before this guard drops (its namespace's guard
            // comes later, so drops first), but the kubelet unprepares their claims after the pod
            // object is gone: the DRA agents stay until every node's claim records are (bounded;
            // a test that left one is the next one's finding, not a hang here).
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline
                && (1..=self.nodes())
                    .any(|n| !self.files_on(&format!("node{n}"), braid_attach::claim_record::DEFAULT_DIR).is_empty())
            {
                std::thread::sleep(Duration::from_millis(500));
            }
            let _ = self.kubectl(&["apply", "-k", &repo.join("deploy/kubernetes").display().to_string()]);
            let _ = self.kubectl(&rollout);
            for name in &added {
                let _ = self.kubectl(&["delete", name, "-n", "kube-system", "--ignore-not-found"]);
            }
            let _ = self.kubectl(&["delete", "resourceslices", "--field-selector", "spec.driver=net.braid-cni.io"]);
        })
    }

    /// What `kubectl` says with these credentials instead of the admin's: whether it
    /// succeeded, and its output.
    pub fn as_token(&self, token: &str, args: &[&str]) -> (bool, String) {
        let mut a = vec!["--kubeconfig=/dev/null", "--server=https://198.18.0.1:6443"];
        let ca = format!("--certificate-authority={}/pki/ca.crt", self.dir().display());
        let tk = format!("--token={token}");
        a.push(&ca);
        a.push(&tk);
        a.extend_from_slice(args);
        let out = self.kubectl(&a);
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    }

    /// The token the kubelet mounted into braid's agent pod on `node` (its projected volume):
    /// bound to that pod and naming its node.
    pub fn agent_token(&self, node: &str) -> String {
        let (_, uid) = self.agent_pod(node);
        let dir = format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~projected");
        let files = self.files_on(node, &dir);
        let token =
            files.iter().find(|f| f.ends_with("/token")).unwrap_or_else(|| panic!("no token in {dir}: {files:?}"));
        self.read_on(node, &format!("{dir}/{token}")).unwrap().trim().to_string()
    }

    /// The cluster of `BRAID_NODE_DIR`, held for this test alone; `None` (after the SKIPPED
    /// line) where there is none and skipping is allowed.
    pub fn lock(test: &str) -> Option<Cluster> {
        if !cni_skel::testing::require_root(test) {
            return None;
        }
        let dir = match std::env::var_os("BRAID_NODE_DIR") {
            Some(d) if Path::new(&d).join("nodes").exists() => PathBuf::from(d),
            _ => {
                let why = "needs the real cluster of scripts/node.sh (BRAID_NODE_DIR; scripts/test.sh brings it up)";
                if std::env::var("BRAID_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1") {
                    panic!("{test} {why}, and BRAID_REQUIRE_ROOT_TESTS=1 forbids skipping");
                }
                eprintln!("\n*** SKIPPED {test}: {why} ***\n");
                return None;
            }
        };
        let guard = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let kubectl = dir.join("bin/kubectl");
        Some(Cluster { dir, kubectl, _guard: guard })
    }

    /// The cluster of `dir` (a bench's own, brought up by `scripts/node.sh up`), held alone.
    pub fn at(dir: &Path) -> Cluster {
        let guard = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Cluster { dir: dir.to_path_buf(), kubectl: dir.join("bin/kubectl"), _guard: guard }
    }

    /// The cluster's directory (logs/, the audit log, each node's files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many nodes it has (`node1` … `nodeN`).
    pub fn nodes(&self) -> usize {
        std::fs::read_to_string(self.dir.join("nodes")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }

    /// `kubectl ARGS` as the cluster's admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_in(args, None)
    }

    /// `kubectl ARGS` with `stdin` on its standard input.
    pub fn kubectl_in(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(&self.kubectl);
        cmd.args(args).env("KUBECONFIG", self.dir.join("kubeconfig"));
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
        if let Some(s) = stdin {
            use std::io::Write;
            let mut w = child.stdin.take().unwrap();
            w.write_all(s.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// `kubectl ARGS`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of these manifests (JSON or YAML).
    pub fn apply(&self, manifest: &str) -> String {
        let out = self.kubectl_in(&["apply", "-f", "-"], Some(manifest));
        assert!(out.status.success(), "kubectl apply failed: {}\n{manifest}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl get … -o json`, parsed.
    pub fn get(&self, args: &[&str]) -> Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// `scripts/node.sh ARGS` on this cluster (stop, start, restart a part; compact etcd).
    pub fn node_sh(&self, args: &[&str]) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/node.sh");
        let out = Command::new("bash").arg(script).args(args).env("BRAID_NODE_DIR", &self.dir).output().unwrap();
        assert!(out.status.success(), "node.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `program ARGS` in a node's network and mount namespaces; its output.
    pub fn on_node(&self, node: &str, program: &str, args: &[&str]) -> Output {
        let n = node.trim_start_matches("node");
        Command::new("nsenter")
            .arg(format!("--net={}/ns/node{n}.net", self.dir.display()))
            .arg(format!("--mount={}/ns/node{n}.mnt", self.dir.display()))
            .arg("--")
            .arg(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("nsenter {node} {program}: {e}"))
    }

    /// The files below `path` as a node sees it (relative paths, sorted; none if it is missing).
    pub fn files_on(&self, node: &str, path: &str) -> Vec<String> {
        let out = self.on_node(node, "find", &[path, "-mindepth", "1", "-type", "f"]);
        let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix(path).map(|r| r.trim_start_matches('/').to_string()))
            .collect();
        v.sort();
        v
    }

    /// A file's content as a node sees it.
    pub fn read_on(&self, node: &str, path: &str) -> Option<String> {
        let out = self.on_node(node, "cat", &[path]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes a file on a node (through its mount namespace).
    pub fn write_on(&self, node: &str, path: &str, content: &str) {
        let mut child = Command::new("nsenter")
            .arg(format!("--mount={}/ns/node{}.mnt", self.dir.display(), node.trim_start_matches("node")))
            .args(["--", "sh", "-c", "cat > \"$0\"", path])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(content.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "writing {path} on {node}");
    }

    /// The API server's audit log: one JSON event a line (`logs/audit.log`, level Metadata).
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("logs/audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The API server's audit events of braid's agents (their ServiceAccount).
    pub fn agent_requests(&self) -> Vec<Value> {
        self.audit()
            .into_iter()
            .filter(|e| e["user"]["username"] == "system:serviceaccount:kube-system:braid")
            .collect()
    }

    /// The agent's completed requests after audit event `mark` (an earlier
    /// `agent_requests().len()`), from `node`'s agent, as `verb resource[/subresource][ in ns]`.
    pub fn requests_of(&self, node: &str, mark: usize) -> Vec<String> {
        self.agent_requests()
            .into_iter()
            .skip(mark)
            .filter(|e| {
                e["stage"] == "ResponseComplete"
                    && e["user"]["extra"]["authentication.kubernetes.io/node-name"][0] == node
            })
            .map(|e| {
                let o = &e["objectRef"];
                let ns = o["namespace"].as_str().map(|n| format!(" in {n}")).unwrap_or_default();
                let sub = o["subresource"].as_str().map(|s| format!("/{s}")).unwrap_or_default();
                format!("{} {}{sub}{ns}", e["verb"].as_str().unwrap_or(""), o["resource"].as_str().unwrap_or(""))
            })
            .collect()
    }

    /// `kubectl describe pod`, for a failure's message.
    pub fn describe(&self, ns: &str, pod: &str) -> String {
        String::from_utf8_lossy(&self.kubectl(&["describe", "pod", pod, "-n", ns]).stdout).into_owned()
    }

    /// The messages of the pod's events with this reason (the kubelet's, the scheduler's,
    /// braid's agent's).
    pub fn pod_events(&self, ns: &str, pod: &str, reason: &str) -> Vec<String> {
        let sel = format!("involvedObject.name={pod},reason={reason}");
        let ev = self.get(&["events", "-n", ns, "--field-selector", &sel]);
        ev["items"].as_array().into_iter().flatten().filter_map(|e| e["message"].as_str().map(str::to_string)).collect()
    }

    /// Waits for at least `n` of the pod's events with this reason; their messages, sorted.
    pub fn wait_pod_events(&self, ns: &str, pod: &str, reason: &str, n: usize) -> Vec<String> {
        self.wait(
            &format!("{n} {reason} event(s) of {ns}/{pod}"),
            || self.pod_events(ns, pod, reason).len() >= n,
            || format!("{:?}\n{}", self.pod_events(ns, pod, reason), self.describe(ns, pod)),
        );
        let mut e = self.pod_events(ns, pod, reason);
        e.sort();
        e
    }

    /// A part's whole log (`logs/PART.log`).
    pub fn log_all(&self, part: &str) -> String {
        std::fs::read_to_string(self.dir.join("logs").join(format!("{part}.log"))).unwrap_or_default()
    }

    /// A part's log (`logs/PART.log`), for a failure's message.
    pub fn log(&self, part: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join("logs").join(format!("{part}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// braid's agent pod on a node (name, uid).
    pub fn agent_pod(&self, node: &str) -> (String, String) {
        let pods = self.get(&[
            "pods",
            "-n",
            "kube-system",
            "-l",
            "app.kubernetes.io/name=braid",
            "--field-selector",
            &format!("spec.nodeName={node}"),
        ]);
        let p = pods["items"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["metadata"]["deletionTimestamp"].is_null()))
            .unwrap_or_else(|| panic!("no braid agent pod on {node}: {pods}"));
        (p["metadata"]["name"].as_str().unwrap().into(), p["metadata"]["uid"].as_str().unwrap().into())
    }

    /// The agent's log on a node (`kubectl logs`).
    pub fn agent_log(&self, node: &str) -> String {
        let (pod, _) = self.agent_pod(node);
        let out = self.kubectl(&["logs", "-n", "kube-system", &pod, "--tail=60"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `f` holds; panics with `context()` after [`HANG_GUARD`].
    pub fn wait(&self, what: &str, f: impl FnMut() -> bool, context: impl Fn() -> String) {
        self.wait_up_to(HANG_GUARD, what, f, context)
    }

    /// [`Cluster::wait`] with another bound, for what a designed timeout longer than
    /// [`HANG_GUARD`] ends (the caller says which); still a bound for a stuck cluster, never a
    /// measurement.
    pub fn wait_up_to(&self, bound: Duration, what: &str, mut f: impl FnMut() -> bool, context: impl Fn() -> String) {
        let give_up = Instant::now() + bound;
        while !f() {
            if Instant::now() >= give_up {
                panic!("{what} did not happen (stuck):\n{}", context());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// A Kubernetes namespace of the test's own, deleted (with all it holds) on drop.
    pub fn namespace(&self, name: &str) -> Namespace<'_> {
        let _ = self.kubectl(&["delete", "namespace", name, "--ignore-not-found", "--wait=true"]);
        self.ok(&["create", "namespace", name]);
        // The namespace's default ServiceAccount (a pod needs it) comes from the controller manager.
        self.wait(
            &format!("the default ServiceAccount of {name}"),
            || self.kubectl(&["get", "serviceaccount", "default", "-n", name]).status.success(),
            || self.log("kube-controller-manager"),
        );
        Namespace { c: self, name: name.to_string() }
    }
}

/// A namespace that [`Cluster::namespace`] made; deleted on drop, its pods' DEL included.
#[derive(Debug)]
pub struct Namespace<'c> {
    c: &'c Cluster,
    /// Its name.
    pub name: String,
}

impl Drop for Namespace<'_> {
    fn drop(&mut self) {
        let _ = self.c.kubectl(&["delete", "namespace", &self.name, "--wait=true", "--timeout=180s"]);
    }
}

/// A pod `ns/name` of the busybox image that sleeps, on `node`, selecting `networks` (none: no
/// annotation).
pub fn pod(ns: &str, name: &str, node: &str, networks: Option<&str>) -> String {
    let annotations = match networks {
        Some(n) => serde_json::json!({ NETWORKS: n }),
        None => serde_json::json!({}),
    };
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never",
                            "command": ["sleep", "100000"]}]
        }
    })
    .to_string()
}

/// Runs its closure when dropped: a test's clean-up that also runs when the test fails.
pub struct Defer<F: FnMut()>(pub F);

impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}
