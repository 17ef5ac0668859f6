//! Debian's podman 4.3 with its CNI backend as the runtime, inside a test's own host namespace.
//!
//! Every podman command runs as `nsenter --net=/run/netns/<host> podman …` (`ip netns exec`
//! would remount `/sys`, and runc would then find no cgroups) with a `containers.conf` and a
//! `storage.conf` of the test's own: storage root, run root, temporary directory, locks, events
//! and CNI network configurations all live in the test's directory, and the plugin directories
//! are braid's build directory and the reference plugins. The image is built on the spot from
//! static busybox (`podman import`); no registry is ever contacted.
//!
//! On drop (also when a test panics) it force-removes every container, stops by PID what podman
//! left running from the test's directory, unmounts what storage mounted there, removes the
//! libcni cache entries of the test's networks, and then the namespace and the directory.

use crate::runtime::{busybox_rootfs_tar, remove_libcni_cache_entries, stop_processes_mentioning, unmount_below};
use crate::{build_dir, reference_plugins, Harness};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The image every test container runs: static busybox with a few applets.
pub const IMAGE: &str = "localhost/braid-busybox:test";

/// The applets of [`IMAGE`].
pub const APPLETS: &[&str] = &["sh", "ip", "cat", "sleep", "ls", "true"];

/// A podman of the test's own.
#[derive(Debug)]
pub struct Podman {
    /// Host namespace, work directory (IPAM data and state dirs belong here too).
    pub h: Harness,
    root: PathBuf,
    runroot: PathBuf,
    conf: PathBuf,
    storage_conf: PathBuf,
    net_dir: PathBuf,
    networks: Vec<String>,
}

/// The tools a podman test needs.
pub const COMMANDS: &[&str] = &["podman", "conmon", "runc", "nsenter", "tar"];

impl Podman {
    /// A fresh host namespace and configuration, with [`IMAGE`] imported.
    pub fn new(tag: &str) -> Podman {
        let h = Harness::new(tag);
        let d = h.dir.path().join("podman");
        let (root, runroot, tmp, net_dir) = (d.join("root"), d.join("run"), d.join("tmp"), d.join("net"));
        for p in [&root, &runroot, &tmp, &net_dir] {
            std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
        let q = |p: &Path| Value::from(p.display().to_string()).to_string();
        let conf = d.join("containers.conf");
        let text = format!(
            "[containers]\n\
             log_driver = \"k8s-file\"\n\
             default_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n\
             [engine]\n\
             cgroup_manager = \"cgroupfs\"\n\
             events_logger = \"file\"\n\
             events_logfile_path = {events}\n\
             runtime = \"runc\"\n\
             lock_type = \"file\"\n\
             tmp_dir = {tmp}\n\
             static_dir = {static_dir}\n\
             volume_path = {volumes}\n\
             [network]\n\
             network_backend = \"cni\"\n\
             cni_plugin_dirs = [{bin}, {refs}]\n\
             network_config_dir = {net}\n\
             default_network = \"braid-unused\"\n\
             default_subnet = \"198.19.255.0/24\"\n",
            events = q(&d.join("events.log")),
            tmp = q(&tmp),
            static_dir = q(&root.join("libpod")),
            volumes = q(&root.join("volumes")),
            bin = q(&build_dir()),
            refs = q(reference_plugins()),
            net = q(&net_dir),
        );
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("{}: {e}", conf.display()));
        let storage_conf = d.join("storage.conf");
        let text = format!("[storage]\ngraphroot = {}\nrunroot = {}\n", q(&root), q(&runroot));
        std::fs::write(&storage_conf, text).unwrap_or_else(|e| panic!("{}: {e}", storage_conf.display()));
        let p = Podman { h, root, runroot, conf, storage_conf, net_dir, networks: Vec::new() };
        let rootfs = d.join("rootfs");
        let tar = d.join("rootfs.tar");
        busybox_rootfs_tar(&rootfs, APPLETS, &tar);
        let out = p.podman(&["import", &tar.display().to_string(), IMAGE]);
        assert!(out.status.success(), "podman import: {}", String::from_utf8_lossy(&out.stderr));
        p
    }

    /// Writes a conflist into podman's network directory; returns its name.
    pub fn add_network(&mut self, list: &Value) -> String {
        let name = list["name"].as_str().unwrap_or_else(|| panic!("conflist without a name: {list}")).to_string();
        let path = self.net_dir.join(format!("{name}.conflist"));
        let bytes = serde_json::to_vec_pretty(list).unwrap_or_default();
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self.networks.push(name.clone());
        name
    }

    /// The names of the networks added.
    pub fn networks(&self) -> &[String] {
        &self.networks
    }

    /// The command line that runs this test's podman (`nsenter --net=… podman --root … --runroot …`),
    /// for scripts that take a `PODMAN` variable; pair it with [`Podman::env`].
    pub fn command_line(&self) -> String {
        format!(
            "nsenter --net={} podman --root {} --runroot {}",
            self.h.host.path().display(),
            self.root.display(),
            self.runroot.display()
        )
    }

    /// The environment this test's podman needs (`CONTAINERS_CONF`, `CONTAINERS_STORAGE_CONF`).
    pub fn env(&self) -> [(&'static str, PathBuf); 2] {
        [("CONTAINERS_CONF", self.conf.clone()), ("CONTAINERS_STORAGE_CONF", self.storage_conf.clone())]
    }

    /// Runs `podman <args>` in the host namespace with this test's configuration.
    pub fn podman(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", self.h.host.path().display()))
            .arg("podman")
            .arg("--root")
            .arg(&self.root)
            .arg("--runroot")
            .arg(&self.runroot)
            .args(args)
            .env("CONTAINERS_CONF", &self.conf)
            .env("CONTAINERS_STORAGE_CONF", &self.storage_conf)
            .stdin(std::process::Stdio::null());
        cmd.output().unwrap_or_else(|e| panic!("running podman: {e}"))
    }

    /// `podman run --rm --network <networks> IMAGE <cmd>`: the container's stdout, or podman's
    /// stderr when it fails.
    pub fn run(&self, networks: &[&str], cmd: &[&str]) -> Result<String, String> {
        let nets = networks.join(",");
        let mut args = vec!["run", "--rm", "--pull", "never", "--network", &nets, IMAGE];
        args.extend_from_slice(cmd);
        let out = self.podman(&args);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// The containers podman still knows (`podman ps -aq`).
    pub fn containers(&self) -> Vec<String> {
        let out = self.podman(&["ps", "-aq"]);
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.podman(&["rm", "--all", "--force", "--time", "0"]);
        let dir = self.h.dir.path().display().to_string();
        // conmon and podman's cleanup processes name the test's directories in their arguments.
        stop_processes_mentioning(&dir, Duration::from_secs(5));
        unmount_below(self.h.dir.path());
        remove_libcni_cache_entries(&self.networks);
    }
}
