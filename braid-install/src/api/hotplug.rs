//! Network hot-plug (`--hotplug`, off by default): when a running pod's
//! `k8s.v1.cni.cncf.io/networks` annotation changes, the pod's sandbox gets exactly the
//! difference — added networks attached, removed ones detached, the others untouched — and its
//! network-status follows. Multus writes network-status once at ADD; adding a network to a
//! running pod there needs a second controller (k8snetworkplumbingwg's
//! multus-dynamic-networks-controller) talking to Multus's thick daemon. Here the agent that
//! already publishes the status does it, and nothing is added to the pod-start path.
//!
//! **What is watched.** This node's pods only (a field selector `spec.nodeName=<node>`, served
//! from the API server's watch cache): one list, then one watch — requests in proportion to
//! change, none at rest. The RBAC grant is `list` and `watch` on pods (the API cannot narrow a
//! grant to a field selector; what it reveals is in the README).
//!
//! **When an update runs.** The delegator records, in each sandbox's status file, the
//! annotation it carried out (`networks`), the pod's UID and the sandbox (`netns`, `ifname`). A
//! pod whose annotation differs from its newest status file's — and whose UID is the file's —
//! is updated: the agent runs the node's `delegator update` (the node's binary, in the node's
//! root, `chroot` by the delegator itself) with the sandbox's ADD environment and braid's
//! conflist, which attaches and detaches the difference under the sandbox's locks and writes
//! the status file anew ([`crate`]'s status publisher then patches the pod). Looked at again on
//! every pod event, every `--status-rescan` (local reads; for a status file written after the
//! pod's last event) and after the agent starts: a change made while the agent or the API
//! server was down is carried out when they are back, and the pod ends as its annotation last
//! asked.
//!
//! **Failures.** An update that fails leaves nothing of what it tried to add (the delegator
//! rolls it back) and is reported on the pod: a Warning Event `NetworkUpdateFailed` naming the
//! delegator's error (which names the network and delegate), and a log line. It is tried
//! again on a backoff of the pod's own ([`super::retry`]) — a delegate's code 11 and an update
//! killed at its time limit included — and at once when the annotation changes. A sandbox
//! that an update left part-way says so in its status file (`unsettled`), and is updated
//! whatever the annotation says: reverting a failed edit brings back what it removed. Pods
//! being deleted (`deletionTimestamp` set) are left alone: their sandbox is about to go. At
//! most [`IN_FLIGHT`] updates run at once, one per pod; an edit during a pod's update is
//! carried out after it.
//!
//! **Memory.** Only the pods' metadata is watched (`PartialObjectMeta`, what `kubectl get
//! --show-kind -o metadata` is: no spec, no status), and of it each pod keeps its UID, the one
//! annotation the delegator reads and whether it is being deleted: what tenants put in their
//! pods' specs and other annotations never reaches the agent's memory beyond the list page
//! being decoded. The delegator is handed only that annotation.
//!
//! **Stopping.** On SIGTERM no update is started any more; running ones finish (within their
//! time limit) before the agent exits ([`super::Stop`]): an update killed part-way would be
//! finished or undone by the next one, but a delegate cut mid-write (host-local's reservation
//! file) can leak what it held. Updates run with an empty signal mask (the agent blocks SIGTERM
//! and SIGINT to read them from a signalfd; a child inheriting that mask could not be stopped).

use super::call::call;
use super::retry::Retries;
use super::status::PodKey;
use super::Agent;
use crate::metrics::Verb;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as KubeEvent, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PartialObjectMeta, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The annotation that selects a pod's networks (NPWG v1.3 §4.1).
pub const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";
/// The capability through which the runtime hands a plugin the pod's annotations.
pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";
/// How many pods' updates may run at once.
pub const IN_FLIGHT: usize = 4;
/// How long one update may take before it is killed (the delegator's own `deadline`, when the
/// operator sets one, ends it sooner).
const UPDATE_LIMIT: Duration = Duration::from_secs(300);
/// Pods per list page (the watcher's list and relists): 8 pods of the largest metadata the API
/// server admits (256 KiB of annotations each) are 2 MiB of JSON.
const LIST_PAGE: u32 = 8;
/// The Event's reason.
pub const REASON: &str = "NetworkUpdateFailed";
/// What the delegator's update says of a sandbox it has no state for
/// (`braid_attach::update::NOT_ATTACHED`): its DEL came first, the pod is going.
pub const NOT_ATTACHED: &str = "has no attachment to update";

