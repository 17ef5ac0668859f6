//! Debian's containerd 1.6 (CRI built in) as the runtime, one daemon per test, in the test's own
//! host namespace, with the test acting as the kubelet through [`crate::cri::Cri`].
//!
//! Its root, state, sockets, config, runc root, `opt` directory, CNI configuration directory and
//! CNI bin directory (one directory: symlinks to braid's binaries and the reference plugins) all
//! live in the test's directory; pod namespaces are mounted under its state directory. The
//! sandbox image is assembled on the spot around static busybox and imported with `ctr`; no
//! registry is ever contacted.
//!
//! On drop (also when a test panics) it stops and removes the pods still there, stops the daemon
//! and then its shims by PID, removes the shim sockets of its sandboxes from `/run/containerd/s`
//! (and the directories it created there, when empty), the libcni cache entries of its networks,
//! and unmounts what it mounted below the test's directory.
//!
//! Behind the crate's `cri` feature, as [`crate::cri`].
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use crate::cri::{Cri, CriError, PodSandboxConfig};
use crate::runtime::{
    busybox_rootfs_tar, remove_libcni_cache_entries, run_ok, stop_pid, stop_processes_mentioning, unmount_below,
    wait_for,
};
use crate::{build_dir, reference_plugins, Harness, BRAID_BINARIES};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The sandbox ("pause") image, built from static busybox.
pub const SANDBOX_IMAGE: &str = "localhost/braid-sandbox:test";

/// The tools a containerd test needs.
pub const COMMANDS: &[&str] = &["containerd", "containerd-shim-runc-v2", "ctr", "runc", "nsenter", "tar", "sha256sum"];

/// Where containerd 1.6 keeps shim sockets whatever its configuration says.
const SHIM_SOCKETS: &str = "/run/containerd/s";

/// A containerd of the test's own.
#[derive(Debug)]
pub struct Containerd {
    /// Host namespace, work directory (IPAM data and state dirs belong here too).
    pub h: Harness,
    dir: PathBuf,
    socket: PathBuf,
    /// The daemon (behind a lock: a soak restarts it while workers use it).
    child: std::sync::Mutex<Option<Child>>,
    cri: Option<Cri>,
    /// Sandboxes not yet removed.
    pods: Vec<String>,
    /// Every sandbox this test created (their shim sockets are removed on drop).
    created: Vec<String>,
    networks: Vec<String>,
    /// Directories of `/run/containerd` that did not exist before this daemon.
    made_dirs: Vec<PathBuf>,
}

