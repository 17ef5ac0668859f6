//! The delegator's network-status files published on the pods: `<statusDir>/<namespace>_<pod>_<container ID>.json`
//! (written atomically by the delegator after an ADD, removed by its DEL) becomes the pod's
//! `k8s.v1.cni.cncf.io/network-status` annotation — the file's NPWG document byte for byte, set
//! with a JSON merge patch of that one annotation.
//!
//! **API requests in proportion to change, not to pods.** A pod's status is published when its
//! document changes (inotify: the delegator's rename is an `IN_MOVED_TO`), and once at start-up
//! for each file this process has not published. Nothing is published again on a timer: every
//! `--status-rescan` the directory's modification times (local `stat`s, never the API) are
//! compared with what was last handled, for inotify events that were lost. At rest the agent
//! sends no request at all; a pod start costs one PATCH (Multus's thin plugin: a GET and an
//! update per ADD). A pod that is gone, refused or replaced is logged once per file version.
//!
//! **Pod identity.** The file records `K8S_POD_UID` (`podUID`), and the patch carries it as
//! `metadata.uid`: the API server refuses (422 Invalid: `metadata.uid` is immutable) a patch
//! whose uid differs from the object's, so a StatefulSet pod deleted and created again under
//! the same name never gets the old sandbox's addresses; the mismatch is logged and that file
//! stays unpublished. The UID also pins the node (a pod's `spec.nodeName` never changes, and
//! only this node's runtime ran its sandbox), so no GET is needed. A file of an older delegator
//! (a bare list, no UID) costs a GET first, as before: the pod must be bound to this node, and
//! the patch then carries the UID the GET saw.
//!
//! **No pod holds up another.** At most [`IN_FLIGHT`] patches are in flight at once, each
//! bounded by `--api-timeout` ([`super::call`]); a pod that fails is retried on its own
//! backoff (0.25 s doubling to 30 s) while the others go on. The pod's ADD never waits for any
//! of it. When a pod has files of several sandboxes, the newest is published.

use super::call::{call, Failure};
use super::status_files::{PodKey, Version};
use super::Agent;
use crate::log_changed;
use crate::metrics::Verb;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use inotify::{Inotify, WatchMask};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// The pod annotation (NPWG v1.3 §5).
pub const ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";

/// How many pods' publications may be in flight at once: enough that one slow pod never holds
/// up the rest, few enough that an agent catching up after an outage never floods the API server.
pub const IN_FLIGHT: usize = 4;
/// First and last retry delay while the API server fails.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(30));

/// A status file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// `podUID`: the pod the delegator attached (`K8S_POD_UID`); `None` in a file of an older
    /// delegator, or when the runtime did not pass it.
    pub pod_uid: Option<String>,
    /// The annotation's value: the NPWG document (a JSON list) as the delegator wrote it.
    pub status: String,
    /// Its interfaces, as their `AddedInterface` Events report them ([`super::added`]).
    pub interfaces: Vec<super::added::Added>,
    /// The document, parsed.
    pub value: serde_json::Value,
    /// `claims`: the claim-backed attachments, reported on their ResourceClaims
    /// ([`super::claim_status`]).
    pub claims: Vec<super::claim_status::ClaimEntry>,
}

/// The file as the delegator writes it: `{"networkStatus": [...], "podUID": "..."}`; or, from
/// a delegator before the UID was recorded, the bare list (without its final newline).
pub fn document(bytes: &[u8]) -> Result<Document, String> {
    #[derive(serde::Deserialize)]
    struct File<'a> {
        #[serde(rename = "networkStatus", borrow)]
        network_status: &'a serde_json::value::RawValue,
        #[serde(rename = "podUID", default)]
        pod_uid: Option<String>,
        #[serde(default)]
        addresses: Option<serde_json::Value>,
        #[serde(default)]
        claims: Vec<super::claim_status::ClaimEntry>,
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let list = |raw: &str| match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v @ serde_json::Value::Array(_)) => Ok((raw.to_string(), v)),
        Ok(_) => Err("not a JSON list (an NPWG network-status document is one)".to_string()),
        Err(e) => Err(format!("not JSON: {e}")),
    };
    if text.trim_start().starts_with('{') {
        let f: File = serde_json::from_str(text).map_err(|e| format!("not a network-status file: {e}"))?;
        let (status, v) = list(f.network_status.get()).map_err(|e| format!("networkStatus: {e}"))?;
        let interfaces = super::added::of_document(&v, f.addresses.as_ref());
        return Ok(Document {
            pod_uid: f.pod_uid.filter(|u| !u.is_empty()),
            status,
            interfaces,
            value: v,
            claims: f.claims,
        });
    }
    let (status, v) = list(text)?;
    Ok(Document {
        pod_uid: None,
        interfaces: super::added::of_document(&v, None),
        status,
        value: v,
        claims: Vec::new(),
    })
}