/// Where the update finds things, as the node sees them (`--cni-bin-dir`, braid's conflist)
/// and where the node's root is in the agent's container (`--host-root`).
#[derive(Debug, Clone)]
pub struct Hotplug {
    /// The node's root, as the agent reaches it.
    pub host_root: PathBuf,
    /// The CNI bin dir (node path): the delegator, and `CNI_PATH` of the update.
    pub cni_bin_dir: PathBuf,
    /// braid's conflist (node path).
    pub conflist: PathBuf,
}

/// A pod as the watch last showed it: its UID, its networks annotation as written, and
/// whether it is being deleted — nothing else of it is kept.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    uid: String,
    annotation: Option<String>,
    terminating: bool,
}

impl Seen {
    fn networks(&self) -> Option<String> {
        normalize(self.annotation.as_deref())
    }
}

/// An empty or all-blank annotation selects nothing, as no annotation.
fn normalize(v: Option<&str>) -> Option<String> {
    v.map(str::trim).filter(|v| !v.is_empty()).map(str::to_string)
}

/// A sandbox's status file, as far as an update needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    /// `CNI_CONTAINERID` (from the file's name).
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// The pod's UID.
    pub pod_uid: String,
    /// The annotation the sandbox carries out.
    pub networks: Option<String>,
    /// Whether it carries out an annotation at all: `false` when an update failed part-way
    /// (`unsettled`), and the sandbox is then updated whatever the annotation says.
    pub settled: bool,
}

/// Reads the update's inputs from a status file; `None` for a file of a delegator that does not
/// record them (or no Kubernetes pod UID).
pub fn sandbox(path: &Path) -> Option<Sandbox> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".json")?;
    let container_id = stem.rsplit_once('_')?.1.to_string();
    let bytes = std::fs::read(path).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let s = v.get("sandbox")?;
    Some(Sandbox {
        container_id,
        netns: s.get("netns")?.as_str()?.to_string(),
        ifname: s.get("ifname")?.as_str()?.to_string(),
        pod_uid: v.get("podUID")?.as_str()?.to_string(),
        networks: normalize(v.get("networks").and_then(|n| n.as_str())),
        settled: v.get("unsettled").is_none(),
    })
}

