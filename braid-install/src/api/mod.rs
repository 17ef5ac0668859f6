//! The Kubernetes API mode (`--kubernetes-api`): the node agent's side of the API, so that the
//! pod-start path never touches it. Two tasks on one current-thread runtime of the agent's own
//! thread:
//!
//! - [`nads`]: NetworkAttachmentDefinitions of every namespace, watched (kube-runtime's watcher:
//!   list, then watch from its resourceVersion, relist on `410 Gone`, reconnect with backoff)
//!   and mirrored into networksDir ([`crate::nad_mirror`]); a NAD that cannot be mirrored gets
//!   an Event ([`event`]);
//! - [`status`]: the delegator's network-status files, watched (inotify) and published as the
//!   pods' `k8s.v1.cni.cncf.io/network-status` annotation, for pods on this node only, each
//!   interface then announced by an `AddedInterface` Event ([`added`]);
//! - [`hotplug`] (`--hotplug`): this node's pods watched, a running pod's networks brought to
//!   its `k8s.v1.cni.cncf.io/networks` annotation when it changes;
//! - [`dra_devices`] (unless `--no-dra-devices`): this node's ResourceSlices watched, their
//!   devices' Multus attributes kept in the node's DRA devices record for the delegator;
//! - [`crate::dra`] (`--dra`): this node's networks published as the devices of its
//!   ResourceSlices ([`crate::dra::slices`]), and the DRA driver's kubelet plugin.
//!
//! While the API server cannot be reached both keep retrying; the mirror keeps what it had, so
//! pods keep starting. Credentials are found the standard way (`kube::Config::infer`: the
//! `KUBECONFIG` file when set, else the pod's in-cluster ServiceAccount token).

pub mod added;
pub mod call;
pub mod claim_status;
pub mod dra_devices;
pub mod event;
pub mod hotplug;
pub mod nads;
pub mod retry;
pub mod static_pod;
pub mod status;
pub mod status_files;
pub mod status_index;

use crate::error::InstallError;
use crate::metrics::Metrics;
use crate::options::Options;
use crate::owners::Owners;
use std::path::PathBuf;
use std::sync::mpsc;

/// The environment variable naming this node (the DaemonSet sets it from `spec.nodeName`).
pub const NODE_NAME_ENV: &str = "NODE_NAME";

/// What the agent's API side needs, resolved from the options.
#[derive(Debug, Clone)]
pub struct Agent {
    /// This node's name.
    pub node: String,
    /// networksDir, as the agent reaches it.
    pub networks: PathBuf,
    /// Where a NAD with an empty config finds its file (`--nad-conf-dir`, as the agent reaches
    /// it): that directory only, never the CNI conf dir (see [`crate::nad`]).
    pub nad_conf_dir: PathBuf,
    /// The delegator's statusDir, as the agent reaches it.
    pub status_dir: PathBuf,
    /// How often NADs with an empty config look at the NAD conf dir again.
    pub refresh: std::time::Duration,
    /// How long one API request may take ([`call`]).
    pub api_timeout: std::time::Duration,
    /// How often the status files' modification times are looked at for lost inotify events.
    pub status_rescan: std::time::Duration,
    /// The agent's metrics and readiness.
    pub metrics: Metrics,
    /// Network hot-plug (`--hotplug`), when on.
    pub hotplug: Option<hotplug::Hotplug>,
    /// `AddedInterface` Events on pods once their status is published ([`added`]; off with
    /// `--no-interface-events`).
    pub interface_events: bool,
    /// The DRA driver (`--dra`), when on.
    pub dra: Option<crate::dra::config::Dra>,
    /// The node's DRA devices record, as the agent reaches it ([`dra_devices`]), when kept.
    pub dra_devices: Option<PathBuf>,
}

impl Agent {
    /// From the options and `NODE_NAME`.
    pub fn new(o: &Options, node_name: Option<String>, metrics: Metrics) -> Result<Agent, InstallError> {
        let node = node_name.filter(|n| !n.trim().is_empty()).ok_or_else(|| {
            InstallError::Kubernetes(format!(
                "{NODE_NAME_ENV} is not set: the agent publishes network-status only on its own node's pods (the DaemonSet sets it from spec.nodeName)"
            ))
        })?;
        Ok(Agent {
            node: node.trim().to_string(),
            networks: o.host(&o.networks_dir),
            nad_conf_dir: o.host(&o.nad_conf_dir),
            status_dir: o.host(&o.status_dir),
            refresh: o.interval.max(std::time::Duration::from_secs(1)) * 10,
            api_timeout: o.api_timeout,
            status_rescan: o.status_rescan,
            metrics,
            interface_events: o.interface_events,
            hotplug: o.hotplug.then(|| hotplug::Hotplug {
                host_root: o.host_root.clone(),
                cni_bin_dir: o.cni_bin_dir.clone(),
                conflist: o.cni_conf_dir.join(&o.conf_file),
            }),
            dra: crate::dra::config::Dra::new(o),
            dra_devices: o.dra_devices.then(|| o.host(&o.dra_devices_file)),
        })
    }
}

/// How the main loop stops the API side: hot-plug starts no update any more, and the ones
/// running finish before the process exits ([`hotplug`], "Stopping").
#[derive(Debug)]
pub struct Stop {
    tx: tokio::sync::watch::Sender<bool>,
    drained: mpsc::Receiver<()>,
    /// How many parts report on `drained` once stopped: hot-plug (its updates finished), the
    /// DRA driver (its registration socket removed, so the kubelet deregisters it at once).
    waits: usize,
}

impl Stop {
    /// Tells hot-plug and the DRA driver to stop and waits until no update runs (each is
    /// bounded by its time limit) and the driver's sockets are gone; at once without either.
    pub fn stop(self) {
        let _ = self.tx.send(true);
        for _ in 0..self.waits {
            let _ = self.drained.recv();
        }
    }
}