impl Containerd {
    /// A fresh host namespace and work directory; `networks` (conflists) in the CNI configuration
    /// directory, loaded in this order (eth0, eth1, … up to `max_conf_num`); the daemon started
    /// and the sandbox image imported; returns once CRI reports every network loaded.
    pub fn start(tag: &str, networks: impl FnOnce(&Harness) -> Vec<Value>, max_conf_num: usize) -> Containerd {
        let h = Harness::new(tag);
        let lists = networks(&h);
        let dir = h.dir.path().join("containerd");
        let (net_dir, bin_dir) = (dir.join("net.d"), dir.join("cni-bin"));
        for p in [&dir, &net_dir, &bin_dir] {
            std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
        // One bin_dir: braid's binaries and the reference plugins side by side.
        let refs = std::fs::read_dir(reference_plugins()).into_iter().flatten().flatten().map(|e| e.path());
        for target in BRAID_BINARIES.iter().map(|b| build_dir().join(b)).chain(refs) {
            if let Some(name) = target.file_name() {
                std::os::unix::fs::symlink(&target, bin_dir.join(name))
                    .unwrap_or_else(|e| panic!("symlink {}: {e}", target.display()));
            }
        }
        let mut names = Vec::new();
        for (i, list) in lists.iter().enumerate() {
            let name = list["name"].as_str().unwrap_or_else(|| panic!("conflist without a name: {list}")).to_string();
            let path = net_dir.join(format!("{}-{name}.conflist", 10 + i));
            std::fs::write(&path, serde_json::to_vec_pretty(list).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            names.push(name);
        }
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(&config, config_toml(&dir, &socket, &net_dir, &bin_dir, max_conf_num))
            .unwrap_or_else(|e| panic!("{}: {e}", config.display()));

        let made_dirs =
            ["/run/containerd", SHIM_SOCKETS].iter().map(PathBuf::from).filter(|p| !p.exists()).collect::<Vec<_>>();
        let child = spawn_daemon(&h, &dir);
        let mut c = Containerd {
            h,
            dir,
            socket,
            child: std::sync::Mutex::new(Some(child)),
            cri: None,
            pods: Vec::new(),
            created: Vec::new(),
            networks: names,
            made_dirs,
        };
        let up = wait_for(Duration::from_secs(20), || c.socket.exists().then_some(()));
        assert!(up.is_some(), "containerd did not open its socket:\n{}", c.log());
        c.import_sandbox_image();
        c.cri = Some(Cri::connect(&c.socket, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}")));
        c.wait_networks_loaded();
        c
    }

    /// SIGKILLs the daemon (its shims live on, as on a node) and starts it again on the same
    /// root, state and configuration; returns once its socket is back. Clients made with
    /// [`Self::client`] reconnect by themselves; [`Self::cri`] after [`Self::reconnect`].
    pub fn kill_and_restart(&self) {
        let mut child = self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(mut c) = child.take() {
            let _ = Command::new("kill").args(["-KILL", &c.id().to_string()]).status();
            let _ = c.wait();
        }
        // A socket file a killed daemon left would answer nothing: the new daemon makes its own.
        let _ = std::fs::remove_file(&self.socket);
        *child = Some(spawn_daemon(&self.h, &self.dir));
        let up = wait_for(Duration::from_secs(20), || self.socket.exists().then_some(()));
        assert!(up.is_some(), "containerd did not open its socket again:\n{}", self.log());
    }

    /// A new [`Self::cri`] client (after [`Self::kill_and_restart`]), once CRI reports the
    /// last network loaded again (the one a pod gets with `max_conf_num = 1`).
    pub fn reconnect(&mut self) {
        self.cri = Some(Cri::connect(&self.socket, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}")));
        if let Some(name) = self.networks.pop() {
            self.wait_network_loaded(&name);
        }
    }

    /// A CRI client of its own (a kubelet worker's), or why none: the daemon may be down.
    pub fn client(&self) -> Result<Cri, String> {
        Cri::connect(&self.socket, Duration::from_secs(60))
    }

    /// Sandboxes created by other clients ([`Self::client`]): their shim sockets and, while
    /// they exist, the sandboxes themselves are removed on drop like this test's own.
    pub fn adopt(&mut self, ids: impl IntoIterator<Item = String>) {
        for id in ids {
            if !self.created.contains(&id) {
                self.created.push(id.clone());
                self.pods.push(id);
            }
        }
    }

    /// Forgets sandboxes removed through another client.
    pub fn removed(&mut self, id: &str) {
        self.pods.retain(|p| p != id);
    }

    /// The CRI client.
    pub fn cri(&self) -> &Cri {
        self.cri.as_ref().unwrap_or_else(|| panic!("CRI client gone"))
    }

    /// The networks' names, in load order.
    pub fn networks(&self) -> &[String] {
        &self.networks
    }

    /// The CNI configuration directory the daemon reads.
    pub fn net_dir(&self) -> PathBuf {
        self.dir.join("net.d")
    }

    /// The CNI bin directory the daemon runs plugins from.
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("cni-bin")
    }

    /// Waits until CRI reports a network named `name` loaded (written into [`Self::net_dir`]
    /// after the start, e.g. by an installer), and cleans its libcni cache entries on drop.
    pub fn wait_network_loaded(&mut self, name: &str) {
        let mut last = String::new();
        let ok = wait_for(Duration::from_secs(20), || {
            let s = self.cri().status().ok()?;
            last = s.cni_config().to_string();
            s.network_loaded(name).then_some(())
        });
        assert!(ok.is_some(), "CRI never loaded the network {name:?}; cniconfig: {last}\n{}", self.log());
        self.networks.push(name.to_string());
    }

    /// containerd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    fn import_sandbox_image(&self) {
        let img = self.dir.join("image");
        let layer = img.join("layer.tar");
        busybox_rootfs_tar(&img.join("rootfs"), &["sleep", "sh"], &layer);
        let digest = run_ok(Command::new("sha256sum").arg(&layer));
        let digest = digest.split_whitespace().next().unwrap_or_default();
        let config = json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Entrypoint": ["/bin/sleep"], "Cmd": ["2147483647"]},
            "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{digest}")]}
        });
        let manifest = json!([{"Config": "config.json", "RepoTags": [SANDBOX_IMAGE], "Layers": ["layer.tar"]}]);
        std::fs::write(img.join("config.json"), config.to_string()).unwrap_or_else(|e| panic!("config.json: {e}"));
        std::fs::write(img.join("manifest.json"), manifest.to_string())
            .unwrap_or_else(|e| panic!("manifest.json: {e}"));
        let archive = self.dir.join("sandbox-image.tar");
        run_ok(Command::new("tar").arg("-C").arg(&img).arg("-cf").arg(&archive).args([
            "manifest.json",
            "config.json",
            "layer.tar",
        ]));
        run_ok(
            Command::new("ctr")
                .arg("--address")
                .arg(&self.socket)
                .args(["-n", "k8s.io", "images", "import"])
                .arg(&archive),
        );
    }

    /// Waits until the CRI plugin reports NetworkReady and its CNI configuration names every
    /// network of this test.
    fn wait_networks_loaded(&self) {
        let mut last = String::new();
        let ok = wait_for(Duration::from_secs(20), || {
            let s = self.cri().status().ok()?;
            last = s.cni_config().to_string();
            (s.network_ready() && self.networks.iter().all(|n| s.network_loaded(n))).then_some(())
        });
        assert!(ok.is_some(), "CRI never loaded the networks {:?}; cniconfig: {last}\n{}", self.networks, self.log());
    }

    /// RunPodSandbox of a pod `name` in namespace `braid-test` with these annotations.
    pub fn run_pod(&mut self, name: &str, annotations: &[(&str, &str)]) -> Result<String, CriError> {
        let id = self.cri().run_pod_sandbox(PodSandboxConfig::pod("braid-test", name, annotations))?;
        self.pods.push(id.clone());
        self.created.push(id.clone());
        Ok(id)
    }

    /// The pod IP and the additional ones, as PodSandboxStatus reports them.
    pub fn pod_ips(&self, id: &str) -> Vec<String> {
        self.cri().pod_sandbox_status(id).unwrap_or_else(|e| panic!("PodSandboxStatus: {e}")).ips()
    }

    /// The pod's network namespace, from PodSandboxStatus' verbose info (the runtime spec).
    pub fn pod_netns(&self, id: &str) -> PathBuf {
        let s = self.cri().pod_sandbox_status(id).unwrap_or_else(|e| panic!("PodSandboxStatus: {e}"));
        s.netns().unwrap_or_else(|| panic!("no network namespace in the sandbox's info: {:?}", s.info.get("info")))
    }

    /// StopPodSandbox then RemovePodSandbox; panics on failure.
    pub fn stop_and_remove(&mut self, id: &str) {
        self.cri().stop_pod_sandbox(id).unwrap_or_else(|e| panic!("StopPodSandbox: {e}\n{}", self.log()));
        self.cri().remove_pod_sandbox(id).unwrap_or_else(|e| panic!("RemovePodSandbox: {e}\n{}", self.log()));
        self.pods.retain(|p| p != id);
    }

    /// Pod network namespaces still mounted under the state directory.
    pub fn pod_namespaces(&self) -> Vec<String> {
        let d = self.dir.join("state/io.containerd.grpc.v1.cri/netns");
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The daemon's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Shim sockets of this test's sandboxes still present.
    pub fn shim_sockets_left(&self) -> Vec<PathBuf> {
        self.created.iter().filter_map(|id| shim_socket(&self.socket, id)).filter(|p| p.exists()).collect()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        for id in std::mem::take(&mut self.pods) {
            if let Some(cri) = &self.cri {
                let _ = cri.stop_pod_sandbox(&id);
                let _ = cri.remove_pod_sandbox(&id);
            }
        }
        drop(self.cri.take());
        let child = self.child.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(mut child) = child {
            // nsenter execs containerd: the child's PID is the daemon's.
            stop_pid(child.id(), Duration::from_secs(10));
            let _ = child.wait();
        }
        // Shims outlive the daemon; they name its socket in their arguments.
        stop_processes_mentioning(&self.socket.display().to_string(), Duration::from_secs(3));
        for p in self.created.iter().filter_map(|id| shim_socket(&self.socket, id)) {
            let _ = std::fs::remove_file(p);
        }
        for d in self.made_dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        remove_libcni_cache_entries(&self.networks);
        unmount_below(self.h.dir.path());
    }
}

