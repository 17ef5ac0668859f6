//! A pod's ADD+DEL when its selected network names a device-plugin resource, beside the same
//! pod selecting the same network without one: what the device lookup costs — the delegator
//! running `braid-podresources` (its exec, a tokio runtime, a gRPC `Get` to the kubelet) and
//! the device-info file — against the **real kubelet's** PodResources API (the one-node
//! cluster of `scripts/node.sh`, braid's test device plugin registered with it, a pod holding
//! one of its devices; the delegator runs in the bench's own namespaces and reaches the
//! kubelet's socket by its path on the host). And, under `strace`, that the ADD+DEL without a
//! resource runs no helper and connects to no socket, while the one with a resource does both
//! (the control: the trace would show them).

use super::attach::canned;
use super::rounds::{compare, Check, Stat};
use super::World;
use crate::run::Call;
use crate::stats::Sample;
use crate::verdict::{ms, signed_ms, Limit, Verdict};
use cni_types::version::Command;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The device plugin's resource, and the pod holding one of its devices.
const VF: &str = "braid.test/fakevf";
const POD: &str = "bench-dev";

/// What a resource network may add to a pod's ADD+DEL: the helper's exec and the kubelet's
/// answer on two cores (an upper bound for a stuck helper, not a target: the figure is the
/// result).
const RESOURCE_OVER_PLAIN_MS: f64 = 25.0;

const WHAT: &str = "ADD+DEL with a selected network that names a device-plugin resource, beyond the same network without one (median of paired differences; braid-fault delegates; the real kubelet's PodResources)";
const NO_SOCKET: &str =
    "ADD+DEL of networks that name no resource: no braid-podresources exec, no connect(2) but the rtnetlink socket's (strace -f)";

