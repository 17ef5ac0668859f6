//! What an operator at scale watches: whether the agent is ready, and its Prometheus metrics.
//! [`crate::serve`] serves both on `--metrics-addr`; braid-install/README.md ("Metrics and
//! readiness") says what each metric means.
//!
//! The exposition format is written by `prometheus-client`, the Prometheus project's own Rust
//! client (OpenMetrics text, which Prometheus scrapes natively). Every metric is cheap to keep:
//! a counter or gauge update is an atomic add, and nothing is computed until a scrape.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An API request's verb, as the API server's audit log names it.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum Verb {
    get,
    list,
    watch,
    patch,
    create,
    delete,
}

/// The labels of `braid_install_api_requests`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// The request's verb.
    pub verb: Verb,
    /// The resource (`pods`, `events`, `network-attachment-definitions`).
    pub resource: &'static str,
    /// `ok`, the HTTP status code of an error answer (`404`, `409`, `500`…), `timeout` (no
    /// answer within `--api-timeout`) or `error` (no HTTP answer: connection refused, reset).
    pub outcome: String,
}

/// What became of a status file (`braid_install_status_files`' label).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FileOutcome {
    /// `published`, `pod_gone`, `pod_replaced` (another pod of that name: its UID differs),
    /// `refused` (another 4xx), `invalid` (the file is not a network-status document).
    pub outcome: &'static str,
}

/// `braid_install_nads`' label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NadState {
    /// `mirrored` or `refused`.
    pub state: &'static str,
}

/// The agent's metrics and readiness, shared by its threads (every field is a handle to the
/// same value).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    ready: Arc<Readiness>,
    /// API requests by verb, resource and outcome.
    pub api_requests: Family<ApiLabels, Counter>,
    /// Seconds from a status file's modification to the patch that published it.
    pub publish_latency: Histogram,
    /// Status files by what became of them.
    pub status_files: Family<FileOutcome, Counter>,
    /// Pods whose status waits to be published (queued, in flight or retrying).
    pub pending: Gauge,
    /// Rescans of the status directory (local `stat`s for lost inotify events).
    pub status_rescans: Counter,
    /// NADs of the last list and watch, mirrored or refused on this node.
    pub nads: Family<NadState, Gauge>,
    ready_gauge: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("ready", &self.ready).finish_non_exhaustive()
    }
}

/// What makes the agent ready.
#[derive(Debug, Default)]
struct Readiness {
    installed: AtomicBool,
    needs_list: bool,
    listed: AtomicBool,
}

impl Metrics {
    /// Fresh metrics; `api` when the agent's API side runs (readiness then waits for the first
    /// full NAD list too).
    pub fn new(api: bool) -> Metrics {
        let m = Metrics {
            registry: Arc::new(Registry::default()),
            ready: Arc::new(Readiness { needs_list: api, ..Readiness::default() }),
            api_requests: Family::default(),
            // 1 ms to ~65 s, doubling: a patch on a healthy cluster is milliseconds, a retry
            // after the API server came back tens of seconds.
            publish_latency: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            status_files: Family::default(),
            pending: Gauge::default(),
            status_rescans: Counter::default(),
            nads: Family::default(),
            ready_gauge: Gauge::default(),
        };
        let mut r = Registry::with_prefix("braid_install");
        r.register(
            "api_requests",
            "Kubernetes API requests by verb, resource and outcome (ok, an HTTP status code, timeout, error)",
            m.api_requests.clone(),
        );
        r.register(
            "status_publish_seconds",
            "Seconds from a pod's network-status file written to its annotation patched",
            m.publish_latency.clone(),
        );
        r.register(
            "status_files",
            "Network-status files handled, by outcome (published, pod_gone, pod_replaced, refused, invalid)",
            m.status_files.clone(),
        );
        r.register("status_pending", "Pods whose network-status waits to be published", m.pending.clone());
        r.register(
            "status_rescans",
            "Rescans of the status directory for lost inotify events (modification times only, no API request)",
            m.status_rescans.clone(),
        );
        r.register("nads", "NetworkAttachmentDefinitions mirrored or refused on this node", m.nads.clone());
        r.register("ready", "1 once the agent is ready (what /readyz answers 200 to)", m.ready_gauge.clone());
        Metrics { registry: Arc::new(r), ..m }
    }

    /// Counts one API request.
    pub fn api(&self, verb: Verb, resource: &'static str, outcome: impl Into<String>) {
        self.api_requests.get_or_create(&ApiLabels { verb, resource, outcome: outcome.into() }).inc();
    }

    /// Counts one status file's outcome.
    pub fn file(&self, outcome: &'static str) {
        self.status_files.get_or_create(&FileOutcome { outcome }).inc();
    }

    /// Sets the NAD gauges.
    pub fn set_nads(&self, mirrored: usize, refused: usize) {
        for (state, n) in [("mirrored", mirrored), ("refused", refused)] {
            self.nads.get_or_create(&NadState { state }).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// The plugins are installed and `00-braid.conflist` written (or current).
    pub fn set_installed(&self) {
        self.ready.installed.store(true, Ordering::Relaxed);
        self.ready_gauge.set(i64::from(self.ready().is_ok()));
    }

    /// The first full NAD list is mirrored.
    pub fn set_listed(&self) {
        self.ready.listed.store(true, Ordering::Relaxed);
        self.ready_gauge.set(i64::from(self.ready().is_ok()));
    }

    /// `Ok` when ready; else what it still waits for.
    pub fn ready(&self) -> Result<(), &'static str> {
        self.ready.check()
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Readiness {
    fn check(&self) -> Result<(), &'static str> {
        if !self.installed.load(Ordering::Relaxed) {
            return Err(
                "not ready: the plugins and 00-braid.conflist are not installed yet (waiting for the primary network?)",
            );
        }
        if self.needs_list && !self.listed.load(Ordering::Relaxed) {
            return Err("not ready: the first full list of NetworkAttachmentDefinitions is not mirrored yet");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_installed_and_listed() {
        let m = Metrics::new(true);
        assert!(m.ready().unwrap_err().contains("00-braid.conflist"));
        m.set_installed();
        assert!(m.ready().unwrap_err().contains("NetworkAttachmentDefinitions"));
        m.set_listed();
        assert_eq!(m.ready(), Ok(()));
        let no_api = Metrics::new(false);
        no_api.set_installed();
        assert_eq!(no_api.ready(), Ok(()));
    }

    #[test]
    fn the_exposition_names_every_metric() {
        let m = Metrics::new(true);
        m.api(Verb::patch, "pods", "ok");
        m.api(Verb::patch, "pods", "409");
        m.file("published");
        m.publish_latency.observe(0.004);
        m.set_nads(3, 1);
        m.pending.set(2);
        m.set_installed();
        m.set_listed();
        let text = m.encode();
        for line in [
            "braid_install_api_requests_total{verb=\"patch\",resource=\"pods\",outcome=\"ok\"} 1",
            "braid_install_api_requests_total{verb=\"patch\",resource=\"pods\",outcome=\"409\"} 1",
            "braid_install_status_files_total{outcome=\"published\"} 1",
            "braid_install_status_publish_seconds_count 1",
            "braid_install_status_pending 2",
            "braid_install_nads{state=\"mirrored\"} 3",
            "braid_install_nads{state=\"refused\"} 1",
            "braid_install_ready 1",
            "# EOF",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