/// The shim socket of a sandbox of the daemon at `socket` (containerd 1.6:
/// `/run/containerd/s/<sha256 of "<address>/<namespace>/<id>">`, whatever its configuration
/// says); `None` if `sha256sum` cannot be run. Never panics: a panic hook calls it.
pub fn shim_socket(socket: &Path, id: &str) -> Option<PathBuf> {
    use std::io::Write;
    let mut child = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().ok()?;
    if let Some(mut i) = child.stdin.take() {
        let _ = write!(i, "{}/k8s.io/{id}", socket.display());
    }
    let out = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(Path::new(SHIM_SOCKETS).join(text.split_whitespace().next()?))
}

/// Starts containerd in the test's host namespace on the configuration in `dir`, its output
/// appended to `containerd.log`. `nsenter` execs containerd: the child's PID is the daemon's.
fn spawn_daemon(h: &Harness, dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("containerd.log"))
        .unwrap_or_else(|e| panic!("containerd.log: {e}"));
    let err = log.try_clone().unwrap_or_else(|e| panic!("containerd.log: {e}"));
    Command::new("nsenter")
        .arg(format!("--net={}", h.host.path().display()))
        .arg("containerd")
        .arg("--config")
        .arg(dir.join("config.toml"))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("starting containerd: {e}"))
}

fn config_toml(dir: &Path, socket: &Path, net_dir: &Path, bin_dir: &Path, max_conf_num: usize) -> String {
    let q = |p: &Path| Value::from(p.display().to_string()).to_string();
    format!(
        r#"version = 2
root = {root}
state = {state}
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = {runc}

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {bin}
    conf_dir = {net}
    max_conf_num = {max_conf_num}
"#,
        root = q(&dir.join("root")),
        state = q(&dir.join("state")),
        socket = q(socket),
        ttrpc = q(&dir.join("containerd.sock.ttrpc")),
        opt = q(&dir.join("opt")),
        image = SANDBOX_IMAGE,
        runc = q(&dir.join("runc")),
        bin = q(bin_dir),
        net = q(net_dir),
    )
}
