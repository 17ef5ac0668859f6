//! The delegator's network-status files published on the pods: `<statusDir>/<namespace>_<pod>_<container ID>.json`
//! (written atomically by the delegator after an ADD, removed by its DEL) becomes the pod's
//! `k8s.v1.cni.cncf.io/network-status` annotation — the file's NPWG document byte for byte
//! (without the file's final newline), set with a JSON merge patch of that one annotation.
//!
//! - The directory is watched with inotify (the delegator's rename is an `IN_MOVED_TO`); every
//!   file is looked at once at start-up, so an agent restart publishes them all again (a pod
//!   whose annotation already holds the document is not patched).
//! - Only pods whose `spec.nodeName` is this node are patched (the ValidatingAdmissionPolicy
//!   shipped in deploy/kubernetes refuses anything else); a pod that is gone (404), or whose
//!   files are gone (its sandbox deleted), is dropped.
//! - While the API server fails, a pod is retried with backoff (0.25 s doubling to 30 s); the
//!   pod's ADD never waits for any of it. When a pod has files of several sandboxes, the newest
//!   is published.

use super::Agent;
use crate::log_changed;
use futures::StreamExt;
use inotify::{Inotify, WatchMask};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// The pod annotation (NPWG v1.3 §5).
pub const ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";

/// How often the directory is read in full besides inotify (a lost event, an overflowed queue).
const RESCAN: Duration = Duration::from_secs(60);
/// First and last retry delay while the API server fails.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(30));

/// A pod, as its status file names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The pod a status file is for: `<namespace>_<pod>_<container ID>.json` (namespaces and pod
/// names have no `_`; the delegator writes no other name). Temporary files (`.`-prefixed) and
/// anything else are not.
pub fn pod_of(file_name: &str) -> Option<PodKey> {
    if file_name.starts_with('.') {
        return None;
    }
    let stem = file_name.strip_suffix(".json")?;
    let (namespace, rest) = stem.split_once('_')?;
    let (name, container) = rest.split_once('_')?;
    (!namespace.is_empty() && !name.is_empty() && !container.is_empty())
        .then(|| PodKey { namespace: namespace.into(), name: name.into() })
}

/// The pod's newest status file (by modification time, then name) and its document; `None`
/// when it has none.
pub fn newest(dir: &Path, pod: &PodKey) -> Option<(PathBuf, Result<String, String>)> {
    let prefix = format!("{}_{}_", pod.namespace, pod.name);
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) || pod_of(&name).as_ref() != Some(pod) {
            continue;
        }
        let Ok(modified) = e.metadata().and_then(|m| m.modified()) else { continue };
        let path = e.path();
        if best.as_ref().is_none_or(|(t, p)| (modified, &path) > (*t, p)) {
            best = Some((modified, path));
        }
    }
    let (_, path) = best?;
    let doc =
        cni_runtime::files::read_regular(&path, cni_runtime::files::MAX_CONFIG_FILE, cni_runtime::files::Links::Refuse)
            .map_err(|e| e.to_string())
            .and_then(|b| document(&b));
    Some((path, doc))
}