/// Runs the hot-plug loop until the process ends, or until `stop` says so and no update is
/// running any more.
pub async fn run(client: kube::Client, agent: Agent, h: Hotplug, mut stop: tokio::sync::watch::Receiver<bool>) {
    // Metadata only: kube asks for `PartialObjectMeta` (the Accept header's `as=PartialObjectMetadata`).
    let api: Api<PartialObjectMeta<Pod>> = Api::all(client.clone());
    // Small list pages: a page is decoded whole, and a tenant's pod may carry 256 KiB of
    // annotations (the API server's limit), so the list of a full node never sits in memory at once.
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", agent.node)).page_size(LIST_PAGE);
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut tick = tokio::time::interval(agent.status_rescan);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pods: BTreeMap<PodKey, Seen> = BTreeMap::new();
    let mut listing: BTreeSet<PodKey> = BTreeSet::new();
    let mut retries = Retries::default();
    let mut busy: BTreeSet<PodKey> = BTreeSet::new();
    let mut again: BTreeSet<PodKey> = BTreeSet::new();
    let mut queue: VecDeque<PodKey> = VecDeque::new();
    let mut running: FuturesUnordered<Running> = FuturesUnordered::new();
    let mut failing = None::<String>;
    let mut stopping = false;
    crate::log(&format!("hot-plug: watching the pods of node {} for changes of {NETWORKS}", agent.node));
    loop {
        if stopping && running.is_empty() {
            crate::log("hot-plug: stopped; no update was running");
            return;
        }
        let mut touched: Vec<PodKey> = Vec::new();
        let retry_at = retries.next();
        tokio::select! {
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    if !running.is_empty() {
                        crate::log(&format!("hot-plug: stopping; waiting for {} running update(s) to finish", running.len()));
                    }
                }
                continue;
            }
            item = stream.next(), if !stopping => {
                let Some(item) = item else { return };
                match item {
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(p)) => {
                        if let Some((k, s)) = seen(&p.metadata) {
                            listing.insert(k.clone());
                            pods.insert(k.clone(), s);
                            touched.push(k);
                        }
                    }
                    Ok(Event::InitDone) => {
                        if failing.take().is_some() {
                            crate::log("hot-plug: the API server answers again; pods listed");
                        }
                        agent.metrics.api(Verb::list, "pods", "ok");
                        pods.retain(|k, _| listing.contains(k));
                        retries.retain(&pods.values().map(|p| p.uid.clone()).collect());
                    }
                    Ok(Event::Apply(p)) => {
                        if let Some((k, s)) = seen(&p.metadata) {
                            if pods.get(&k) != Some(&s) {
                                pods.insert(k.clone(), s);
                                touched.push(k);
                            }
                        }
                    }
                    Ok(Event::Delete(p)) => {
                        if let Some((k, s)) = seen(&p.metadata) {
                            retries.forget(&s.uid);
                            pods.remove(&k);
                        }
                    }
                    Err(e) => crate::log_changed(&mut failing, format!("hot-plug: pods of node {}: {e}; retrying with backoff", agent.node)),
                }
            }
            _ = tick.tick(), if !stopping => touched.extend(pods.keys().cloned()),
            _ = sleep_until(retry_at), if retry_at.is_some() && !stopping => {
                let due = retries.due_now(tokio::time::Instant::now());
                touched.extend(pods.iter().filter(|(_, p)| due.contains(&p.uid)).map(|(k, _)| k.clone()));
            }
            Some((key, uid, networks, outcome)) = running.next(), if !running.is_empty() => {
                busy.remove(&key);
                match outcome {
                    Ok(()) => {
                        retries.forget(&uid);
                        crate::log(&format!("hot-plug: pod {key}: networks now {}", networks.as_deref().unwrap_or("(none selected)")));
                    }
                    Err(why) if why.contains(NOT_ATTACHED) => {
                        // Its sandbox's DEL came first (the pod is going): nothing to report.
                        retries.forget(&uid);
                        crate::log(&format!("hot-plug: pod {key}: its sandbox is gone; nothing updated"));
                    }
                    Err(why) => {
                        crate::log(&format!("hot-plug: pod {key}: updating its networks to {:?} failed: {why}; retrying with backoff", networks.as_deref().unwrap_or("")));
                        if retries.failed(&uid, networks, &why, tokio::time::Instant::now()) {
                            event(&client, &agent, &key, &uid, &why).await;
                        }
                    }
                }
                if again.remove(&key) {
                    touched.push(key);
                }
                touched.extend(queue.drain(..));
            }
        }
        if stopping {
            continue;
        }
        // One read of the status directory for all the pods looked at.
        let files = if touched.is_empty() { BTreeMap::new() } else { super::status::newest_of(&agent.status_dir) };
        let now = tokio::time::Instant::now();
        for key in touched {
            if busy.contains(&key) {
                again.insert(key);
                continue;
            }
            let Some(pod) = pods.get(&key) else { continue };
            let Some(sb) = files.get(&key).and_then(|v| sandbox(&v.path)) else {
                continue;
            };
            let want = pod.networks();
            if !wants_update(pod, &sb) || !retries.due(&pod.uid, &want, now) {
                continue;
            }
            if running.len() >= IN_FLIGHT {
                if !queue.contains(&key) {
                    queue.push_back(key);
                }
                continue;
            }
            busy.insert(key.clone());
            let (h, pod, key) = (h.clone(), pod.clone(), key.clone());
            running.push(Box::pin(async move {
                let uid = pod.uid.clone();
                let networks = pod.networks();
                crate::log(&format!(
                    "hot-plug: pod {key}: {NETWORKS} is {:?}, the sandbox carries out {}: updating",
                    networks.as_deref().unwrap_or(""),
                    if sb.settled {
                        format!("{:?}", sb.networks.as_deref().unwrap_or(""))
                    } else {
                        "none of it (an update failed part-way)".into()
                    }
                ));
                let k = key.clone();
                let outcome = tokio::task::spawn_blocking(move || update(&h, &k, &pod, &sb))
                    .await
                    .unwrap_or_else(|e| Err(format!("the update's thread failed: {e}")));
                (key, uid, networks, outcome)
            }));
        }
    }
}

