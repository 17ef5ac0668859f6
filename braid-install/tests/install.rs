//! braid-install against temporary "host" directories: the binary is run as the DaemonSet runs
//! it, with `--host-root` pointing at a test directory. No root needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::{json, Value};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_braid-install");

static SEQ: AtomicU32 = AtomicU32::new(0);

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "braid-install-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fake node: host root with the conf dir, and a source dir of "plugins".
struct Node {
    dir: TempDir,
}

impl Node {
    fn new(tag: &str) -> Node {
        let n = Node { dir: TempDir::new(tag) };
        std::fs::create_dir_all(n.conf_dir()).unwrap();
        std::fs::create_dir_all(n.src()).unwrap();
        for b in braid_install::options::BINARIES {
            std::fs::write(n.src().join(b), format!("#!/bin/sh\n# {b} v1\n")).unwrap();
        }
        n
    }
    fn root(&self) -> PathBuf {
        self.dir.0.join("host")
    }
    fn src(&self) -> PathBuf {
        self.dir.0.join("src")
    }
    fn conf_dir(&self) -> PathBuf {
        self.root().join("etc/cni/net.d")
    }
    fn bin_dir(&self) -> PathBuf {
        self.root().join("opt/cni/bin")
    }
    fn networks_dir(&self) -> PathBuf {
        self.root().join("etc/cni/braid.d")
    }
    fn conf(&self) -> PathBuf {
        self.conf_dir().join("00-braid.conflist")
    }
    fn write_conf(&self, file: &str, v: &Value) {
        std::fs::write(self.conf_dir().join(file), serde_json::to_vec_pretty(v).unwrap()).unwrap();
    }
    fn braid(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.conf()).unwrap()).unwrap()
    }
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut a = vec![
            "--host-root".to_string(),
            self.root().display().to_string(),
            "--source-dir".into(),
            self.src().display().to_string(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }
    fn run(&self, extra: &[&str]) -> Output {
        Command::new(BIN).args(self.args(extra)).stdin(Stdio::null()).output().unwrap()
    }
    fn spawn(&self, extra: &[&str]) -> Installer {
        let log = self.dir.0.join(format!("log{}", SEQ.fetch_add(1, Ordering::SeqCst)));
        let f = std::fs::File::create(&log).unwrap();
        let child = Command::new(BIN).args(self.args(extra)).stdin(Stdio::null()).stderr(f).spawn().unwrap();
        Installer { child: Some(child), log }
    }
}

/// A long-running installer, stopped (by its PID) on drop.
struct Installer {
    child: Option<Child>,
    log: PathBuf,
}

impl Installer {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn term(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
        let status = c.wait().unwrap();
        status.code()
    }
}

impl Drop for Installer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls `f` until it yields. The bound is a hang guard, far beyond anything a working
/// installer needs: only a broken one (that never gets there) reaches it.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..1200 {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("never saw {what}");
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn bridge(name: &str, version: &str) -> Value {
    json!({"cniVersion": version, "name": name, "plugins": [
        {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local", "subnet": "198.18.0.0/24"}},
        {"type": "portmap", "capabilities": {"portMappings": true}},
        {"type": "bandwidth", "capabilities": {"bandwidth": true, "ips": false}}
    ]})
}

fn no_temp_files(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".braid-tmp"))
        .collect();
    assert!(left.is_empty(), "temp files left in {}: {left:?}", dir.display());
}