/// More of the agent's loops on the API side's runtime and client, given by the caller (the DRA
/// driver, [`crate::dra::tasks`]): built on the API thread from its client, the agent and the
/// stop signal; the process waits for it to end once stopped.
pub type Tasks = Box<
    dyn FnOnce(
            kube::Client,
            Agent,
            tokio::sync::watch::Receiver<bool>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        + Send,
>;

/// Starts the API side on a thread of its own and returns once its client is built (bad or
/// missing credentials fail here, at start-up); the API server itself need not answer.
pub fn start(agent: Agent, owners: Owners, more: Option<Tasks>) -> Result<Stop, InstallError> {
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (drained_tx, drained) = mpsc::channel::<()>();
    let waits = usize::from(agent.hotplug.is_some()) + usize::from(more.is_some());
    let more_stop = stop_rx.clone();
    let more_drained = drained_tx.clone();
    let handle = std::thread::Builder::new()
        .name("kubernetes-api".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("cannot start its runtime: {e}")));
                    return;
                }
            };
            rt.block_on(async move {
                let client = match client().await {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let _ = tx.send(Ok(()));
                crate::log(&format!(
                    "Kubernetes API mode: node {}, NetworkAttachmentDefinitions into {}, network-status from {}",
                    agent.node,
                    agent.networks.display(),
                    agent.status_dir.display()
                ));
                let hotplug = async {
                    if let Some(h) = agent.hotplug.clone() {
                        hotplug::run(client.clone(), agent.clone(), h, stop_rx).await;
                        let _ = drained_tx.send(());
                    }
                };
                let more = async {
                    if let Some(m) = more {
                        m(client.clone(), agent.clone(), more_stop).await;
                        let _ = more_drained.send(());
                    }
                };
                let devices = async {
                    if let Some(file) = agent.dra_devices.clone() {
                        dra_devices::run(client.clone(), agent.clone(), file).await;
                    }
                };
                tokio::join!(
                    nads::run(client.clone(), agent.clone(), owners),
                    status::run(client.clone(), agent.clone()),
                    hotplug,
                    devices,
                    more
                );
            });
        })
        .map_err(|e| InstallError::Kubernetes(format!("cannot start its thread: {e}")))?;
    match rx.recv() {
        Ok(Ok(())) => {
            drop(handle);
            Ok(Stop { tx: stop_tx, drained, waits })
        }
        Ok(Err(e)) => Err(InstallError::Kubernetes(e)),
        Err(_) => Err(InstallError::Kubernetes("its thread stopped before the client was built".into())),
    }
}

async fn client() -> Result<kube::Client, String> {
    let mut config = kube::Config::infer().await.map_err(|e| {
        format!("no Kubernetes API credentials (KUBECONFIG, or the in-cluster ServiceAccount token): {e}")
    })?;
    // The agent's own requests are bounded by --api-timeout (`call`); the watcher's list is not
    // ours to wrap, and kube sets no read timeout. 300 s between two reads ends a list that
    // hangs, and never a healthy watch: the API server sends a bookmark about every minute and
    // ends a watch after 290 s (kube-runtime's watcher also times out an idle watch itself).
    // Each write resets it, so a pooled connection's idle time does not count.
    config.read_timeout = Some(std::time::Duration::from_secs(300));
    config.reset_reader_on_write = true;
    let server = config.cluster_url.to_string();
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client for {server}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nad::{Nad, Source};
    use crate::nad_mirror::{Applied, NadMirror};

    /// Multus looks an empty `spec.config` up in its own conf dir only
    /// (network-attachment-definition-client `GetCNIConfigFromFile`, Multus's `confDir`): a
    /// tenant's NAD named after the node's primary network, or after braid's own, must not
    /// mirror the node's file into the tenant's namespace.
    #[test]
    fn a_tenant_nad_named_after_a_node_network_mirrors_no_file_of_the_cni_conf_dir() {
        let root = std::env::temp_dir().join(format!("braid-agent-confdirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let o = Options { host_root: root.clone(), ..Options::default() };
        let (conf, nad_conf) = (o.host(&o.cni_conf_dir), o.host(&o.nad_conf_dir));
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::create_dir_all(&nad_conf).unwrap();
        let primary = r#"{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"bridge"}]}"#;
        std::fs::write(conf.join("10-flannel.conflist"), primary).unwrap();
        let braid = r#"{"cniVersion":"1.0.0","name":"braid","plugins":[{"type":"delegator"}]}"#;
        std::fs::write(conf.join(&o.conf_file), braid).unwrap();
        std::fs::write(nad_conf.join("20-side.conf"), r#"{"cniVersion":"1.0.0","name":"side","type":"ptp"}"#).unwrap();
        let agent = Agent::new(&o, Some("node-a".into()), Metrics::new(true)).unwrap();
        let mut m = NadMirror::open(&agent.networks, agent.nad_conf_dir.clone(), crate::owners::Owners::default());
        let nad = |name: &str| Nad {
            source: Source { namespace: "tenant".into(), name: name.into(), ..Source::default() },
            config: None,
        };
        for name in ["cbr0", "braid"] {
            let Applied::Refused(why) = m.apply(nad(name)).unwrap() else {
                panic!("tenant/{name} mirrored a file of the CNI conf dir")
            };
            assert!(why.on_node && why.why.contains(&nad_conf.display().to_string()), "{why}");
            assert!(!why.why.contains(&conf.display().to_string()), "{why}");
            assert!(!agent.networks.join(format!("tenant/{name}.conflist")).exists());
        }
        // What is in the NAD conf dir is found, as under Multus.
        assert_eq!(m.apply(nad("side")).unwrap(), Applied::Written);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