async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Whether `pod`'s sandbox `sb` needs an update: the same pod (UID), not being deleted, and
/// the sandbox not carrying out the annotation (another one, or none: unsettled).
fn wants_update(pod: &Seen, sb: &Sandbox) -> bool {
    sb.pod_uid == pod.uid && !pod.terminating && (!sb.settled || sb.networks != pod.networks())
}

/// One pod's update in flight: the pod, its UID, the annotation carried out, the outcome.
type Running =
    std::pin::Pin<Box<dyn std::future::Future<Output = (PodKey, String, Option<String>, Result<(), String>)> + Send>>;

fn seen(m: &ObjectMeta) -> Option<(PodKey, Seen)> {
    let key = PodKey { namespace: m.namespace.clone()?, name: m.name.clone()? };
    let annotation = m.annotations.as_ref().and_then(|a| a.get(NETWORKS)).cloned();
    Some((key, Seen { uid: m.uid.clone()?, annotation, terminating: m.deletion_timestamp.is_some() }))
}

/// `CNI_ARGS` as containerd passes them for a pod's sandbox.
fn cni_args(key: &PodKey, sb: &Sandbox) -> String {
    format!(
        "K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={};IgnoreUnknown=1",
        key.namespace, key.name, sb.container_id, sb.pod_uid
    )
}

/// Runs `delegator update` for one pod's sandbox (blocking): `Ok` when it carried the
/// annotation out, else the delegator's error message.
fn update(h: &Hotplug, key: &PodKey, pod: &Seen, sb: &Sandbox) -> Result<(), String> {
    let delegator = crate::options::on_host(&h.host_root, &h.cni_bin_dir.join("delegator"));
    // The one annotation the delegator reads: a tenant's other annotations stay out of it.
    let mut annotations = serde_json::Map::new();
    if let Some(v) = &pod.annotation {
        annotations.insert(NETWORKS.into(), v.clone().into());
    }
    let caps = serde_json::json!({ POD_ANNOTATIONS: annotations });
    let mut command = std::process::Command::new(&delegator);
    empty_signal_mask(&mut command);
    let mut child = command
        .arg("update")
        .arg("--root")
        .arg(&h.host_root)
        .arg("--conflist")
        .arg(&h.conflist)
        .env_clear()
        .env("CNI_CONTAINERID", &sb.container_id)
        .env("CNI_NETNS", &sb.netns)
        .env("CNI_IFNAME", &sb.ifname)
        .env("CNI_ARGS", cni_args(key, sb))
        .env("CNI_PATH", &h.cni_bin_dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", delegator.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(caps.to_string().as_bytes());
    }
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = std::io::Read::read_to_end(s, &mut out);
        }
        out
    });
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < UPDATE_LIMIT => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the update did not end within {} s and was killed", UPDATE_LIMIT.as_secs()));
            }
            Err(e) => return Err(format!("waiting for the update: {e}")),
        }
    };
    let out = reader.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    let msg = serde_json::from_slice::<serde_json::Value>(&out)
        .ok()
        .and_then(|v| v.get("msg").and_then(|m| m.as_str()).map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&out).trim().to_string());
    Err(if msg.is_empty() { format!("the delegator exited with {status}") } else { msg })
}

/// Makes `command`'s child start with no signal blocked: the agent blocks SIGTERM and SIGINT
/// (read from a signalfd, [`crate::run`]), and a process inherits its parent's mask across
/// `execve(2)` — Rust's `Command` does not reset it — so the update and every delegate it runs
/// could not be stopped by either. The one implementation, shared with the delegator's helper.
pub use cni_runtime::invoke::empty_signal_mask;