/// What became of one attempt.
#[derive(Debug)]
enum Outcome {
    /// Nothing more to do for this version (published, or given up on: logged once).
    Done,
    /// Try again later (the API server failed or did not answer).
    Retry(String),
}

/// The publisher's state between events: which version of each pod was handled, which pods
/// wait (and until when), which are in flight.
#[derive(Debug, Default)]
pub struct Queue {
    handled: BTreeMap<PodKey, Version>,
    waiting: BTreeMap<PodKey, (u32, Instant)>,
    in_flight: BTreeSet<PodKey>,
}

impl Queue {
    /// `pod` changed (inotify): publish it as soon as a slot is free.
    pub fn wake(&mut self, pod: PodKey, now: Instant) {
        let attempt = self.waiting.get(&pod).map_or(0, |(a, _)| *a);
        self.waiting.insert(pod, (attempt, now));
    }

    /// A rescan (and the start-up scan): every pod whose newest file is not the version last
    /// handled waits. Local reads only.
    pub fn rescan(&mut self, newest: &BTreeMap<PodKey, Version>, now: Instant) {
        for (pod, v) in newest {
            if self.handled.get(pod) != Some(v) && !self.in_flight.contains(pod) {
                self.waiting.entry(pod.clone()).or_insert((0, now));
            }
        }
        // A pod whose files are all gone is forgotten: its next file is new.
        self.handled.retain(|pod, _| newest.contains_key(pod));
    }

    /// The pods to start now (due, not in flight), up to the free slots.
    pub fn due(&mut self, now: Instant) -> Vec<(PodKey, u32)> {
        let free = IN_FLIGHT.saturating_sub(self.in_flight.len());
        let ready: Vec<(PodKey, u32)> = self
            .waiting
            .iter()
            .filter(|(p, (_, t))| *t <= now && !self.in_flight.contains(*p))
            .take(free)
            .map(|(p, (a, _))| (p.clone(), *a))
            .collect();
        for (p, _) in &ready {
            self.waiting.remove(p);
            self.in_flight.insert(p.clone());
        }
        ready
    }

    /// When the next waiting pod is due (in flight ones excepted).
    pub fn next_due(&self) -> Option<Instant> {
        self.waiting.iter().filter(|(p, _)| !self.in_flight.contains(*p)).map(|(_, (_, t))| *t).min()
    }

    /// An attempt ended: `version` handled (`Some`), or retry at `retry_at` with `attempt`.
    fn finish(&mut self, pod: PodKey, result: Result<Option<Version>, (u32, Instant)>) {
        self.in_flight.remove(&pod);
        match result {
            Ok(Some(v)) => {
                self.handled.insert(pod, v);
            }
            Ok(None) => {
                self.handled.remove(&pod);
            }
            Err((attempt, at)) => {
                // A newer document woke it meanwhile: that one goes first, now.
                self.waiting.entry(pod).or_insert((attempt, at));
            }
        }
    }

    /// Pods waiting or in flight (`braid_install_status_pending`).
    pub fn pending(&self) -> usize {
        self.waiting.keys().filter(|p| !self.in_flight.contains(*p)).count() + self.in_flight.len()
    }
}

/// The `AddedInterface` Events this process created (or found created) per pod: names of
/// [`super::added::name`].
type Announced = std::rc::Rc<std::cell::RefCell<BTreeMap<PodKey, BTreeSet<String>>>>;

