//! braid on a Kubernetes node: the manifests checked against the installer's defaults, the
//! installer image (deploy/Containerfile) built with podman and run against temporary "host"
//! directories, and a whole node — containerd's CRI with a bridge primary network and braid
//! installed into its directories by that image.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_install::options::{self, Options};
use braid_integration::containerd::{self, Containerd};
use braid_integration::node::{
    add_storage_master, bridge_primary, example_networks, EXAMPLE_SELECTION, NETWORKS_ANNOTATION,
};
use braid_integration::podman::{self, Podman};
use braid_integration::runtime::{addresses_in, libcni_cache_entries, require_root_and, run_ok};
use braid_integration::unique;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A manifest of `deploy/kubernetes/base`, what both layouts share (the DaemonSet as the no-API
/// layout runs it, the ConfigMap); `tests/manifests.rs` checks the layouts `kubectl kustomize`
/// renders from it.
fn manifest(file: &str) -> Value {
    let p = repo().join("deploy/kubernetes/base").join(file);
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The image the manifests name and scripts/build-image.sh builds by default.
fn image_tag() -> String {
    format!("localhost/braid-install:{}", version())
}

/// Inside 198.18.0.0/15.
fn in_test_range(addr: &str) -> bool {
    let ip = addr.split('/').next().unwrap_or_default();
    ip.starts_with("198.18.") || ip.starts_with("198.19.")
}

#[test]
fn manifests_match_the_installer_defaults() {
    let ds = manifest("daemonset.json");
    let cm = manifest("networks-configmap.json");
    assert_eq!(ds["kind"], "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
            .as_str()
            .map(|n| json!({"app.kubernetes.io/name": n}))
            .unwrap()
    );
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["hostNetwork"], true, "the installer must start before any pod network works");
    assert!(pod.get("serviceAccountName").is_none() && pod.get("serviceAccount").is_none());
    assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]), "tolerates every taint");
    let c = &pod["containers"][0];
    assert_eq!(pod["containers"].as_array().unwrap().len(), 1);
    assert_eq!(c["image"], image_tag().as_str());

    // The installer's options as the DaemonSet runs it.
    let args: Vec<String> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let o = match options::parse(args).unwrap() {
        options::Action::Run(o) => *o,
        other => panic!("{other:?}"),
    };
    assert_eq!(o.host_root, Options::default().host_root);

    // Every hostPath is mounted at <host-root><path>, and covers what the installer touches.
    let volumes = pod["volumes"].as_array().unwrap();
    let mounts = c["volumeMounts"].as_array().unwrap();
    let mount_of =
        |vol: &str| mounts.iter().find(|m| m["name"] == vol).and_then(|m| m["mountPath"].as_str()).map(PathBuf::from);
    let mut host_paths = Vec::new();
    for v in volumes.iter().filter(|v| v.get("hostPath").is_some()) {
        let path = PathBuf::from(v["hostPath"]["path"].as_str().unwrap());
        let mounted = mount_of(v["name"].as_str().unwrap()).unwrap_or_else(|| panic!("{v} not mounted"));
        assert_eq!(mounted, o.host(&path), "{v}");
        host_paths.push(path);
    }
    let want: Vec<PathBuf> = [
        "/opt/cni/bin",
        "/etc/cni/net.d",
        "/etc/cni/braid.d",
        "/var/lib/cni/braid",
        "/run/braid",
        "/var/lib/braid/dra-devices",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(host_paths, want);
    for (what, p) in [
        ("--cni-bin-dir", &o.cni_bin_dir),
        ("--cni-conf-dir", &o.cni_conf_dir),
        ("--networks-dir", &o.networks_dir),
        ("--state-dir", &o.state_dir),
        ("--status-dir", &o.status_dir),
        ("--dra-devices-file", &o.dra_devices_file),
    ] {
        assert!(host_paths.iter().any(|h| p.starts_with(h)), "{what} {} is on no hostPath", p.display());
    }
    assert_eq!(o.host(&o.cni_bin_dir), PathBuf::from("/host/opt/cni/bin"));
    assert_eq!(o.conf_path(), PathBuf::from("/host/etc/cni/net.d/00-braid.conflist"));

    // The ConfigMap volume is the one --networks-configmap reads, and names the ConfigMap.
    let cm_vol = volumes.iter().find(|v| v.get("configMap").is_some()).unwrap();
    assert_eq!(cm_vol["configMap"]["name"], cm["metadata"]["name"]);
    assert_eq!(Some(mount_of(cm_vol["name"].as_str().unwrap()).unwrap()), o.configmap_dir);
    assert_eq!(cm["metadata"]["namespace"], ds["metadata"]["namespace"]);

    // Two example networks, valid keys and definitions, addresses in 198.18.0.0/15 only.
    let data = cm["data"].as_object().unwrap();
    assert_eq!(data.len(), 2);
    for (key, text) in data {
        let (_, name) = braid_install::mirror::parse_key(key).unwrap();
        braid_install::mirror::check_definition(name, text.as_str().unwrap().as_bytes())
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        let v: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
        let mut addrs = Vec::new();
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        if ["subnet", "rangeStart", "rangeEnd", "gateway", "dst", "gw"].contains(&k.as_str()) {
                            out.push(x.as_str().unwrap_or_default().to_string());
                        }
                        walk(x, out);
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        walk(&v, &mut addrs);
        assert!(!addrs.is_empty() && addrs.iter().all(|a| in_test_range(a)), "{key}: {addrs:?}");
    }

    // The README's install section names the same things.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for want in [
        "## Install on Kubernetes",
        "scripts/build-image.sh",
        "kubectl apply -k deploy/kubernetes/crd",
        "kubectl apply -k deploy/kubernetes",
        "kubectl apply -k deploy/kubernetes/no-api",
        "kubectl delete -k deploy/kubernetes ",
        "cni.exclusive=false",
        "### Moving from Multus",
        "00-multus.conf",
        "integration/src/fault_proxy.rs",
        "k8s.v1.cni.cncf.io/networks",
        "--uninstall",
    ] {
        assert!(readme.contains(want), "README.md lacks {want:?}");
    }
}