pub fn devices(w: &World) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let c = w.real_node()?;
    c.node_sh(&["deviceplugin", "node1", "-resource", VF, "-count", "4"]);
    let _stop = Defer(|| {
        c.node_sh(&["stop", "deviceplugin-node1"]);
    });
    c.wait(
        "node1 offering braid.test/fakevf",
        || c.get(&["node", "node1"])["status"]["allocatable"][VF] == "4",
        || c.log("deviceplugin-node1"),
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": "default"},
        "spec": {"nodeName": "node1", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": braid_integration::cluster::BUSYBOX, "imagePullPolicy": "Never",
                                 "command": ["sleep", "100000"], "resources": {"limits": {VF: "1"}}}]}});
    c.apply(&pod.to_string());
    let _pod = Defer(|| {
        let _ = c.kubectl(&["delete", "pod", POD, "-n", "default", "--wait=true"]);
    });
    c.wait(
        "the bench's device pod Running",
        || c.get(&["pod", POD, "-n", "default"])["status"]["phase"] == "Running",
        || String::from_utf8_lossy(&c.kubectl(&["describe", "pod", POD]).stdout).into_owned(),
    );
    let socket = c.dir().join("node1/kubelet/pod-resources/kubelet.sock");

    let nets = w.dir.path().join("devices.d");
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(nets.join("default")).map_err(io)?;
    for (name, resource) in [("plain", None), ("dev", Some(VF))] {
        let mut conf = json!({"cniVersion": "1.0.0", "name": name, "plugins": [canned(w, name, "net1", 113)]});
        if let Some(r) = resource {
            conf["k8s.v1.cni.cncf.io/resourceName"] = json!(r);
        }
        std::fs::write(nets.join("default").join(format!("{name}.conflist")), conf.to_string()).map_err(io)?;
    }
    let annotations = "io.kubernetes.cri.pod-annotations";
    let conf = |network: &str| {
        json!({"cniVersion": "1.0.0", "name": "bench", "type": "delegator",
            "stateDir": w.dir.path().join("devstate"), "delegates": [canned(w, "cluster", "eth0", 110)],
            "capabilities": {annotations: true},
            "runtimeConfig": {annotations: {"k8s.v1.cni.cncf.io/networks": network}},
            "kubernetes": {"networksDir": nets, "statusDir": w.dir.path().join("devstatus"),
                           "podResourcesSocket": socket}})
    };
    let (plain, dev) = (conf("plain"), conf("dev"));
    let args = format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={POD}");
    let calls = |conf: &Value, id: &str| {
        let with_pod = |mut call: Call| {
            call.req.args = args.clone();
            call
        };
        (
            with_pod(w.call(w.bin("delegator"), Command::Add, id, "eth0", conf)),
            with_pod(w.call(w.bin("delegator"), Command::Del, id, "eth0", conf)),
        )
    };
    let cycle = |conf: &Value, id: &str| -> Result<Duration, String> {
        let (add, del) = calls(conf, id);
        let start = Instant::now();
        add.run()?;
        del.run()?;
        Ok(start.elapsed())
    };

    let g = "ADD+DEL: cluster + 1 selected network (braid-fault delegates)";
    let mut samples = vec![
        Sample::new(g, "network without a resource", "ms"),
        Sample::new(g, "network with a resource (real kubelet)", "ms"),
    ];
    let check = Check { stat: Stat::difference(1, 0), limit: Limit::Ms(RESOURCE_OVER_PLAIN_MS) };
    let est = w.in_host(|| {
        compare(w.plan(100, 3), &mut samples, &[vec![0], vec![1]], std::slice::from_ref(&check), |k, tag| {
            Ok(vec![if k == 0 { cycle(&plain, &format!("p{tag}"))? } else { cycle(&dev, &format!("d{tag}"))? }])
        })
    })??;
    let timed = Verdict::at_most(WHAT, est[0], check.limit).measured(format!(
        "{} (medians {} vs {})",
        signed_ms(est[0].value),
        ms(samples[1].median()),
        ms(samples[0].median())
    ));

    // One cycle of each under strace: execve and connect of the delegator and all it runs.
    let traced = |conf: &Value, id: &str| -> Result<String, String> {
        let out = w.dir.path().join(format!("strace-{id}"));
        let (add, del) = calls(conf, id);
        let mut text = String::new();
        for (call, tag) in [(add, "add"), (del, "del")] {
            let file = out.with_extension(tag);
            let strace = Call { plugin: "/usr/bin/strace".into(), req: call.req.clone(), stdin: call.stdin.clone() };
            strace_run(&strace, &call.plugin, &file)?;
            text.push_str(&std::fs::read_to_string(&file).map_err(io)?);
        }
        Ok(text)
    };
    let (plain_trace, dev_trace) =
        w.in_host(|| Ok::<_, String>((traced(&plain, "tplain")?, traced(&dev, "tdev")?)))??;
    let helper_runs = |t: &str| t.lines().filter(|l| l.contains("execve(") && l.contains("braid-podresources")).count();
    // Every ADD connects its rtnetlink socket (to the kernel, in the pod namespace: the links
    // it reads); any other connect(2) would be a socket opened for a device lookup.
    let connects = |t: &str| t.lines().filter(|l| l.contains("connect(") && !l.contains("AF_NETLINK")).count();
    let to_socket =
        |t: &str| t.lines().filter(|l| l.contains("connect(") && l.contains("pod-resources/kubelet.sock")).count();
    let (p_exec, p_conn, d_exec, d_sock) =
        (helper_runs(&plain_trace), connects(&plain_trace), helper_runs(&dev_trace), to_socket(&dev_trace));
    let quiet = Verdict::plain(
        NO_SOCKET,
        format!(
            "without a resource: {p_exec} helper exec(s), {p_conn} connect(2) but netlink's; with one (the control): {d_exec} helper exec(s), {d_sock} connect(2) to the kubelet's socket"
        ),
        "none without; at least one of each with",
        p_exec == 0 && p_conn == 0 && d_exec >= 1 && d_sock >= 1,
    );
    Ok((samples, vec![timed, quiet]))
}

/// Runs `call`'s plugin (`plugin`) under `strace -f -qq -e trace=execve,connect -o file`, with
/// the call's CNI environment and stdin.
fn strace_run(call: &Call, plugin: &Path, file: &Path) -> Result<(), String> {
    use std::io::Write;
    let mut cmd = std::process::Command::new(&call.plugin);
    cmd.args(["-f", "-qq", "-e", "trace=execve,connect", "-o"]).arg(file).arg(plugin);
    cmd.env_clear();
    for (k, v) in call.req.env() {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("strace: {e}"))?;
    child.stdin.take().ok_or("strace: no stdin")?.write_all(&call.stdin).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{} under strace: {}{}",
            plugin.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// Runs a closure on drop.
struct Defer<F: FnMut()>(F);
impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}