/// The annotation's value from a file's bytes: the NPWG document (a JSON list) as written,
/// without the final newline.
pub fn document(bytes: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Array(_)) => Ok(text.to_string()),
        Ok(_) => Err("not a JSON list (an NPWG network-status document is one)".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// What became of one attempt.
enum Outcome {
    /// Nothing more to do for this pod (published, already current, gone, or not ours).
    Done,
    /// Try again later (the API server failed).
    Retry(String),
}

/// Publishes until the process ends.
pub async fn run(client: kube::Client, agent: Agent) {
    let mut failing = None;
    let inotify = Inotify::init()
        .and_then(|i| i.watches().add(&agent.status_dir, WatchMask::MOVED_TO | WatchMask::CLOSE_WRITE).map(|_| i));
    let mut buffer = [0u8; 4096];
    let mut events = match inotify.and_then(|i| i.into_event_stream(&mut buffer[..])) {
        Ok(s) => Some(s),
        Err(e) => {
            crate::log(&format!(
                "network-status: cannot watch {} ({e}); reading it every {} s instead",
                agent.status_dir.display(),
                RESCAN.as_secs()
            ));
            None
        }
    };
    // Pod → (attempt, when).
    let mut queue: BTreeMap<PodKey, (u32, Instant)> = BTreeMap::new();
    let mut rescan = tokio::time::interval(RESCAN);
    loop {
        let due = queue.values().map(|(_, t)| *t).min();
        tokio::select! {
            Some(ev) = async { match events.as_mut() { Some(s) => s.next().await, None => std::future::pending().await } } => {
                match ev {
                    Ok(ev) => {
                        if let Some(pod) = ev.name.and_then(|n| pod_of(&n.to_string_lossy())) {
                            queue.insert(pod, (0, Instant::now()));
                        } else if ev.mask.contains(inotify::EventMask::Q_OVERFLOW) {
                            enqueue_all(&agent.status_dir, &mut queue);
                        }
                    }
                    Err(e) => log_changed(&mut failing, format!("network-status: inotify: {e}")),
                }
            }
            _ = rescan.tick() => enqueue_all(&agent.status_dir, &mut queue),
            _ = sleep_until(due), if due.is_some() => {
                let now = Instant::now();
                let ready: Vec<(PodKey, u32)> =
                    queue.iter().filter(|(_, (_, t))| *t <= now).map(|(p, (a, _))| (p.clone(), *a)).collect();
                for (pod, attempt) in ready {
                    match publish(&client, &agent, &pod).await {
                        Outcome::Done => {
                            queue.remove(&pod);
                        }
                        Outcome::Retry(why) => {
                            let delay = BACKOFF.0.saturating_mul(1 << attempt.min(8)).min(BACKOFF.1);
                            log_changed(&mut failing, format!("network-status: {why}; retrying with backoff (pod start is not held up)"));
                            queue.insert(pod, (attempt.saturating_add(1), Instant::now() + delay));
                        }
                    }
                }
            }
        }
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

fn enqueue_all(dir: &Path, queue: &mut BTreeMap<PodKey, (u32, Instant)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for pod in entries.flatten().filter_map(|e| pod_of(&e.file_name().to_string_lossy())) {
        queue.entry(pod).or_insert((0, Instant::now()));
    }
}

/// One attempt for `pod`.
async fn publish(client: &kube::Client, agent: &Agent, pod: &PodKey) -> Outcome {
    let Some((path, doc)) = newest(&agent.status_dir, pod) else { return Outcome::Done };
    let doc = match doc {
        Ok(d) => d,
        Err(why) => {
            crate::log(&format!("network-status of pod {pod}: {} is not published: {why}", path.display()));
            return Outcome::Done;
        }
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let current = match api.get_opt(&pod.name).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            crate::log(&format!("network-status of pod {pod}: the pod is gone; nothing to publish"));
            return Outcome::Done;
        }
        Err(e) => return retry_or_drop(pod, "reading", e),
    };
    let on = current.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
    if on != agent.node {
        crate::log(&format!(
            "network-status of pod {pod}: not published, the pod is bound to node {on:?}, not this node {:?}",
            agent.node
        ));
        return Outcome::Done;
    }
    if current.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION)) == Some(&doc) {
        return Outcome::Done;
    }
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION: doc}}});
    match api.patch(&pod.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => {
            crate::log(&format!("network-status of pod {pod}: published from {}", path.display()));
            Outcome::Done
        }
        Err(e) => retry_or_drop(pod, "patching", e),
    }
}

/// A failed request: retried unless the API server's answer says a retry cannot help.
fn retry_or_drop(pod: &PodKey, doing: &str, e: kube::Error) -> Outcome {
    if let kube::Error::Api(status) = &e {
        let code = status.code;
        if code == 404 {
            crate::log(&format!("network-status of pod {pod}: the pod is gone; nothing to publish"));
            return Outcome::Done;
        }
        if (400..500).contains(&code) && code != 408 && code != 429 {
            crate::log(&format!("network-status of pod {pod}: {doing} the pod was refused ({e}); not retried"));
            return Outcome::Done;
        }
    }
    Outcome::Retry(format!("{doing} pod {pod}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn documents() {
        assert_eq!(document(b"[{\"name\":\"x\"}]\n").unwrap(), "[{\"name\":\"x\"}]");
        assert_eq!(document(b"[]").unwrap(), "[]");
        assert!(document(b"{}\n").unwrap_err().contains("not a JSON list"));
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
        let (path, doc) = newest(&d, &pod).unwrap();
        assert_eq!((path.file_name().unwrap().to_str().unwrap(), doc.unwrap()), ("ns_p_bbb.json", "[2]".to_string()));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