/// Publishes until the process ends.
pub async fn run(client: kube::Client, agent: Agent) {
    let announced: Announced = Default::default();
    let mut failing = None;
    let inotify = Inotify::init().and_then(|i| {
        i.watches()
            .add(
                &agent.status_dir,
                WatchMask::MOVED_TO | WatchMask::CLOSE_WRITE | WatchMask::DELETE | WatchMask::MOVED_FROM,
            )
            .map(|_| i)
    });
    let mut buffer = [0u8; 4096];
    let mut events = match inotify.and_then(|i| i.into_event_stream(&mut buffer[..])) {
        Ok(s) => Some(s),
        Err(e) => {
            crate::log(&format!(
                "network-status: cannot watch {} ({e}); comparing its files' modification times every {} s instead",
                agent.status_dir.display(),
                agent.status_rescan.as_secs()
            ));
            None
        }
    };
    let mut queue = Queue::default();
    // Which files exist: one directory scan per rescan, one stat per event (status_index).
    let mut index = super::status_index::Index::default();
    let mut running = FuturesUnordered::new();
    // The first tick is at once: the start-up scan.
    let mut rescan = tokio::time::interval(agent.status_rescan);
    rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let due = queue.next_due();
        tokio::select! {
            Some(ev) = async { match events.as_mut() { Some(s) => s.next().await, None => std::future::pending().await } } => {
                match ev {
                    Ok(ev) => {
                        if let Some(pod) = ev.name.and_then(|n| index.changed(&agent.status_dir, &n.to_string_lossy())) {
                            queue.wake(pod, Instant::now());
                        } else if ev.mask.contains(inotify::EventMask::Q_OVERFLOW) {
                            queue.rescan(&index.rescan(&agent.status_dir), Instant::now());
                        }
                    }
                    Err(e) => log_changed(&mut failing, format!("network-status: inotify: {e}")),
                }
            }
            _ = rescan.tick() => {
                let newest = index.rescan(&agent.status_dir);
                queue.rescan(&newest, Instant::now());
                announced.borrow_mut().retain(|p, _| newest.contains_key(p));
                agent.metrics.status_rescans.inc();
            }
            _ = sleep_until(due), if due.is_some() => {}
            Some((pod, attempt, version, outcome)) = running.next(), if !running.is_empty() => {
                let attempt: u32 = attempt;
                let result = match outcome {
                    Outcome::Done => Ok(version),
                    Outcome::Retry(why) => {
                        let delay = BACKOFF.0.saturating_mul(1 << attempt.min(8)).min(BACKOFF.1);
                        log_changed(&mut failing, format!("network-status: {why}; retrying with backoff (pod start is not held up)"));
                        Err((attempt.saturating_add(1), Instant::now() + delay))
                    }
                };
                queue.finish(pod, result);
            }
        }
        for (pod, attempt) in queue.due(Instant::now()) {
            let (client, agent, announced) = (client.clone(), agent.clone(), announced.clone());
            let version = index.newest(&pod);
            running.push(async move {
                let outcome = match &version {
                    Some(v) => publish(&client, &agent, &pod, v, &announced).await,
                    None => Outcome::Done,
                };
                (pod, attempt, version, outcome)
            });
        }
        agent.metrics.pending.set(i64::try_from(queue.pending()).unwrap_or(i64::MAX));
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// One attempt for `pod`'s file `v`; once published, its interfaces' `AddedInterface` Events.
async fn publish(client: &kube::Client, agent: &Agent, pod: &PodKey, v: &Version, announced: &Announced) -> Outcome {
    let bytes = cni_runtime::files::read_regular(
        &v.path,
        cni_runtime::files::MAX_CONFIG_FILE,
        cni_runtime::files::Links::Refuse,
    )
    .map_err(|e| e.to_string());
    let doc = match bytes.and_then(|b| document(&b)) {
        Ok(d) => d,
        Err(why) => {
            crate::log(&format!("network-status of pod {pod}: {} is not published: {why}", v.path.display()));
            agent.metrics.file("invalid");
            return Outcome::Done;
        }
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let uid = match doc.pod_uid.clone() {
        Some(uid) => uid,
        None => match legacy_uid(agent, &api, pod, &doc).await {
            Ok(Some(uid)) => uid,
            Ok(None) => return Outcome::Done,
            Err(f) => return failed(agent, pod, v, "reading", f),
        },
    };
    // The uid guards the patch: metadata.uid is immutable, so kube-apiserver refuses a merge
    // patch whose uid is not the stored pod's — 422 Invalid, `metadata.uid: Invalid value:
    // "…": field is immutable` (ValidateObjectMetaUpdate; a patch carries no Preconditions, so
    // it is not the 409 a DELETE's precondition gets) — as seen on a real v1.36 API server
    // (integration/tests/kube_node.rs).
    // A static pod's sandbox has the kubelet's UID, not its mirror pod's (super::static_pod).
    let mirror = super::static_pod::is_kubelet_hash(&uid);
    let params = PatchParams::default();
    let sent = if mirror {
        let ops = match serde_json::from_value(super::static_pod::patch(&uid, ANNOTATION, &doc.status)) {
            Ok(p) => p,
            Err(e) => return Outcome::Retry(format!("pod {pod}: the mirror pod's patch: {e}")),
        };
        call(agent, Verb::patch, "pods", api.patch(&pod.name, &params, &Patch::Json::<()>(ops))).await
    } else {
        let merge = serde_json::json!({"metadata": {"uid": uid, "annotations": {ANNOTATION: doc.status}}});
        call(agent, Verb::patch, "pods", api.patch(&pod.name, &params, &Patch::Merge(&merge))).await
    };
    match sent {
        Ok(_) => {
            crate::log(&format!("network-status of pod {pod}: published from {}", v.path.display()));
            agent.metrics.file("published");
            if let Ok(age) = SystemTime::now().duration_since(v.modified) {
                agent.metrics.publish_latency.observe(age.as_secs_f64());
            }
            if let Some(retry) = report_claims(client, agent, pod, &doc).await {
                return retry;
            }
            if agent.interface_events {
                // A static pod's sandbox UID is the kubelet's, not its mirror pod's: the Event
                // then names the pod without a UID.
                announce(client, agent, pod, v, &doc, (!mirror).then_some(uid.as_str()), announced).await;
            }
            Outcome::Done
        }
        Err(f) if f.is_uid_refused() || (mirror && f.code() == Some(422)) => {
            crate::log(&format!(
                "network-status of pod {pod}: not published from {}: the pod of that name is another pod now (the file is for UID {uid}: recreated under the same name?)",
                v.path.display()
            ));
            agent.metrics.file("pod_replaced");
            Outcome::Done
        }
        Err(f) => failed(agent, pod, v, "patching", f),
    }
}

/// The claim-backed attachments of `doc` reported on their claims ([`super::claim_status`]):
/// `Some(Retry)` when the API server failed in a way a retry may mend (the pod's patch is then
/// sent again with the claims': the same merge patch, harmless).
async fn report_claims(client: &kube::Client, agent: &Agent, pod: &PodKey, doc: &Document) -> Option<Outcome> {
    use super::claim_status;
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    for group in claim_status::by_claim(&doc.claims) {
        let Some(apply) = claim_status::apply(&group, &doc.value, &doc.interfaces, &now) else { continue };
        let c = group[0];
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &c.namespace);
        let params = PatchParams::apply(&c.driver).force();
        match call(agent, Verb::patch, "resourceclaims", api.patch_status(&c.name, &params, &Patch::Apply(&apply)))
            .await
        {
            Ok(_) => crate::log(&format!(
                "claim {}/{} of pod {pod}: status.devices reported ({})",
                c.namespace,
                c.name,
                group.iter().map(|e| e.interface.as_str()).collect::<Vec<_>>().join(", ")
            )),
            Err(f) if f.code() == Some(404) || f.is_uid_refused() => crate::log(&format!(
                "claim {}/{} of pod {pod}: gone or replaced, its status is not reported ({f})",
                c.namespace, c.name
            )),
            Err(f) if f.retryable() => {
                return Some(Outcome::Retry(format!("reporting claim {}/{} of pod {pod}: {f}", c.namespace, c.name)))
            }
            Err(f) => crate::log(&format!(
                "claim {}/{} of pod {pod}: its status was refused ({f}); not retried",
                c.namespace, c.name
            )),
        }
    }
    None
}

/// The `AddedInterface` Events of `doc`'s interfaces that this process has not announced yet
/// ([`super::added`]), one after the other (each bounded by `--api-timeout`).
async fn announce(
    client: &kube::Client,
    agent: &Agent,
    pod: &PodKey,
    v: &Version,
    doc: &Document,
    uid: Option<&str>,
    announced: &Announced,
) {
    use super::added;
    let stem = v.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let sandbox = stem.splitn(3, '_').nth(2).unwrap_or_default().to_string();
    let key = doc.pod_uid.clone().unwrap_or_default();
    for a in &doc.interfaces {
        let name = added::name(&pod.name, &key, &sandbox, a);
        if announced.borrow().get(pod).is_some_and(|s| s.contains(&name)) {
            continue;
        }
        let ev = added::event(&agent.node, &pod.namespace, &pod.name, uid, name.clone(), a);
        if added::send(client, agent, &pod.namespace, ev).await == added::Sent::Reported {
            announced.borrow_mut().entry(pod.clone()).or_default().insert(name);
        }
    }
}

/// A file without a UID (an older delegator): the pod is read first, as before — bound to this
/// node, not already showing the document — and its UID becomes the patch's precondition.
async fn legacy_uid(agent: &Agent, api: &Api<Pod>, pod: &PodKey, doc: &Document) -> Result<Option<String>, Failure> {
    let current = call(agent, Verb::get, "pods", api.get(&pod.name)).await?;
    let on = current.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
    if on != agent.node {
        crate::log(&format!(
            "network-status of pod {pod}: not published, the pod is bound to node {on:?}, not this node {:?}",
            agent.node
        ));
        agent.metrics.file("refused");
        return Ok(None);
    }
    if current.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION)) == Some(&doc.status) {
        agent.metrics.file("published");
        return Ok(None);
    }
    Ok(current.metadata.uid)
}