/// A Warning Event on the pod: what `kubectl describe pod` shows. Created, never retried (the
/// log line is the record).
async fn event(client: &kube::Client, agent: &Agent, key: &PodKey, uid: &str, why: &str) {
    let involved = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        uid: Some(uid.to_string()),
        ..ObjectReference::default()
    };
    // client-go's recorder names Events `<object>.<unique suffix>`.
    let name = format!("{}.{:x}", key.name, k8s_openapi::jiff::Timestamp::now().as_nanosecond());
    let message = format!("{NETWORKS} could not be carried out on node {}: {why}", agent.node);
    let ev = super::event::warning(&agent.node, name, involved, (REASON, "UpdateNetworks"), message);
    let api: Api<KubeEvent> = Api::namespaced(client.clone(), &key.namespace);
    if let Err(f) = call(agent, Verb::create, "events", api.create(&PostParams::default(), &ev)).await {
        crate::log(&format!("hot-plug: pod {key}: cannot create its Event: {f}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What decides an update: a sandbox that an update left part-way is updated even when its
    /// pod's annotation is back to what it was (a reverted edit); a pod being deleted never is.
    #[test]
    fn an_unsettled_sandbox_is_updated_and_a_terminating_pod_is_left_alone() {
        let pod =
            |a: Option<&str>, terminating| Seen { uid: "u".into(), annotation: a.map(str::to_string), terminating };
        let sb = |networks: Option<&str>, settled| Sandbox {
            container_id: "c".into(),
            netns: "/n".into(),
            ifname: "eth0".into(),
            pod_uid: "u".into(),
            networks: networks.map(str::to_string),
            settled,
        };
        assert!(!wants_update(&pod(Some("red"), false), &sb(Some("red"), true)), "carried out");
        assert!(wants_update(&pod(Some("red,blue"), false), &sb(Some("red"), true)), "edited");
        assert!(wants_update(&pod(Some("red"), false), &sb(None, false)), "reverted after a failure");
        assert!(wants_update(&pod(None, false), &sb(None, false)));
        assert!(!wants_update(&pod(Some("red,blue"), true), &sb(Some("red"), true)), "terminating");
        assert!(!wants_update(&pod(Some("red"), true), &sb(None, false)), "terminating");
        let other = Seen { uid: "v".into(), annotation: Some("red,blue".into()), terminating: false };
        assert!(!wants_update(&other, &sb(Some("red"), true)), "another pod of that name");
    }

    /// The delegator gets the pod's networks annotation and nothing else; its children no
    /// blocked signal even though the agent blocks SIGTERM and SIGINT.
    #[test]
    fn updates_start_with_an_empty_signal_mask() {
        let out = std::thread::spawn(|| {
            let mut mask = nix::sys::signal::SigSet::empty();
            mask.add(nix::sys::signal::Signal::SIGTERM);
            mask.add(nix::sys::signal::Signal::SIGINT);
            mask.thread_block().unwrap();
            // grep itself, not a shell: dash clears its signal mask when it starts.
            let mut c = std::process::Command::new("grep");
            c.args(["SigBlk", "/proc/self/status"]);
            empty_signal_mask(&mut c);
            c.output().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "SigBlk:\t0000000000000000");
    }

    #[test]
    fn the_sandbox_is_read_from_the_status_file() {
        let dir = std::env::temp_dir().join(format!("braid-hotplug-sandbox-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("team-a_web-0_0123abcd.json");
        let body = r#"{"networkStatus":[],"podUID":"u-1","sandbox":{"netns":"/var/run/netns/cni-1","ifname":"eth0"},"networks":" a,b "}"#;
        std::fs::write(&path, body).unwrap();
        assert_eq!(
            sandbox(&path),
            Some(Sandbox {
                container_id: "0123abcd".into(),
                netns: "/var/run/netns/cni-1".into(),
                ifname: "eth0".into(),
                pod_uid: "u-1".into(),
                networks: Some("a,b".into()),
                settled: true,
            })
        );
        // An update that failed part-way: unsettled, whatever it tried.
        let body = r#"{"networkStatus":[],"podUID":"u-1","sandbox":{"netns":"/n","ifname":"eth0"},"unsettled":{"networks":"a","error":"e"}}"#;
        std::fs::write(&path, body).unwrap();
        let sb = sandbox(&path).unwrap();
        assert_eq!((sb.settled, sb.networks), (false, None));
        // An older delegator's file (no sandbox) is not updated.
        std::fs::write(&path, r#"{"networkStatus":[],"podUID":"u-1"}"#).unwrap();
        assert_eq!(sandbox(&path), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_annotation_is_no_annotation_and_args_are_containerds() {
        assert_eq!(normalize(Some("  ")), None);
        assert_eq!(normalize(None), None);
        let key = PodKey { namespace: "ns".into(), name: "p".into() };
        let sb = Sandbox {
            container_id: "c1".into(),
            netns: String::new(),
            ifname: "eth0".into(),
            pod_uid: "u".into(),
            networks: None,
            settled: true,
        };
        assert_eq!(
            cni_args(&key, &sb),
            "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u;IgnoreUnknown=1"
        );
    }
}
