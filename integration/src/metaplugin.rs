//! One meta-plugin at a time on the real node of `scripts/node.sh`: braid (its manifests), Multus
//! thick (daemon DaemonSet + shim) or Multus thin, or none (the cluster network alone), switched
//! cleanly, for the node bench that compares them on the same node (`braid-bench --only node`).
//!
//! Multus is installed as its users install it: the binaries built from its Go module
//! (`scripts/build-multus.sh`), in an image made from them and imported into the node's
//! containerd (no registry here), and the objects of its shipped manifests
//! (`deployments/multus-daemonset-thick.yml`, `deployments/multus-daemonset.yml` of v4.3.0):
//! ServiceAccount, ClusterRole and binding, the daemon's ConfigMap, the DaemonSet with its init
//! container (`install_multus`) and the requests and limits those manifests set. Their
//! `image` is the local one with `imagePullPolicy: Never`; nothing else differs.
//!
//! Uninstalling deletes those objects, then reports and removes what Multus leaves on the node
//! (its DaemonSets do not clean up after themselves: `00-multus.conf*`, `multus.d/`, the
//! binaries, `/run/multus`, `/var/lib/cni/multus`), so that the next set-up starts from the
//! node as `scripts/node.sh up` made it.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use crate::cluster::Cluster;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The Multus release the module in `integration/multus/` pins.
pub const MULTUS_VERSION: &str = "v4.3.0";
/// The image made from the built binaries.
pub const MULTUS_IMAGE: &str = "localhost/braid/multus:v4.3.0";
/// Multus's ServiceAccount: the user its daemon and its thin plugin (through the kubeconfig its
/// entrypoint writes) call the API server as.
pub const MULTUS_USER: &str = "system:serviceaccount:kube-system:multus";
/// braid's agent's ServiceAccount.
pub const BRAID_USER: &str = "system:serviceaccount:kube-system:braid";

/// A node's meta-plugin set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    /// The cluster network alone (`10-cluster.conflist`: bridge + host-local).
    Cluster,
    /// braid, by `kubectl apply -k deploy/kubernetes`.
    Braid,
    /// Multus's thick plugin: `multus-daemon` in a DaemonSet, `multus-shim` on the node.
    MultusThick,
    /// Multus's thin plugin, its conf written by `thin_entrypoint` in a DaemonSet.
    MultusThin,
}

impl Meta {
    /// Every set-up, in the order the report lists them.
    pub const ALL: [Meta; 4] = [Meta::Cluster, Meta::Braid, Meta::MultusThick, Meta::MultusThin];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Meta::Cluster => "cluster network",
            Meta::Braid => "braid",
            Meta::MultusThick => "Multus thick",
            Meta::MultusThin => "Multus thin",
        }
    }

    /// The user whose API requests are the meta-plugin's (none for the cluster network).
    pub fn user(self) -> Option<&'static str> {
        match self {
            Meta::Cluster => None,
            Meta::Braid => Some(BRAID_USER),
            Meta::MultusThick | Meta::MultusThin => Some(MULTUS_USER),
        }
    }

    /// The label of its DaemonSet's pods (none for the cluster network).
    pub fn pod_selector(self) -> Option<&'static str> {
        match self {
            Meta::Cluster => None,
            Meta::Braid => Some("app.kubernetes.io/name=braid"),
            Meta::MultusThick | Meta::MultusThin => Some("app=multus"),
        }
    }

    /// The long-lived processes of its DaemonSet (by `comm`), whose memory the bench samples:
    /// Multus's daemon, braid's agent, the thin plugin's conf writer. Sampled by name, not by
    /// cgroup, so a daemon restarted mid-burst is still seen, and the delegate plugins Multus's
    /// daemon runs in its container are not counted (braid's run outside its agent).
    pub fn daemon_processes(self) -> &'static [&'static str] {
        match self {
            Meta::Cluster => &[],
            Meta::Braid => &["braid-install"],
            Meta::MultusThick => &["multus-daemon"],
            Meta::MultusThin => &["thin_entrypoint"],
        }
    }

    /// The short-lived processes it runs for each pod (by `comm`), whose memory the bench samples.
    pub fn plugin_processes(self) -> &'static [&'static str] {
        match self {
            Meta::Cluster => &[],
            Meta::Braid => &["delegator", "merger"],
            Meta::MultusThick => &["multus-shim"],
            Meta::MultusThin => &["multus"],
        }
    }
}