/// A failed request: retried unless the API server's answer says a retry cannot help; logged
/// once for this version of the file.
fn failed(agent: &Agent, pod: &PodKey, v: &Version, doing: &str, f: Failure) -> Outcome {
    if f.code() == Some(404) {
        crate::log(&format!(
            "network-status of pod {pod}: the pod is gone; {} is not published (logged once)",
            v.path.display()
        ));
        agent.metrics.file("pod_gone");
        return Outcome::Done;
    }
    if !f.retryable() {
        crate::log(&format!("network-status of pod {pod}: {doing} the pod was refused ({f}); not retried"));
        agent.metrics.file("refused");
        return Outcome::Done;
    }
    Outcome::Retry(format!("{doing} pod {pod}: {f}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status_files::{newest, newest_of, pod_of};
    use std::path::PathBuf;

    #[test]
    fn file_names() {
        let k = |ns: &str, n: &str| Some(PodKey { namespace: ns.into(), name: n.into() });
        assert_eq!(pod_of("default_web-0_0123abcd.json"), k("default", "web-0"));
        assert_eq!(pod_of("kube-system_a.b_c_d.json"), k("kube-system", "a.b"));
        for no in [
            "default_web.json",
            ".default_web_1.json.tmp42",
            "default_web_1.json.tmp",
            "_a_b.json",
            "a__b.json",
            "a_b_.json",
        ] {
            assert_eq!(pod_of(no), None, "{no}");
        }
    }

    #[test]
    fn documents_of_both_forms() {
        let doc = |b: &[u8]| document(b).unwrap();
        assert_eq!(
            doc(b"[{\"name\":\"x\"}]\n"),
            Document {
                pod_uid: None,
                status: "[{\"name\":\"x\"}]".into(),
                interfaces: vec![],
                value: serde_json::json!([{"name": "x"}]),
                claims: vec![]
            }
        );
        assert_eq!(doc(b"[]").status, "[]");
        // The delegator's form: the list exactly as written, and the UID.
        let d = doc(b"{\"networkStatus\":[{\"name\":\"x\",\"ips\":[\"198.18.0.2\"]}],\"podUID\":\"u-1\"}\n");
        assert_eq!(
            d,
            Document {
                pod_uid: Some("u-1".into()),
                status: "[{\"name\":\"x\",\"ips\":[\"198.18.0.2\"]}]".into(),
                interfaces: vec![],
                value: serde_json::json!([{"name": "x", "ips": ["198.18.0.2"]}]),
                claims: vec![]
            }
        );
        // A claim-backed attachment: its claim, reported on the claim (super::claim_status).
        let d = doc(br#"{"networkStatus":[],"claims":[{"namespace":"t","name":"c","uid":"u","request":"net","driver":"net.braid-cni.io","pool":"n","device":"d","shareID":"s","interface":"net1"}]}"#);
        assert_eq!((d.claims[0].name.as_str(), d.claims[0].share_id.as_deref()), ("c", Some("s")));
        // The delegator's addresses beside it: what the AddedInterface Events say.
        let d = doc(b"{\"networkStatus\":[{\"name\":\"ns/x\",\"interface\":\"net1\",\"ips\":[\"198.18.0.2\"]}],\"addresses\":{\"net1\":[\"198.18.0.2/24\"]}}");
        assert_eq!(super::super::added::message(&d.interfaces[0]), "Add net1 [198.18.0.2/24] from ns/x");
        assert_eq!(doc(b"{\"networkStatus\":[]}").pod_uid, None);
        assert!(document(b"{}\n").unwrap_err().contains("not a network-status file"));
        assert!(document(b"{\"networkStatus\":{}}").unwrap_err().contains("not a JSON list"));
        assert!(document(b"[").unwrap_err().contains("not JSON"));
        assert!(document(&[0xff]).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn the_newest_file_of_a_pod() {
        let d = std::env::temp_dir().join(format!("braid-status-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let pod = PodKey { namespace: "ns".into(), name: "p".into() };
        assert!(newest(&d, &pod).is_none());
        let old = d.join("ns_p_aaa.json");
        std::fs::write(&old, "[1]\n").unwrap();
        std::fs::write(d.join("ns_p2_zzz.json"), "[3]\n").unwrap();
        let t = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options().write(true).open(&old).unwrap().set_modified(t).unwrap();
        std::fs::write(d.join("ns_p_bbb.json"), "[2]\n").unwrap();
        let v = newest(&d, &pod).unwrap();
        assert_eq!(v.path.file_name().unwrap().to_str().unwrap(), "ns_p_bbb.json");
        assert_eq!(newest_of(&d).len(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn pod(n: &str) -> PodKey {
        PodKey { namespace: "ns".into(), name: n.into() }
    }

    fn version(n: &str, secs: u64) -> Version {
        Version {
            path: PathBuf::from(format!("/s/ns_{n}_c.json")),
            modified: SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
            len: 10,
        }
    }

    /// A rescan sends nothing for a file already handled: requests follow changes, not time.
    #[test]
    fn a_rescan_wakes_only_what_changed_since_it_was_handled() {
        let now = Instant::now();
        let mut q = Queue::default();
        let files: BTreeMap<PodKey, Version> = [(pod("a"), version("a", 1)), (pod("b"), version("b", 1))].into();
        q.rescan(&files, now);
        let started = q.due(now);
        assert_eq!(started.len(), 2, "start-up: every file once");
        for (p, _) in started {
            let v = files[&p].clone();
            q.finish(p, Ok(Some(v)));
        }
        for _ in 0..3 {
            q.rescan(&files, now);
            assert!(q.due(now).is_empty(), "nothing changed, nothing to send");
        }
        let mut changed = files.clone();
        changed.insert(pod("b"), version("b", 2));
        q.rescan(&changed, now);
        assert_eq!(q.due(now), vec![(pod("b"), 0)]);
        assert_eq!(q.pending(), 1);
    }

    /// At most IN_FLIGHT at once; a pod retrying with backoff does not keep others waiting.
    #[test]
    fn bounded_in_flight_and_a_failing_pod_waits_alone() {
        let now = Instant::now();
        let mut q = Queue::default();
        for i in 0..10 {
            q.wake(pod(&format!("p{i}")), now);
        }
        let first = q.due(now);
        assert_eq!(first.len(), IN_FLIGHT);
        assert!(q.due(now).is_empty(), "no slot free");
        // One fails: it waits for its backoff; the slot goes to the next pod at once.
        let (failing, _) = first[0].clone();
        q.finish(failing.clone(), Err((1, now + Duration::from_secs(30))));
        let next = q.due(now);
        assert_eq!(next.len(), 1);
        assert_ne!(next[0].0, failing);
        assert!(q.next_due().is_some_and(|t| t <= now), "others are due now");
        // A pod in flight is never started twice; woken meanwhile, it goes again after.
        let (busy, _) = first[1].clone();
        q.wake(busy.clone(), now);
        assert!(!q.due(now).iter().any(|(p, _)| *p == busy));
        q.finish(busy.clone(), Ok(Some(version("x", 1))));
        assert!(q.due(now).iter().any(|(p, _)| *p == busy));
    }
}