#[test]
fn once_copies_the_plugins_and_skips_unchanged_ones() {
    let n = Node::new("copy");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut inodes = Vec::new();
    for b in braid_install::options::BINARIES {
        let p = n.bin_dir().join(b);
        assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(n.src().join(b)).unwrap());
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o755, "{b}");
        inodes.push(m.ino());
        assert!(stderr(&out).contains(&format!("installed {}", p.display())), "{}", stderr(&out));
    }
    no_temp_files(&n.bin_dir());
    // Again: nothing rewritten.
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("is unchanged").count(),
        braid_install::options::BINARIES.len(),
        "{}",
        stderr(&out)
    );
    for (b, ino) in braid_install::options::BINARIES.iter().zip(&inodes) {
        assert_eq!(std::fs::metadata(n.bin_dir().join(b)).unwrap().ino(), *ino, "{b} rewritten");
    }
    // A new merger: only it is replaced (a new inode, by rename).
    std::fs::write(n.src().join("merger"), "#!/bin/sh\n# merger v2\n").unwrap();
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("is unchanged").count(),
        braid_install::options::BINARIES.len() - 1,
        "{}",
        stderr(&out)
    );
    assert_ne!(std::fs::metadata(n.bin_dir().join("merger")).unwrap().ino(), inodes[1]);
    assert_eq!(std::fs::read_to_string(n.bin_dir().join("merger")).unwrap(), "#!/bin/sh\n# merger v2\n");
}

/// A plugin that is running while it is replaced: no ETXTBSY, the running one keeps its inode.
#[test]
fn a_running_plugin_is_replaced_without_etxtbsy() {
    let n = Node::new("busy");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    std::fs::create_dir_all(n.bin_dir()).unwrap();
    let running = n.bin_dir().join("delegator");
    std::fs::copy("/bin/sleep", &running).unwrap();
    // Another test's fork may still hold the copy's write descriptor for a moment (the
    // ETXTBSY race every exec of a fresh file has; RawExec retries the same way).
    let mut sleeper = (0..50)
        .find_map(|_| match Command::new(&running).arg("30").spawn() {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
            other => Some(other.unwrap()),
        })
        .unwrap();
    // Writing into it in place would fail now.
    let in_place = std::fs::OpenOptions::new().write(true).open(&running);
    assert_eq!(in_place.err().and_then(|e| e.raw_os_error()), Some(nix::libc::ETXTBSY));
    let out = n.run(&["--once"]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&running).unwrap(), std::fs::read(n.src().join("delegator")).unwrap());
}