/// The repository this crate is in (for `deploy/kubernetes` and `scripts/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What a meta-plugin leaves on a node's CNI paths, as `path` lines (empty: nothing).
pub fn meta_files(c: &Cluster, node: &str) -> Vec<String> {
    let mut found = Vec::new();
    for f in c.files_on(node, "/etc/cni/net.d") {
        if f != "10-cluster.conflist" {
            found.push(format!("/etc/cni/net.d/{f}"));
        }
    }
    for bin in ["multus", "multus-shim", "passthru", "delegator", "merger", "verifier"] {
        if c.on_node(node, "test", &["-e", &format!("/opt/cni/bin/{bin}")]).status.success() {
            found.push(format!("/opt/cni/bin/{bin}"));
        }
    }
    for dir in ["/run/multus", "/var/lib/cni/multus", "/etc/cni/braid.d", "/run/braid", "/var/lib/cni/braid"] {
        for f in c.files_on(node, dir) {
            found.push(format!("{dir}/{f}"));
        }
    }
    found
}

/// Installs `meta` on every node of `c` (the cluster network alone: nothing) and waits until the
/// node's runtime will call it: its conf is the lexically first in `/etc/cni/net.d`.
/// `multus_bin`: the directory `scripts/build-multus.sh` printed.
pub fn install(c: &Cluster, meta: Meta, multus_bin: &Path) -> Result<(), String> {
    let nodes: Vec<String> = (1..=c.nodes()).map(|n| format!("node{n}")).collect();
    let conf: &str = match meta {
        Meta::Cluster => return Ok(()),
        Meta::Braid => {
            let k = repo().join("deploy/kubernetes");
            run_ok(c, &["apply", "-k", &k.display().to_string()])?;
            run_ok(c, &["-n", "kube-system", "rollout", "status", "daemonset/braid-install", "--timeout=300s"])?;
            "00-braid.conflist"
        }
        Meta::MultusThick | Meta::MultusThin => {
            multus_image(c, multus_bin)?;
            for m in multus_manifests(meta) {
                c.apply(&m.to_string());
            }
            run_ok(c, &["-n", "kube-system", "rollout", "status", "daemonset/kube-multus-ds", "--timeout=300s"])?;
            "00-multus.conf"
        }
    };
    for node in &nodes {
        // The runtime takes the lexically first conf (files_on sorts).
        let first = || c.files_on(node, "/etc/cni/net.d").into_iter().find(|f| !f.contains('/')).unwrap_or_default();
        c.wait(
            &format!("{} as the first conf of {node}", meta.name()),
            || first().starts_with(conf),
            || format!("confs on {node}: {:?}", c.files_on(node, "/etc/cni/net.d")),
        );
    }
    Ok(())
}