/// scripts/build-release.sh's output directory (static musl binaries), built once per run, or
/// `BRAID_RELEASE_DIR` (scripts/test.sh builds it before the tests).
fn release_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("BRAID_RELEASE_DIR") {
            return PathBuf::from(d);
        }
        let out = run_ok(Command::new("bash").arg(repo().join("scripts/build-release.sh")));
        PathBuf::from(out.lines().last().unwrap_or_default().trim())
    })
    .clone()
}

/// Builds the image with scripts/build-image.sh into this podman's storage; returns its tag.
fn build_image(p: &Podman) -> String {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/build-image.sh"))
        .env("PODMAN", p.command_line())
        .env("BRAID_RELEASE_DIR", release_dir());
    for (k, v) in p.env() {
        cmd.env(k, v);
    }
    let out = run_ok(&mut cmd);
    let tag = out.lines().last().unwrap_or_default().trim().to_string();
    assert_eq!(tag, image_tag());
    tag
}

fn podman_ok(p: &Podman, args: &[&str]) -> String {
    let out = p.podman(args);
    assert!(
        out.status.success(),
        "podman {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `podman logs`: the container's stdout and stderr.
fn podman_logs(p: &Podman, name: &str) -> String {
    let out = p.podman(&["logs", name]);
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A kubelet-style ConfigMap volume: keys in `..<version>/`, `..data` pointing at it, each key a
/// symlink through `..data`.
fn configmap_volume(dir: &Path, version: &str, keys: &[(String, String)]) {
    let ts = format!("..{version}");
    std::fs::create_dir_all(dir.join(&ts)).unwrap();
    for (k, v) in keys {
        std::fs::write(dir.join(&ts).join(k), v).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&ts, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if !n.starts_with("..") && !keys.iter().any(|(k, _)| *k == n) {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    for (k, _) in keys {
        if dir.join(k).symlink_metadata().is_err() {
            std::os::unix::fs::symlink(format!("..data/{k}"), dir.join(k)).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

fn podman_commands() -> Vec<&'static str> {
    podman::COMMANDS.to_vec()
}

#[test]
fn the_image_is_small_and_installs_braid_into_a_host() {
    if !require_root_and("the_image_is_small_and_installs_braid_into_a_host", &podman_commands()) {
        return;
    }
    let p = Podman::new("img");
    let tag = build_image(&p);
    let size: u64 = podman_ok(&p, &["image", "inspect", &tag, "--format", "{{.Size}}"]).trim().parse().unwrap();
    // The six static binaries: the four plugins and braid-podresources (the kubelet's gRPC
    // client, run only for networks backed by devices), about 1 MB each, and the installer, whose
    // Kubernetes client, TLS and runtime for --kubernetes-api are about 5.3 MB of it: 10.0 MB
    // since the fifth plugin-sized binary (issue 48), so the bound is 11 MB.
    assert!(size < 11_000_000, "the image is {size} bytes");
    eprintln!("image {tag}: {size} bytes");

    let host = p.h.dir.path().join("host");
    let conf_dir = host.join("etc/cni/net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let primary = json!({"cniVersion": "1.0.0", "name": "cluster", "plugins": [
        {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local", "subnet": "198.18.160.0/24"}},
        {"type": "portmap", "capabilities": {"portMappings": true}}]});
    std::fs::write(conf_dir.join("10-cluster.conflist"), primary.to_string()).unwrap();
    let cm = p.h.dir.path().join("configmap");
    std::fs::create_dir_all(&cm).unwrap();
    configmap_volume(&cm, "v1", &example_networks(&p.h.ipam_dir()));
    let host_v = format!("{}:/host", host.display());
    let cm_v = format!("{}:/etc/braid/networks:ro", cm.display());
    let run = |extra: &[&str]| {
        let mut a = vec!["run", "--rm", "--pull", "never", "--network", "none", "-v", &host_v, "-v", &cm_v, &tag];
        a.extend_from_slice(extra);
        let out = p.podman(&a);
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "podman {a:?}:\n{log}");
        log
    };
    let log = run(&["--once", "--networks-configmap", "/etc/braid/networks"]);
    assert!(log.contains("braid-install: wrote"), "{log}");
    for b in ["delegator", "braid-podresources", "merger", "verifier"] {
        let installed = std::fs::read(host.join("opt/cni/bin").join(b)).unwrap();
        assert_eq!(installed, std::fs::read(release_dir().join(b)).unwrap(), "{b}\n{log}");
    }
    let braid: Value = serde_json::from_slice(&std::fs::read(conf_dir.join("00-braid.conflist")).unwrap()).unwrap();
    assert_eq!(braid["plugins"][0]["delegates"], json!([{"network": "cluster"}]));
    assert_eq!(braid["plugins"][0]["confDir"], "/etc/cni/net.d");
    assert_eq!(
        braid["plugins"][0]["capabilities"],
        json!({"portMappings": true, "io.kubernetes.cri.pod-annotations": true})
    );
    for n in ["default/isolated.conflist", "default/storage.conflist"] {
        assert!(host.join("etc/cni/braid.d").join(n).exists(), "{n}\n{log}");
    }

    // Long-running: stops at once on SIGTERM (it is PID 1 of its container) and leaves braid's
    // conflist in place.
    let name = unique("braidinst");
    podman_ok(
        &p,
        &[
            "run",
            "-d",
            "--name",
            &name,
            "--pull",
            "never",
            "--network",
            "none",
            "-v",
            &host_v,
            "-v",
            &cm_v,
            &tag,
            "--networks-configmap",
            "/etc/braid/networks",
        ],
    );
    // It handles signals before it writes anything: once its conflist is written (or found
    // current), SIGTERM is its to handle. A SIGTERM not handled would end it with 143, or
    // podman's SIGKILL after 20 s with 137 — never 0 with the line below.
    let ready = |logs: &str| logs.contains("00-braid.conflist");
    let mut logs = podman_logs(&p, &name);
    for _ in 0..600 {
        if ready(&logs) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        logs = podman_logs(&p, &name);
    }
    assert!(ready(&logs), "the installer never wrote its conflist:\n{logs}");
    podman_ok(&p, &["stop", "--time", "20", &name]);
    let code = podman_ok(&p, &["inspect", &name, "--format", "{{.State.ExitCode}}"]);
    let logs = podman_logs(&p, &name);
    assert_eq!(code.trim(), "0", "{logs}");
    assert!(logs.contains("stopping on SIGTERM"), "{logs}");
    assert!(conf_dir.join("00-braid.conflist").exists());
    podman_ok(&p, &["rm", &name]);

    // Uninstall.
    run(&["--uninstall"]);
    assert!(!conf_dir.join("00-braid.conflist").exists());
    assert!(!host.join("opt/cni/bin/delegator").exists());
    assert!(!host.join("etc/cni/braid.d/default/storage.conflist").exists());
    assert!(conf_dir.join("10-cluster.conflist").exists());
}

/// A node: containerd with a bridge primary network, braid installed into its CNI directories
/// by the image (run with podman, the directories mounted under /host as the DaemonSet mounts
/// the node's), the example ConfigMap mirrored.
struct Node {
    c: Containerd,
    _p: Podman,
    status_dir: PathBuf,
    state_dir: PathBuf,
}

fn node(test: &str, tag: &str) -> Option<Node> {
    let mut cmds = containerd::COMMANDS.to_vec();
    cmds.extend(podman_commands());
    if !require_root_and(test, &cmds) {
        return None;
    }
    let mut c = Containerd::start(tag, |h| vec![bridge_primary(h, &unique("kcl"), &unique("br"), 150)], 1);
    add_storage_master(&c.h);
    let p = Podman::new(&format!("{tag}p"));
    let image = build_image(&p);
    let d = c.h.dir.path().to_path_buf();
    let (networks_dir, state_dir, status_dir) = (d.join("braid.d"), d.join("state"), d.join("status"));
    std::fs::create_dir_all(&networks_dir).unwrap();
    let cm = d.join("configmap");
    std::fs::create_dir_all(&cm).unwrap();
    configmap_volume(&cm, "v1", &example_networks(&c.h.ipam_dir()));
    let name = unique("braid");
    let s = |p: &Path| p.display().to_string();
    let vol = |p: &Path| format!("{}:/host{}", p.display(), p.display());
    let (bin, net) = (c.bin_dir(), c.net_dir());
    let cm_v = format!("{}:/etc/braid/networks:ro", cm.display());
    let args = [
        "run",
        "--rm",
        "--pull",
        "never",
        "--network",
        "none",
        "-v",
        &vol(&bin),
        "-v",
        &vol(&net),
        "-v",
        &vol(&networks_dir),
        "-v",
        &cm_v,
        &image,
        "--once",
        "--cni-bin-dir",
        &s(&bin),
        "--cni-conf-dir",
        &s(&net),
        "--networks-dir",
        &s(&networks_dir),
        "--state-dir",
        &s(&state_dir),
        "--status-dir",
        &s(&status_dir),
        "--name",
        &name,
        "--networks-configmap",
        "/etc/braid/networks",
        "--global-namespaces",
        "default",
    ];
    podman_ok(&p, &args);
    assert!(net.join("00-braid.conflist").exists());
    // The installer ran in its container: the directories it created there are not the node's.
    std::fs::create_dir_all(&state_dir).unwrap();
    c.wait_network_loaded(&name);
    Some(Node { c, _p: p, status_dir, state_dir })
}

impl Node {
    /// Nothing of the pods left: reservations, braid state and status, libcni cache, pod
    /// namespaces, shims.
    fn assert_nothing_left(&self) {
        let reservations = self.c.h.reservations();
        assert!(reservations.is_empty(), "IP reservations left: {reservations:?}");
        let mut state = self.c.h.state_files();
        state.extend(self.c.h.dir.files().into_iter().filter(|f| f.starts_with("status/")));
        assert!(state.is_empty(), "braid state left: {state:?}\n{}", self.c.log());
        let cache = libcni_cache_entries(self.c.networks());
        assert!(cache.is_empty(), "libcni cache entries left: {cache:?}");
        assert!(self.c.pod_namespaces().is_empty(), "pod namespaces left: {:?}", self.c.pod_namespaces());
        assert!(self.c.shim_sockets_left().is_empty(), "shim sockets left: {:?}", self.c.shim_sockets_left());
    }
}

#[test]
fn containerd_node_with_braid_installed_by_the_image() {
    let Some(mut n) = node("containerd_node_with_braid_installed_by_the_image", "kin") else { return };
    // The plugins containerd runs are the image's (static) ones, not the build directory's links.
    let delegator = n.c.bin_dir().join("delegator");
    assert!(!delegator.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&delegator).unwrap(), std::fs::read(release_dir().join("delegator")).unwrap());
    let id = n.c.run_pod("plain", &[]).unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", n.c.log()));
    let ips = n.c.pod_ips(&id);
    assert_eq!(ips.len(), 1, "{ips:?}");
    assert!(ips[0].starts_with("198.18.150."), "{ips:?}");
    let a = addresses_in(&n.c.pod_netns(&id));
    assert_eq!(a, vec![("eth0".to_string(), format!("{}/24", ips[0]))]);
    // Through braid: the delegator holds the pod's state while it runs.
    let kept =
        std::fs::read_dir(&n.state_dir).unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains('@'));
    assert!(kept, "the delegator kept no state: not run?");
    n.c.stop_and_remove(&id);
    n.assert_nothing_left();
}

#[test]
fn containerd_annotated_pod_gets_the_configmaps_networks() {
    let Some(mut n) = node("containerd_annotated_pod_gets_the_configmaps_networks", "kan") else { return };
    let id =
        n.c.run_pod("annotated", &[(NETWORKS_ANNOTATION, EXAMPLE_SELECTION)])
            .unwrap_or_else(|e| panic!("RunPodSandbox: {e}\n{}", n.c.log()));
    let ips = n.c.pod_ips(&id);
    assert!(ips.len() == 1 && ips[0].starts_with("198.18.150."), "the pod IP is the cluster network's: {ips:?}");
    let a = addresses_in(&n.c.pod_netns(&id));
    let has = |i: &str, pre: &str| a.iter().any(|(n, ip)| n == i && ip.starts_with(pre));
    assert!(has("eth0", "198.18.150."), "{a:?}");
    assert!(has("net1", "198.18.100."), "isolated on net1: {a:?}");
    assert!(has("net2", "198.19.10."), "storage on net2: {a:?}");
    assert_eq!(a.len(), 3, "{a:?}");
    // The network-status document beside the kernel's view.
    let status: Vec<_> = std::fs::read_dir(&n.status_dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(status.len(), 1, "{status:?}");
    let file: Value = serde_json::from_slice(&std::fs::read(&status[0]).unwrap()).unwrap();
    let doc = &file["networkStatus"];
    let entries = doc.as_array().unwrap();
    assert!(entries.iter().any(|e| e["interface"] == "net1" && e["name"] == "default/isolated"), "{doc}");
    assert!(entries.iter().any(|e| e["interface"] == "net2" && e["name"] == "default/storage"), "{doc}");
    assert!(entries.iter().any(|e| e["default"] == true), "{doc}");
    n.c.stop_and_remove(&id);
    n.assert_nothing_left();
}