#[test]
fn a_missing_plugin_source_fails_with_code_4_before_anything_is_written() {
    let n = Node::new("nosrc");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    std::fs::remove_file(n.src().join("verifier")).unwrap();
    let out = n.run(&["--once"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("verifier") && stderr(&out).contains("--source-dir"), "{}", stderr(&out));
    assert!(!n.bin_dir().join("delegator").exists());
    assert!(!n.conf().exists());
}

#[test]
fn the_generated_conflist_wraps_the_primary_by_reference() {
    let n = Node::new("gen");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "0.4.0"));
    let out = n.run(&["--once", "--global-namespaces", "default,infra"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = n.braid();
    assert_eq!(
        v,
        json!({
            "cniVersion": "0.4.0",
            // libcni >= 1.2 runs braid as 1.1.0 (STATUS, GC); older libcni as the primary's.
            "cniVersions": ["0.4.0", "1.1.0"],
            "name": "braid",
            "plugins": [{
                "type": "delegator",
                "capabilities": {"portMappings": true, "bandwidth": true, "io.kubernetes.cri.pod-annotations": true},
                // The node's path, as the delegator sees it: not below --host-root.
                "confDir": "/etc/cni/net.d",
                "stateDir": "/var/lib/cni/braid",
                "delegates": [{"network": "cbr0"}],
                "kubernetes": {"networksDir": "/etc/cni/braid.d", "globalNamespaces": ["default", "infra"],
                               "statusDir": "/run/braid/network-status",
                               // --pod-resources-socket's default: the kubelet's own socket,
                               // opened only for networks that name a device resource.
                               "podResourcesSocket": "/var/lib/kubelet/pod-resources/kubelet.sock",
                               // Where a bare default-network name resolves (Multus's
                               // multusNamespace default); the pod's own namespace is opt-in.
                               "defaultNetworkNamespace": "kube-system", "defaultNetworkPodNamespace": false,
                               // --dra-claims-dir's default: the DRA driver's claim records.
                               "claimsDir": "/var/lib/braid/claims",
                               // --dra-devices-file's default: the node's DRA devices record.
                               "draDevicesFile": "/var/lib/braid/dra-devices/devices.json"}
            }]
        })
    );
    // It parses as the runtimes parse it.
    let list = cni_types::NetConfList::parse(&std::fs::read(n.conf()).unwrap()).unwrap();
    assert_eq!(list.cni_version, "1.1.0");
    assert_eq!(std::fs::metadata(n.conf()).unwrap().permissions().mode() & 0o777, 0o644);
    no_temp_files(&n.conf_dir());
    assert!(braid_install::fsutil::temp_path(&n.conf()).extension().is_some_and(|e| e == "braid-tmp"));
    // The delegator's state directory exists, private; its status directory 0755, as the
    // delegator's README promises (its documents are 0644: what the pod's annotation shows).
    for (d, mode) in [("var/lib/cni/braid", 0o700), ("run/braid/network-status", 0o755)] {
        let m = std::fs::metadata(n.root().join(d)).unwrap();
        assert!(m.is_dir(), "{d}");
        assert_eq!(m.permissions().mode() & 0o777, mode, "{d}");
    }
}

#[test]
fn the_state_files_dels_retired_are_unlinked_and_nothing_else_in_the_state_directory() {
    let n = Node::new("retired");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    let state = n.root().join("var/lib/cni/braid");
    let retired = state.join(braid_attach::state::RETIRED);
    std::fs::create_dir_all(&retired).unwrap();
    for pid in ["101", "202"] {
        std::fs::write(retired.join(pid), "{\"a retired plan\": true}").unwrap();
    }
    // A live attachment's state and the directory's owner claim are not the agent's to touch.
    std::fs::write(state.join("c0ffee@eth0"), "{}").unwrap();
    std::fs::write(state.join(braid_attach::owner::OWNER_FILE), "delegator").unwrap();
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let names = |d: &std::path::Path| {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    assert_eq!(names(&retired), Vec::<String>::new());
    assert_eq!(names(&state), [".braid-owner", ".retired", "c0ffee@eth0"]);
}

#[test]
fn the_primary_is_the_lexically_first_usable_file_that_is_not_braids() {
    let n = Node::new("detect");
    n.write_conf("10-flannel.conflist", &bridge("flannel", "1.0.0"));
    n.write_conf("05-cilium.conflist", &bridge("cilium", "0.3.1"));
    std::fs::write(n.conf_dir().join("01-broken.conflist"), "{ not json").unwrap();
    n.write_conf(
        "02-other-braid.conflist",
        &json!({"cniVersion": "1.0.0", "name": "braid", "plugins": [{"type": "delegator"}]}),
    );
    std::fs::write(n.conf_dir().join("00-aaa.txt"), "ignored: not a CNI extension").unwrap();
    std::fs::create_dir_all(n.conf_dir().join("00-dir.conf")).unwrap();
    n.write_conf("00-braid.conflist", &json!({"stale": true}));
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = n.braid();
    assert_eq!(v["plugins"][0]["delegates"], json!([{"network": "cilium"}]));
    assert_eq!(v["cniVersion"], "0.3.1");
    let log = stderr(&out);
    assert!(log.contains("01-broken.conflist") && log.contains("02-other-braid.conflist"), "{log}");
}

#[test]
fn a_single_plugin_conf_file_can_be_the_primary() {
    let n = Node::new("conf");
    n.write_conf(
        "10-calico.conf",
        &json!({"cniVersion": "0.3.1", "name": "k8s-pod-network", "type": "calico", "capabilities": {"portMappings": true}}),
    );
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = n.braid();
    assert_eq!(v["plugins"][0]["delegates"], json!([{"network": "k8s-pod-network"}]));
    assert_eq!(
        v["plugins"][0]["capabilities"],
        json!({"portMappings": true, "io.kubernetes.cri.pod-annotations": true})
    );
}

#[test]
fn an_explicit_primary_in_a_private_dir_sets_conf_dir_to_that_dir() {
    let n = Node::new("explicit");
    let private = n.root().join("etc/cni/net.d-real");
    std::fs::create_dir_all(&private).unwrap();
    std::fs::write(private.join("10-flannel.conflist"), serde_json::to_vec(&bridge("cbr0", "1.0.0")).unwrap()).unwrap();
    n.write_conf("05-decoy.conflist", &bridge("decoy", "1.0.0"));
    let out = n.run(&["--once", "--primary", "/etc/cni/net.d-real/10-flannel.conflist"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = n.braid();
    assert_eq!(v["plugins"][0]["delegates"], json!([{"network": "cbr0"}]));
    assert_eq!(v["plugins"][0]["confDir"], "/etc/cni/net.d-real");
}

#[test]
fn waiting_for_the_primary_is_bounded_and_logged() {
    let n = Node::new("waitfail");
    // Bounded: it gives up (that it waits for a primary that comes is
    // `braids_config_appears_once_the_primary_does`).
    let out = n.run(&["--once", "--wait", "2"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let log = stderr(&out);
    assert!(log.contains("waiting for the primary network (0 s so far)"), "{log}");
    assert!(log.contains("no primary network") && log.contains("after 2 s"), "{log}");
    assert!(!n.conf().exists());
    // The binaries are in place already: the runtime may find them before the config.
    assert!(n.bin_dir().join("delegator").exists());
}

#[test]
fn braids_config_appears_once_the_primary_does() {
    let n = Node::new("waitok");
    let mut inst = n.spawn(&["--once", "--wait", "300"]);
    wait_for("the installer waiting", || inst.log().contains("waiting for the primary network").then_some(()));
    assert!(!n.conf().exists(), "written before the primary existed");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    let status = wait_for("--once to finish", || inst.child.as_mut().and_then(|c| c.try_wait().ok().flatten()));
    inst.child = None;
    assert!(status.success(), "{}", inst.log());
    assert_eq!(n.braid()["plugins"][0]["delegates"], json!([{"network": "cbr0"}]));
    assert!(inst.log().contains("waiting for the primary network"), "{}", inst.log());
}

#[test]
fn bad_inputs_fail_with_their_exit_codes() {
    let n = Node::new("bad");
    let out = n.run(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    std::fs::write(n.conf_dir().join("10-garbage.conflist"), "[1,2,3]").unwrap();
    let out = n.run(&["--once", "--wait", "1", "--primary", "/etc/cni/net.d/10-garbage.conflist"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("10-garbage.conflist"), "{}", stderr(&out));
    n.write_conf("20-self.conflist", &bridge("braid", "1.0.0"));
    let out = n.run(&["--once", "--wait", "1", "--primary", "/etc/cni/net.d/20-self.conflist"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("braid's own network"), "{}", stderr(&out));
    n.write_conf("30-ok.conflist", &bridge("cbr0", "1.0.0"));
    let out = n.run(&["--once", "--networks-configmap", "/nonexistent/braid-networks"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(!n.conf().exists());
}

#[test]
fn the_conflist_is_regenerated_when_the_primarys_name_version_or_capabilities_change() {
    let n = Node::new("regen");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    let mut inst = n.spawn(&["--wait", "0"]);
    wait_for("the first conflist", || n.conf().exists().then_some(()));
    let ino = std::fs::metadata(n.conf()).unwrap().ino();
    // The primary's IPAM changes: the delegator reads it at ADD, nothing to regenerate.
    let mut p = bridge("cbr0", "1.0.0");
    p["plugins"][0]["ipam"]["subnet"] = json!("198.18.1.0/24");
    n.write_conf("10-flannel.conflist", &p);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(std::fs::metadata(n.conf()).unwrap().ino(), ino, "rewritten without a reason:\n{}", inst.log());
    // A capability.
    p["plugins"][0]["capabilities"] = json!({"mac": true});
    n.write_conf("10-flannel.conflist", &p);
    wait_for("the new capability", || (n.braid()["plugins"][0]["capabilities"]["mac"] == true).then_some(()));
    // The version.
    p["cniVersion"] = json!("0.4.0");
    n.write_conf("10-flannel.conflist", &p);
    wait_for("the new version", || (n.braid()["cniVersion"] == "0.4.0").then_some(()));
    // The name.
    p["name"] = json!("cbr1");
    n.write_conf("10-flannel.conflist", &p);
    wait_for("the new name", || (n.braid()["plugins"][0]["delegates"][0]["network"] == "cbr1").then_some(()));
    // A new file that sorts first becomes the primary (Cilium installed after flannel).
    n.write_conf("05-cilium.conflist", &bridge("cilium", "1.0.0"));
    wait_for("the new primary", || (n.braid()["plugins"][0]["delegates"][0]["network"] == "cilium").then_some(()));
    // braid's file removed by someone: put back.
    std::fs::remove_file(n.conf()).unwrap();
    wait_for("the conflist put back", || n.conf().exists().then_some(()));
    // Every primary gone: braid's file stays (pods must not start without their networks).
    std::fs::remove_file(n.conf_dir().join("05-cilium.conflist")).unwrap();
    std::fs::remove_file(n.conf_dir().join("10-flannel.conflist")).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(n.conf().exists());
    let code = inst.term();
    assert_eq!(code, Some(0), "{}", inst.log());
    assert!(n.conf().exists(), "removed on exit");
    no_temp_files(&n.conf_dir());
    let log = inst.log();
    assert!(log.contains("stopping on SIGTERM"), "{log}");
    assert!(log.contains("the primary network is gone"), "{log}");
    assert_eq!(log.matches("the primary network is gone").count(), 1, "logged every tick:\n{log}");
}

/// A kubelet-style ConfigMap volume: `..<ts>/` holds the keys, `..data` points at it, each key
/// is a symlink through `..data`.
struct ConfigMapVolume {
    dir: PathBuf,
    gen: u32,
}

impl ConfigMapVolume {
    fn new(dir: PathBuf) -> ConfigMapVolume {
        std::fs::create_dir_all(&dir).unwrap();
        ConfigMapVolume { dir, gen: 0 }
    }

    /// Publishes a new version as the kubelet does: a new directory, `..data` swapped by rename,
    /// key symlinks added/removed, the old directory deleted.
    fn publish(&mut self, keys: &[(&str, &str)]) {
        self.gen += 1;
        let ts = format!("..2026_01_01_00_00_0{}.{}", self.gen, std::process::id());
        let new = self.dir.join(&ts);
        std::fs::create_dir_all(&new).unwrap();
        for (k, v) in keys {
            std::fs::write(new.join(k), v).unwrap();
        }
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        for e in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("..") && !keys.iter().any(|(k, _)| *k == name) {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        for (k, _) in keys {
            let link = self.dir.join(k);
            if link.symlink_metadata().is_err() {
                std::os::unix::fs::symlink(format!("..data/{k}"), link).unwrap();
            }
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}

fn net(name: &str, subnet: &str) -> String {
    json!({"cniVersion": "1.0.0", "name": name, "plugins": [
        {"type": "macvlan", "master": "eth1", "ipam": {"type": "host-local", "subnet": subnet}}]})
    .to_string()
}

#[test]
fn the_configmap_is_mirrored_across_data_swaps() {
    let n = Node::new("mirror");
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    let mut cm = ConfigMapVolume::new(n.dir.0.join("configmap"));
    let storage = net("storage", "198.18.10.0/24");
    let fast = net("fast", "198.18.11.0/24");
    cm.publish(&[("default.storage.conflist", &storage), ("team-a.fast.conflist", &fast)]);
    // A definition put there by hand is never the mirror's business.
    let hand = n.networks_dir().join("default/manual.conflist");
    std::fs::create_dir_all(hand.parent().unwrap()).unwrap();
    std::fs::write(&hand, net("manual", "198.18.12.0/24")).unwrap();
    let cm_dir = cm.dir.display().to_string();
    let mut inst = n.spawn(&["--networks-configmap", &cm_dir]);
    let target = |rel: &str| n.networks_dir().join(rel);
    wait_for("the first mirror", || (target("team-a/fast.conflist").exists() && n.conf().exists()).then_some(()));
    assert_eq!(std::fs::read_to_string(target("default/storage.conflist")).unwrap(), storage);
    let storage_ino = std::fs::metadata(target("default/storage.conflist")).unwrap().ino();

    // Version 2: fast changed, storage unchanged, a new network, a bad one, fast's namespace
    // gets a second one, and a key with no namespace.
    let fast2 = net("fast", "198.18.13.0/24");
    let noname = json!({"cniVersion": "1.0.0", "plugins": [{"type": "ptp", "ipam": {"type": "host-local", "subnet": "198.18.14.0/24"}}]}).to_string();
    cm.publish(&[
        ("default.storage.conflist", &storage),
        ("team-a.fast.conflist", &fast2),
        ("team-a.noname.conflist", &noname),
        ("team-a.wrongname.conflist", &net("other", "198.18.15.0/24")),
        ("default.broken.conflist", "{\"cniVersion\": \"1.0.0\", \"name\": \"broken\", "),
        ("README", "not a network"),
    ]);
    wait_for("version 2", || {
        (std::fs::read_to_string(target("team-a/fast.conflist")).ok()? == fast2
            && target("team-a/noname.conflist").exists())
        .then_some(())
    });
    let injected: Value = serde_json::from_slice(&std::fs::read(target("team-a/noname.conflist")).unwrap()).unwrap();
    assert_eq!(injected["name"], "noname");
    assert!(!target("team-a/wrongname.conflist").exists());
    assert!(!target("default/broken.conflist").exists());
    assert_eq!(
        std::fs::metadata(target("default/storage.conflist")).unwrap().ino(),
        storage_ino,
        "rewritten unchanged"
    );

    // Version 3: storage deleted, team-a's fast deleted; noname stays.
    cm.publish(&[("team-a.noname.conflist", &noname)]);
    wait_for("version 3", || {
        (!target("default/storage.conflist").exists() && !target("team-a/fast.conflist").exists()).then_some(())
    });
    assert!(target("team-a/noname.conflist").exists());
    assert!(hand.exists(), "a hand-written definition was removed");
    for d in ["default", "team-a"] {
        no_temp_files(&n.networks_dir().join(d));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(inst.term(), Some(0), "{}", inst.log());
    let log = inst.log();
    for want in [
        "network default/storage: wrote",
        "network team-a/fast: wrote",
        "ConfigMap key team-a.wrongname.conflist skipped",
        "ConfigMap key default.broken.conflist skipped",
        "ConfigMap key README skipped",
        "network default/storage: removed",
    ] {
        assert!(log.contains(want), "{want:?} not in:\n{log}");
    }
    // Bad keys are logged once, not on every pass.
    assert_eq!(log.matches("ConfigMap key README skipped").count(), 1, "{log}");

    // A plain directory of keys (no ..data) works too, and a key going bad keeps its last good
    // version.
    let plain = n.dir.0.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("team-a.noname.conflist"), "garbage").unwrap();
    let out = n.run(&["--once", "--networks-configmap", &plain.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(target("team-a/noname.conflist").exists(), "the last good version was removed");

    // Uninstall: braid's conflist, the mirrored definitions and the plugins go; the hand-written
    // definition and the primary stay.
    let out = n.run(&["--uninstall"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!n.conf().exists());
    assert!(!target("team-a/noname.conflist").exists());
    assert!(!target(braid_install::mirror::MANIFEST).exists());
    assert!(!n.bin_dir().join("delegator").exists());
    assert!(hand.exists());
    assert!(n.conf_dir().join("10-flannel.conflist").exists());
}

/// A VM runtime's node: `--vmtap` copies vmtap too and chains it after the delegator (merged
/// result); `--uninstall --vmtap` removes it with the rest. Without the flag vmtap is neither
/// copied nor removed (a vmtap the operator put there for another use stays).
#[test]
fn vmtap_is_copied_chained_and_uninstalled_with_the_flag() {
    let n = Node::new("vmtap");
    std::fs::write(n.src().join("vmtap"), "#!/bin/sh\n# vmtap v1\n").unwrap();
    n.write_conf("10-flannel.conflist", &bridge("cbr0", "1.0.0"));
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!n.bin_dir().join("vmtap").exists(), "vmtap copied without --vmtap");
    assert_eq!(n.braid()["plugins"].as_array().unwrap().len(), 1);

    let out = n.run(&["--once", "--vmtap", "--vmtap-dan-dir", "/run/kata-containers/dans"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(n.bin_dir().join("vmtap")).unwrap(), std::fs::read(n.src().join("vmtap")).unwrap());
    let braid = n.braid();
    assert_eq!(braid["plugins"][0]["type"], "delegator");
    assert_eq!(braid["plugins"][0]["result"], "merged");
    assert_eq!(braid["plugins"][1], json!({"type": "vmtap", "danDir": "/run/kata-containers/dans"}));

    // Without the flag again: braid's conflist loses vmtap (it is rewritten), the binary stays
    // until an uninstall with the flag.
    let out = n.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(n.braid()["plugins"].as_array().unwrap().len(), 1);
    let out = n.run(&["--uninstall"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(n.bin_dir().join("vmtap").exists());
    let out = n.run(&["--uninstall", "--vmtap"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!n.bin_dir().join("vmtap").exists());
    assert!(!n.bin_dir().join("delegator").exists() && !n.conf().exists());

    // A missing vmtap in the source dir fails the install with code 4, before anything is written.
    std::fs::remove_file(n.src().join("vmtap")).unwrap();
    let out = n.run(&["--once", "--vmtap"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(!n.bin_dir().join("delegator").exists());
}

/// In its API mode the agent refuses to start without its node's name or without credentials,
/// with exit code 7 and the missing thing named, before it connects anywhere: the kubeconfig
/// names a listener of this test's, which accepts nothing. No API server is needed to show it,
/// since none must be reached (this test ran against integration's API stand-in until then).
#[test]
fn without_node_name_or_credentials_the_api_agent_says_so_exits_7_and_connects_nowhere() {
    let d = TempDir::new("kapi-bad");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let kubeconfig = d.0.join("kubeconfig");
    // JSON is YAML: a kubeconfig as kubectl writes it, with a token user.
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": format!("https://{}", listener.local_addr().unwrap()), "insecure-skip-tls-verify": true}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    });
    std::fs::write(&kubeconfig, config.to_string()).unwrap();
    let dir = |name: &str| {
        let p = d.0.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p.display().to_string()
    };
    let (conf, networks, status, state) = (dir("net.d"), dir("networks"), dir("status"), dir("state"));
    let run = |env: &[(&str, String)]| {
        let mut c = Command::new(BIN);
        c.args(["--kubernetes-api", "--host-root", "/", "--skip-binaries"])
            .args(["--cni-conf-dir", &conf, "--networks-dir", &networks])
            .args(["--status-dir", &status, "--state-dir", &state])
            .env_remove("NODE_NAME")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", &d.0);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&[("KUBECONFIG", kubeconfig.display().to_string())]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("NODE_NAME is not set"), "{err}");
    let out = run(&[("NODE_NAME", "node-a".into()), ("KUBECONFIG", d.0.join("nope").display().to_string())]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("no Kubernetes API credentials"), "{err}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the agent connected to its API server before refusing: {other:?}"),
    }
}

/// A `--metrics-addr` port that another process holds (9464 is also OpenTelemetry's exporter
/// port) never stops the install: braid's conflist is written, and once the port is free the
/// metrics are served there.
#[test]
fn a_taken_metrics_port_does_not_stop_the_install_and_is_served_once_free() {
    let n = Node::new("metricstaken");
    n.write_conf("10-bridge.conflist", &bridge("cbr0", "1.0.0"));
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = holder.local_addr().unwrap().to_string();
    let mut i = n.spawn(&["--metrics-addr", &addr, "--interval", "1"]);
    wait_for("braid's conflist", || n.conf().exists().then_some(()));
    wait_for("the bind failure logged", || i.log().contains("cannot listen").then_some(()));
    assert!(i.log().contains(&format!("--metrics-addr {addr}")), "{}", i.log());
    drop(holder);
    wait_for("metrics served once the port is free", || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).ok()?;
        s.write_all(b"GET /readyz HTTP/1.1\r\nHost: braid\r\nConnection: close\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.starts_with("HTTP/1.1 200 ").then_some(())
    });
    assert_eq!(i.term(), Some(0), "{}", i.log());
}