/// Uninstalls `meta` (as its users would: deleting what they applied), waits until its pods are
/// gone, and returns what it left on the nodes before this removes it too.
pub fn uninstall(c: &Cluster, meta: Meta) -> Result<Vec<String>, String> {
    match meta {
        Meta::Cluster => return Ok(Vec::new()),
        Meta::Braid => {
            let k = repo().join("deploy/kubernetes");
            run_ok(c, &["delete", "-k", &k.display().to_string(), "--wait=true", "--timeout=180s"])?;
        }
        Meta::MultusThick | Meta::MultusThin => {
            for m in multus_manifests(meta).iter().rev() {
                let out =
                    c.kubectl_in(&["delete", "--ignore-not-found", "--wait=true", "-f", "-"], Some(&m.to_string()));
                if !out.status.success() {
                    return Err(format!("deleting Multus: {}", String::from_utf8_lossy(&out.stderr)));
                }
            }
        }
    }
    let sel = meta.pod_selector().unwrap_or_default();
    c.wait(
        &format!("{}'s pods gone", meta.name()),
        || c.get(&["pods", "-n", "kube-system", "-l", sel])["items"].as_array().is_some_and(Vec::is_empty),
        String::new,
    );
    let mut left = Vec::new();
    for n in 1..=c.nodes() {
        let node = format!("node{n}");
        let files = meta_files(c, &node);
        for f in &files {
            let out = c.on_node(&node, "rm", &["-rf", f]);
            if !out.status.success() {
                return Err(format!("removing {f} on {node}: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        // The (now empty) directories Multus made.
        let _ = c.on_node(&node, "rm", &["-rf", "/etc/cni/net.d/multus.d", "/run/multus", "/var/lib/cni/multus"]);
        left.extend(files.into_iter().map(|f| format!("{node}:{f}")));
    }
    Ok(left)
}

fn run_ok(c: &Cluster, args: &[&str]) -> Result<String, String> {
    let out = c.kubectl(args);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// The image of Multus's binaries, laid out as its Dockerfiles lay them out
/// (`/usr/src/multus-cni/bin/*`, and `/thin_entrypoint`, `/install_multus` at the root), made and
/// imported on every node by `scripts/node.sh image`.
fn multus_image(c: &Cluster, bin: &Path) -> Result<(), String> {
    let root = std::env::temp_dir().join(format!("braid-multus-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dest = root.join("usr/src/multus-cni/bin");
    std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(root.join("tmp")).map_err(|e| e.to_string())?;
    // The daemon looks itself up as root (Go's os/user reads /etc/passwd) and panics without
    // an entry: upstream's image is debian-slim, which has one.
    std::fs::create_dir_all(root.join("etc")).map_err(|e| e.to_string())?;
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").map_err(|e| e.to_string())?;
    std::fs::write(root.join("etc/group"), "root:x:0:\n").map_err(|e| e.to_string())?;
    // The runtime names pods' netns as /var/run/netns/…: Debian's /var/run is a link to /run,
    // where the DaemonSet mounts the host's /run/netns.
    std::fs::create_dir_all(root.join("var")).map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink("../run", root.join("var/run")).map_err(|e| e.to_string())?;
    for b in ["multus", "multus-daemon", "multus-shim", "install_multus", "thin_entrypoint", "passthru"] {
        std::fs::copy(bin.join(b), dest.join(b)).map_err(|e| format!("{}: {e}", bin.join(b).display()))?;
    }
    for b in ["install_multus", "thin_entrypoint"] {
        std::fs::copy(bin.join(b), root.join(b)).map_err(|e| e.to_string())?;
    }
    let out = c.node_sh(&["image", MULTUS_IMAGE, &root.display().to_string(), r#"["/thin_entrypoint"]"#]);
    let _ = std::fs::remove_dir_all(&root);
    if out.trim().ends_with(MULTUS_IMAGE) {
        Ok(())
    } else {
        Err(format!("importing {MULTUS_IMAGE}: {out}"))
    }
}

/// The objects of Multus's shipped manifest for `meta` (v4.3.0), image local.
fn multus_manifests(meta: Meta) -> Vec<Value> {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "multus", "namespace": "kube-system"}});
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "multus"},
        "rules": [
            {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list", "update", "watch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}
        ]
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "multus"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "multus"},
        "subjects": [{"kind": "ServiceAccount", "name": "multus", "namespace": "kube-system"}]
    });
    let host = |name: &str, path: &str| json!({"name": name, "hostPath": {"path": path}});
    let mount = |name: &str, path: &str| json!({"name": name, "mountPath": path});
    // The manifests' own: 100m CPU and 50Mi for the daemon (requests = limits), 10m/15Mi for the
    // init container.
    let limits = json!({"requests": {"cpu": "100m", "memory": "50Mi"}, "limits": {"cpu": "100m", "memory": "50Mi"}});
    let init_res = json!({"requests": {"cpu": "10m", "memory": "15Mi"}});
    let tolerations =
        json!([{"operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists", "effect": "NoExecute"}]);
    let labels = json!({"tier": "node", "app": "multus", "name": "multus"});
    let (config, pod_spec) = match meta {
        Meta::MultusThick => {
            let daemon_config = json!({
                "chrootDir": "/hostroot", "cniVersion": "0.3.1", "logLevel": "verbose", "logToStderr": true,
                "cniConfigDir": "/host/etc/cni/net.d", "multusAutoconfigDir": "/host/etc/cni/net.d",
                "multusConfigFile": "auto", "socketDir": "/host/run/multus/"
            });
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "multus-daemon-config", "namespace": "kube-system", "labels": {"tier": "node", "app": "multus"}},
                "data": {"daemon-config.json": serde_json::to_string_pretty(&daemon_config).unwrap()}});
            let mut hroot = mount("hostroot", "/hostroot");
            hroot["mountPropagation"] = json!("HostToContainer");
            let mut kubelet = mount("host-var-lib-kubelet", "/var/lib/kubelet");
            kubelet["mountPropagation"] = json!("HostToContainer");
            let mut netns = mount("host-run-netns", "/run/netns");
            netns["mountPropagation"] = json!("HostToContainer");
            let mut cfg = mount("multus-daemon-config", "/etc/cni/net.d/multus.d");
            cfg["readOnly"] = json!(true);
            let mut initbin = mount("cnibin", "/host/opt/cni/bin");
            initbin["mountPropagation"] = json!("Bidirectional");
            let spec = json!({
                "hostNetwork": true, "hostPID": true, "tolerations": tolerations, "serviceAccountName": "multus",
                "containers": [{
                    "name": "kube-multus", "image": MULTUS_IMAGE, "imagePullPolicy": "Never",
                    "command": ["/usr/src/multus-cni/bin/multus-daemon"], "resources": limits,
                    "securityContext": {"privileged": true}, "terminationMessagePolicy": "FallbackToLogsOnError",
                    "volumeMounts": [mount("cni", "/host/etc/cni/net.d"), mount("cnibin", "/opt/cni/bin"),
                        mount("host-run", "/host/run"), mount("host-var-lib-cni-multus", "/var/lib/cni/multus"),
                        kubelet, mount("host-run-k8s-cni-cncf-io", "/run/k8s.cni.cncf.io"), netns, cfg, hroot,
                        mount("multus-conf-dir", "/etc/cni/multus/net.d")],
                    "env": [{"name": "MULTUS_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
                }],
                "initContainers": [{
                    "name": "install-multus-binary", "image": MULTUS_IMAGE, "imagePullPolicy": "Never",
                    "command": ["/usr/src/multus-cni/bin/install_multus", "-d", "/host/opt/cni/bin", "-t", "thick"],
                    "resources": init_res, "securityContext": {"privileged": true},
                    "terminationMessagePolicy": "FallbackToLogsOnError", "volumeMounts": [initbin]
                }],
                "terminationGracePeriodSeconds": 10,
                "volumes": [host("cni", "/etc/cni/net.d"), host("cnibin", "/opt/cni/bin"), host("hostroot", "/"),
                    {"name": "multus-daemon-config", "configMap": {"name": "multus-daemon-config",
                        "items": [{"key": "daemon-config.json", "path": "daemon-config.json"}]}},
                    host("host-run", "/run"), host("host-var-lib-cni-multus", "/var/lib/cni/multus"),
                    host("host-var-lib-kubelet", "/var/lib/kubelet"),
                    host("host-run-k8s-cni-cncf-io", "/run/k8s.cni.cncf.io"), host("host-run-netns", "/run/netns/"),
                    host("multus-conf-dir", "/etc/cni/multus/net.d")]
            });
            (Some(cm), spec)
        }
        _ => {
            let mut initbin = mount("cnibin", "/host/opt/cni/bin");
            initbin["mountPropagation"] = json!("Bidirectional");
            let spec = json!({
                "hostNetwork": true, "tolerations": tolerations, "serviceAccountName": "multus",
                "containers": [{
                    "name": "kube-multus", "image": MULTUS_IMAGE, "imagePullPolicy": "Never",
                    "command": ["/thin_entrypoint"],
                    "args": ["--multus-conf-file=auto", "--multus-autoconfig-dir=/host/etc/cni/net.d",
                             "--cni-conf-dir=/host/etc/cni/net.d"],
                    "resources": limits, "securityContext": {"privileged": true},
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "volumeMounts": [mount("cni", "/host/etc/cni/net.d"), mount("cnibin", "/host/opt/cni/bin")]
                }],
                "initContainers": [{
                    "name": "install-multus-binary", "image": MULTUS_IMAGE, "imagePullPolicy": "Never",
                    "command": ["/install_multus"], "args": ["--type", "thin"],
                    "resources": init_res, "securityContext": {"privileged": true},
                    "terminationMessagePolicy": "FallbackToLogsOnError", "volumeMounts": [initbin]
                }],
                "terminationGracePeriodSeconds": 10,
                "volumes": [host("cni", "/etc/cni/net.d"), host("cnibin", "/opt/cni/bin")]
            });
            (None, spec)
        }
    };
    let ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "kube-multus-ds", "namespace": "kube-system", "labels": labels},
        "spec": {"selector": {"matchLabels": {"name": "multus"}}, "updateStrategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": labels}, "spec": pod_spec}}
    });
    let mut v = vec![sa, role, binding];
    v.extend(config);
    v.push(ds);
    v
}
