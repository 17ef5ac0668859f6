//! The command line, parsed by hand (no argument-parsing dependency in a node binary).

use crate::error::InstallError;
use cni_types::validate::is_dns_label;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The plugin binaries the installer copies.
/// `braid-podresources` is the delegator's helper for networks backed by the kubelet's devices
/// (it looks for it beside itself).
pub const BINARIES: &[&str] = &["delegator", "braid-podresources", "merger", "verifier"];

/// The binary `--vmtap` copies besides [`BINARIES`].
pub const VMTAP: &str = "vmtap";

/// What the installer does and where. Paths named "host" are as the node (and so the runtime and
/// the delegator) sees them; the installer itself reaches them below `host_root`.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Where the node's root is mounted in the installer's container (`--host-root`, `/host`).
    pub host_root: PathBuf,
    /// The node's CNI bin dir (`--cni-bin-dir`, `/opt/cni/bin`).
    pub cni_bin_dir: PathBuf,
    /// The node's CNI conf dir (`--cni-conf-dir`, `/etc/cni/net.d`).
    pub cni_conf_dir: PathBuf,
    /// The primary network's file on the node (`--primary`); else the lexically first in the conf dir.
    pub primary: Option<PathBuf>,
    /// The file braid writes in the conf dir (`--conf-file`, `00-braid.conflist`).
    pub conf_file: String,
    /// braid's network name (`--name`, `braid`).
    pub name: String,
    /// The delegator's `kubernetes.networksDir` (`--networks-dir`, `/etc/cni/braid.d`).
    pub networks_dir: PathBuf,
    /// The delegator's `kubernetes.statusDir` (`--status-dir`, `/run/braid/network-status`).
    pub status_dir: PathBuf,
    /// The delegator's `stateDir` (`--state-dir`, `/var/lib/cni/braid`).
    pub state_dir: PathBuf,
    /// The delegator's `kubernetes.globalNamespaces` (`--global-namespaces`, `default`).
    pub global_namespaces: Vec<String>,
    /// The delegator's `kubernetes.podResourcesSocket` (`--pod-resources-socket`, node path;
    /// the kubelet's default `/var/lib/kubelet/pod-resources/kubelet.sock`): where a network
    /// backed by a device-plugin resource reads the pod's devices.
    pub pod_resources_socket: PathBuf,
    /// The delegator's `kubernetes.defaultNetworkNamespace` (`--default-network-namespace`,
    /// `kube-system`, Multus's `multusNamespace`): where a pod's bare
    /// `v1.multus-cni.io/default-network` name resolves, and whose networks any pod may take as
    /// its primary.
    pub default_network_namespace: String,
    /// The delegator's `kubernetes.defaultNetworkPodNamespace` (`--default-network-pod-namespace`,
    /// off): a pod may also take a network of its own namespace as its primary.
    pub default_network_pod_namespace: bool,
    /// `AddedInterface` Events on pods once their network-status is published (API mode; on
    /// unless `--no-interface-events`).
    pub interface_events: bool,
    /// The node's DRA devices record (API mode; on unless `--no-dra-devices`): this node's
    /// ResourceSlices watched, their devices' Multus attributes kept in `dra_devices_file` for
    /// networks that name a resource other DRA drivers' devices serve (`api::dra_devices`).
    pub dra_devices: bool,
    /// Where (`--dra-devices-file`, node path, `/var/lib/braid/dra-devices/devices.json`; the
    /// delegator's `kubernetes.draDevicesFile`).
    pub dra_devices_file: PathBuf,
    /// The mounted ConfigMap of network definitions (`--networks-configmap`), in the container.
    pub configmap_dir: Option<PathBuf>,
    /// Where the plugin binaries are taken from (`--source-dir`; the installer's own directory).
    pub source_dir: Option<PathBuf>,
    /// How long to wait for the primary network (`--wait`, 300 s; 0 = forever).
    pub wait: Duration,
    /// How often the long-running mode looks again (`--interval`, 1 s).
    pub interval: Duration,
    /// Install, write, mirror once and exit (`--once`).
    pub once: bool,
    /// Remove what the installer installed and exit (`--uninstall`).
    pub uninstall: bool,
    /// Do not copy plugin binaries (`--skip-binaries`).
    pub skip_binaries: bool,
    /// The Kubernetes API mode (`--kubernetes-api`): NetworkAttachmentDefinitions mirrored into
    /// networksDir, the delegator's network-status published on the pods (see `api`).
    pub kubernetes_api: bool,
    /// Where a NetworkAttachmentDefinition with an empty `spec.config` finds its file, and the
    /// only place (`--nad-conf-dir`, node path; Multus's `confDir` default
    /// `/etc/cni/multus/net.d`, so a cluster moving from Multus keeps its files). Never the CNI
    /// conf dir: see [`crate::nad`].
    pub nad_conf_dir: PathBuf,
    /// How long one Kubernetes API request may take before it is abandoned and, where that
    /// helps, retried (`--api-timeout`, 10 s).
    pub api_timeout: Duration,
    /// How often the status directory's modification times are compared with what was
    /// published, for inotify events that were lost (`--status-rescan`, 60 s): local reads
    /// only, never an API request.
    pub status_rescan: Duration,
    /// Where `/metrics` and `/readyz` are served (`--metrics-addr`); off when `None`.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Network hot-plug (`--hotplug`, API mode only): a running pod's networks follow its
    /// annotation (see `api::hotplug`).
    pub hotplug: bool,
    /// A VM runtime's node (`--vmtap`): `vmtap` is copied too and chained after the delegator,
    /// whose result is then the merged one, so that every network of a pod — also one added
    /// to it while it runs — becomes a tap a VMM opens.
    pub vmtap: bool,
    /// vmtap's `danDir` (`--vmtap-dan-dir`, node path): Kata Containers' DAN files.
    pub vmtap_dan_dir: Option<PathBuf>,
    /// The DRA driver (`--dra`, API mode only): this node's networks published as devices of a
    /// ResourceSlice, claims prepared for the kubelet (see `dra`).
    pub dra: bool,
    /// The DRA driver's name (`--dra-driver-name`, `net.braid-cni.io`): the slices'
    /// `spec.driver`, the kubelet plugin's name, the DeviceClass's selector.
    pub dra_driver_name: String,
    /// The kubelet's root directory (`--kubelet-dir`, node path, `/var/lib/kubelet`): its
    /// `plugins_registry` and `plugins` directories hold the DRA driver's sockets.
    pub kubelet_dir: PathBuf,
    /// Where prepared claims are recorded for the delegator (`--dra-claims-dir`, node path,
    /// `/var/lib/braid/claims`; the delegator's `kubernetes.claimsDir`).
    pub dra_claims_dir: PathBuf,
    /// How many claims may share one network device at once (`--dra-attachments`, 1024): the
    /// device's consumable capacity `attachments`.
    pub dra_attachments: u64,
    /// KEP-5304 device metadata (`--dra-device-metadata`, off): each prepared request's file,
    /// mounted into the containers that use the claim, with its interfaces' `networkData`
    /// ([`braid_attach::device_metadata`]).
    pub dra_device_metadata: bool,
    /// Where the CDI specs that mount the metadata go (`--dra-cdi-dir`, node path,
    /// `/var/run/cdi`: a directory containerd 2 and CRI-O read by default).
    pub dra_cdi_dir: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            host_root: PathBuf::from("/host"),
            cni_bin_dir: PathBuf::from("/opt/cni/bin"),
            cni_conf_dir: PathBuf::from("/etc/cni/net.d"),
            primary: None,
            conf_file: "00-braid.conflist".into(),
            name: "braid".into(),
            networks_dir: PathBuf::from("/etc/cni/braid.d"),
            status_dir: PathBuf::from("/run/braid/network-status"),
            state_dir: PathBuf::from("/var/lib/cni/braid"),
            global_namespaces: vec!["default".into()],
            pod_resources_socket: PathBuf::from("/var/lib/kubelet/pod-resources/kubelet.sock"),
            default_network_namespace: "kube-system".into(),
            default_network_pod_namespace: false,
            interface_events: true,
            dra_devices: true,
            dra_devices_file: PathBuf::from(braid_attach::dra_devices::DEFAULT_FILE),
            configmap_dir: None,
            source_dir: None,
            wait: Duration::from_secs(300),
            interval: Duration::from_secs(1),
            once: false,
            uninstall: false,
            skip_binaries: false,
            kubernetes_api: false,
            nad_conf_dir: PathBuf::from("/etc/cni/multus/net.d"),
            api_timeout: Duration::from_secs(10),
            status_rescan: Duration::from_secs(60),
            metrics_addr: None,
            hotplug: false,
            vmtap: false,
            vmtap_dan_dir: None,
            dra: false,
            dra_driver_name: DRA_DRIVER.into(),
            kubelet_dir: PathBuf::from("/var/lib/kubelet"),
            dra_claims_dir: PathBuf::from("/var/lib/braid/claims"),
            dra_attachments: 1024,
            dra_device_metadata: false,
            dra_cdi_dir: PathBuf::from("/var/run/cdi"),
        }
    }
}

/// The DRA driver's default name (`--dra-driver-name`).
pub const DRA_DRIVER: &str = "net.braid-cni.io";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run with these options.
    Run(Box<Options>),
    /// Print the usage text.
    Help,
    /// Print the version.
    Version,
}

/// The usage text (`--help`); braid-install/README.md has the long form.
pub const USAGE: &str = "\
usage: braid-install [flags]

Installs braid on a Kubernetes node: copies the plugins into the node's CNI bin dir, writes
00-braid.conflist wrapping the node's primary network, mirrors network definitions from a
mounted ConfigMap, then keeps them current (or exits with --once).

  --host-root DIR           the node's root as mounted here            [/host]
  --cni-bin-dir DIR         the node's CNI bin dir (node path)          [/opt/cni/bin]
  --cni-conf-dir DIR        the node's CNI conf dir (node path)         [/etc/cni/net.d]
  --primary FILE            the primary network's file (node path)      [lexically first in the conf dir]
  --conf-file NAME          braid's file in the conf dir                [00-braid.conflist]
  --name NAME               braid's network name                       [braid]
  --networks-dir DIR        kubernetes.networksDir (node path)          [/etc/cni/braid.d]
  --status-dir DIR          kubernetes.statusDir (node path)            [/run/braid/network-status]
  --state-dir DIR           the delegator's stateDir (node path)        [/var/lib/cni/braid]
  --global-namespaces LIST  kubernetes.globalNamespaces, comma-separated [default]
  --pod-resources-socket F  the kubelet's pod-resources socket (node path)
                            [/var/lib/kubelet/pod-resources/kubelet.sock]
  --default-network-namespace NS
                            where a bare v1.multus-cni.io/default-network name resolves;
                            its networks may be any pod's primary       [kube-system]
  --default-network-pod-namespace
                            a pod may also take a network of its own namespace as its
                            primary (its NAD writers then choose its pod IPs) [off]
  --networks-configmap DIR  mounted ConfigMap of <namespace>.<name>.conflist keys [none]
  --source-dir DIR          where delegator, merger, verifier (vmtap) are taken from [this program's dir]
  --skip-binaries           do not copy the plugin binaries
  --wait SECONDS            wait at most this long for the primary; 0 = forever [300]
  --interval SECONDS        how often the long-running mode looks again [1]
  --kubernetes-api          also mirror NetworkAttachmentDefinitions into the networks dir and
                            publish pods' network-status (needs NODE_NAME and API credentials:
                            in-cluster ServiceAccount, or KUBECONFIG)
  --nad-conf-dir DIR        where (only) a NAD with an empty spec.config finds its file; never
                            the CNI conf dir (node path)               [/etc/cni/multus/net.d]
  --api-timeout SECONDS     abandon (and retry) an API request after this long [10]
  --status-rescan SECONDS   compare the status files' mtimes with what was published this
                            often, for lost inotify events (no API request) [60]
  --no-interface-events     with --kubernetes-api: no AddedInterface Events on pods
                            (on by default: one Event per interface of a pod start) [on]
  --no-dra-devices          with --kubernetes-api: no watch of this node's ResourceSlices; a
                            NAD's resourceName then matches no other DRA driver's device [on]
  --dra-devices-file FILE   the node's DRA devices record (devices' Multus attributes), the
                            delegator's kubernetes.draDevicesFile (node path)
                            [/var/lib/braid/dra-devices/devices.json]
  --hotplug                 with --kubernetes-api: a running pod's networks follow its
                            k8s.v1.cni.cncf.io/networks annotation (needs the node's root
                            at --host-root and root privileges)         [off]
  --metrics-addr ADDR:PORT  serve /metrics (Prometheus) and /readyz there  [off]
  --vmtap                   VM runtime nodes: also copy vmtap and chain it after the delegator
                            (whose result becomes the merged one): every pod network a tap
  --vmtap-dan-dir DIR       with --vmtap: vmtap's danDir, Kata's DAN files (node path) [none]
  --dra                     with --kubernetes-api: a DRA driver too; this node's networks
                            published as devices of its ResourceSlice, claims of them
                            prepared for the kubelet                    [off]
  --dra-driver-name NAME    the DRA driver's name (a DNS subdomain, at most 63) [net.braid-cni.io]
  --kubelet-dir DIR         the kubelet's root dir: plugins_registry/, plugins/ (node path)
                            [/var/lib/kubelet]
  --dra-claims-dir DIR      prepared claims' records, the delegator's kubernetes.claimsDir
                            (node path)                                 [/var/lib/braid/claims]
  --dra-attachments N       how many claims may share one network at once (the devices'
                            capacity \"attachments\", at least 1)            [1024]
  --dra-device-metadata     with --dra: KEP-5304 device metadata, a file per claim request
                            with its interfaces (networkData), mounted into the containers
                            that use the claim through a CDI spec       [off]
  --dra-cdi-dir DIR         with --dra-device-metadata: where its CDI specs go (node path;
                            the container runtime must read it)         [/var/run/cdi]
  --once                    install, write, mirror once, then exit
  --uninstall               remove braid's conflist, binaries and mirrored networks, then exit
  --help, --version

exit codes: 0 done; 1 internal; 2 usage; 3 no primary network; 4 binaries; 5 braid's conflist;
6 network definitions (ConfigMap unreadable or networks dir unwritable, --once only);
7 --kubernetes-api: no NODE_NAME or no usable API credentials; 8 --metrics-addr server not started (a taken port is retried, never an exit)
";

fn usage(msg: impl Into<String>) -> InstallError {
    InstallError::Usage(msg.into())
}

fn abs_path(flag: &str, v: &str) -> Result<PathBuf, InstallError> {
    let p = PathBuf::from(v);
    if !p.is_absolute() {
        return Err(usage(format!("{flag} must be an absolute path, not {v:?}")));
    }
    Ok(p)
}

fn seconds(flag: &str, v: &str) -> Result<Duration, InstallError> {
    v.parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| usage(format!("{flag} must be a whole number of seconds, not {v:?}")))
}

/// Parses the arguments (without the program name). Flags take `--flag VALUE` or `--flag=VALUE`.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Action, InstallError> {
    let mut o = Options::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let switch = |o: &mut Options, set: fn(&mut Options)| -> Result<(), InstallError> {
            if inline.is_some() {
                return Err(usage(format!("{flag} takes no value")));
            }
            set(o);
            Ok(())
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Action::Help),
            "--version" => return Ok(Action::Version),
            "--once" => switch(&mut o, |o| o.once = true)?,
            "--uninstall" => switch(&mut o, |o| o.uninstall = true)?,
            "--skip-binaries" => switch(&mut o, |o| o.skip_binaries = true)?,
            "--kubernetes-api" => switch(&mut o, |o| o.kubernetes_api = true)?,
            "--hotplug" => switch(&mut o, |o| o.hotplug = true)?,
            "--vmtap" => switch(&mut o, |o| o.vmtap = true)?,
            "--dra" => switch(&mut o, |o| o.dra = true)?,
            "--dra-device-metadata" => switch(&mut o, |o| o.dra_device_metadata = true)?,
            "--default-network-pod-namespace" => switch(&mut o, |o| o.default_network_pod_namespace = true)?,
            "--no-interface-events" => switch(&mut o, |o| o.interface_events = false)?,
            "--no-dra-devices" => switch(&mut o, |o| o.dra_devices = false)?,
            "--host-root"
            | "--cni-bin-dir"
            | "--cni-conf-dir"
            | "--primary"
            | "--conf-file"
            | "--name"
            | "--networks-dir"
            | "--status-dir"
            | "--state-dir"
            | "--global-namespaces"
            | "--default-network-namespace"
            | "--pod-resources-socket"
            | "--networks-configmap"
            | "--source-dir"
            | "--nad-conf-dir"
            | "--wait"
            | "--interval"
            | "--api-timeout"
            | "--status-rescan"
            | "--metrics-addr"
            | "--vmtap-dan-dir"
            | "--dra-driver-name"
            | "--kubelet-dir"
            | "--dra-claims-dir"
            | "--dra-devices-file"
            | "--dra-attachments"
            | "--dra-cdi-dir" => {
                let v = match inline {
                    Some(v) => v,
                    None => it.next().ok_or_else(|| usage(format!("{flag} needs a value")))?,
                };
                match flag.as_str() {
                    "--host-root" => o.host_root = abs_path(&flag, &v)?,
                    "--cni-bin-dir" => o.cni_bin_dir = abs_path(&flag, &v)?,
                    "--cni-conf-dir" => o.cni_conf_dir = abs_path(&flag, &v)?,
                    "--primary" => o.primary = Some(abs_path(&flag, &v)?),
                    "--networks-dir" => o.networks_dir = abs_path(&flag, &v)?,
                    "--status-dir" => o.status_dir = abs_path(&flag, &v)?,
                    "--state-dir" => o.state_dir = abs_path(&flag, &v)?,
                    "--pod-resources-socket" => o.pod_resources_socket = abs_path(&flag, &v)?,
                    "--networks-configmap" => o.configmap_dir = Some(abs_path(&flag, &v)?),
                    "--source-dir" => o.source_dir = Some(abs_path(&flag, &v)?),
                    "--nad-conf-dir" => o.nad_conf_dir = abs_path(&flag, &v)?,
                    "--vmtap-dan-dir" => o.vmtap_dan_dir = Some(abs_path(&flag, &v)?),
                    "--kubelet-dir" => o.kubelet_dir = abs_path(&flag, &v)?,
                    "--dra-claims-dir" => o.dra_claims_dir = abs_path(&flag, &v)?,
                    "--dra-devices-file" => o.dra_devices_file = abs_path(&flag, &v)?,
                    "--dra-cdi-dir" => o.dra_cdi_dir = abs_path(&flag, &v)?,
                    "--dra-driver-name" => {
                        if !is_driver_name(&v) {
                            return Err(usage(format!(
                                "--dra-driver-name must be a DNS subdomain of at most 63 characters (net.braid-cni.io), not {v:?}"
                            )));
                        }
                        o.dra_driver_name = v;
                    }
                    "--dra-attachments" => {
                        o.dra_attachments = match v.parse::<u64>() {
                            Ok(n) if n >= 1 => n,
                            _ => {
                                return Err(usage(format!(
                                    "--dra-attachments must be a whole number, at least 1, not {v:?}"
                                )))
                            }
                        };
                    }
                    "--conf-file" => {
                        if v.contains('/') || !v.ends_with(".conflist") {
                            return Err(usage(format!(
                                "--conf-file must be a file name ending in .conflist, not {v:?}"
                            )));
                        }
                        o.conf_file = v;
                    }
                    "--name" => {
                        if v.is_empty() || v.contains('/') {
                            return Err(usage(format!("--name must be a network name, not {v:?}")));
                        }
                        o.name = v;
                    }
                    "--global-namespaces" => {
                        let list: Vec<String> =
                            v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
                        if let Some(bad) = list.iter().find(|n| !is_dns_label(n)) {
                            return Err(usage(format!("--global-namespaces: {bad:?} is not a namespace name")));
                        }
                        o.global_namespaces = list;
                    }
                    "--default-network-namespace" => {
                        if !is_dns_label(&v) {
                            return Err(usage(format!("--default-network-namespace: {v:?} is not a namespace name")));
                        }
                        o.default_network_namespace = v;
                    }
                    "--wait" => o.wait = seconds(&flag, &v)?,
                    "--api-timeout" | "--status-rescan" => {
                        let d = seconds(&flag, &v)?;
                        if d.is_zero() {
                            return Err(usage(format!("{flag} must be at least 1 second")));
                        }
                        if flag == "--api-timeout" {
                            o.api_timeout = d;
                        } else {
                            o.status_rescan = d;
                        }
                    }
                    "--metrics-addr" => {
                        o.metrics_addr = Some(v.parse().map_err(|_| {
                            usage(format!(
                                "--metrics-addr must be ADDRESS:PORT (127.0.0.1:9464, [::1]:9464), not {v:?}"
                            ))
                        })?);
                    }
                    _ => {
                        o.interval = seconds(&flag, &v)?;
                        if o.interval.is_zero() {
                            return Err(usage("--interval must be at least 1 second"));
                        }
                    }
                }
            }
            other => return Err(usage(format!("unknown argument {other:?}"))),
        }
    }
    if o.once && o.uninstall {
        return Err(usage("--once and --uninstall exclude each other"));
    }
    if o.hotplug && !o.kubernetes_api {
        return Err(usage("--hotplug follows pods' annotations through the API: it needs --kubernetes-api"));
    }
    if o.vmtap_dan_dir.is_some() && !o.vmtap {
        return Err(usage("--vmtap-dan-dir is vmtap's danDir: it needs --vmtap"));
    }
    if o.dra && !o.kubernetes_api {
        return Err(usage(
            "--dra publishes ResourceSlices and reads ResourceClaims through the API: it needs --kubernetes-api",
        ));
    }
    if o.dra_device_metadata && !o.dra {
        return Err(usage("--dra-device-metadata is the DRA driver's: it needs --dra"));
    }
    if o.dra_cdi_dir != Options::default().dra_cdi_dir && !o.dra_device_metadata {
        return Err(usage("--dra-cdi-dir is where the device metadata's CDI specs go: it needs --dra-device-metadata"));
    }
    if o.kubernetes_api && o.once {
        return Err(usage(
            "--kubernetes-api keeps definitions and network-status current; it runs only in the long-running mode, not with --once",
        ));
    }
    Ok(Action::Run(Box::new(o)))
}

/// A DRA driver name as the API server takes one in a ResourceSlice's `spec.driver`: a
/// lower-case DNS subdomain of at most 63 characters (`DriverNameMaxLength`,
/// k8s.io/api resource/v1 types.go).
pub fn is_driver_name(s: &str) -> bool {
    s.len() <= 63 && !s.is_empty() && s.split('.').all(is_dns_label)
}

/// `path` (absolute, as the node sees it) as the installer reaches it: below `host_root`.
pub fn on_host(host_root: &Path, path: &Path) -> PathBuf {
    host_root.join(path.strip_prefix("/").unwrap_or(path))
}

impl Options {
    /// [`on_host`] with this host root.
    pub fn host(&self, path: &Path) -> PathBuf {
        on_host(&self.host_root, path)
    }

    /// The directory where the delegator looks its primary up by name (node path): the
    /// `--primary` file's directory, else the conf dir.
    pub fn primary_dir(&self) -> PathBuf {
        self.primary
            .as_ref()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| self.cni_conf_dir.clone())
    }

    /// The plugin binaries to copy (and, with `--uninstall`, to remove): [`BINARIES`], and
    /// [`VMTAP`] with `--vmtap` (a vmtap the operator put there for another use stays).
    pub fn binaries(&self) -> Vec<&'static str> {
        let mut names = BINARIES.to_vec();
        if self.vmtap {
            names.push(VMTAP);
        }
        names
    }

    /// braid's conflist as the installer reaches it.
    pub fn conf_path(&self) -> PathBuf {
        self.host(&self.cni_conf_dir).join(&self.conf_file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, InstallError> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Action::Run(o) => Ok(*o),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_documented_paths() {
        let o = run(&[]).unwrap();
        assert_eq!(o.host(&o.cni_bin_dir), PathBuf::from("/host/opt/cni/bin"));
        assert_eq!(o.conf_path(), PathBuf::from("/host/etc/cni/net.d/00-braid.conflist"));
        assert_eq!(o.host(&o.networks_dir), PathBuf::from("/host/etc/cni/braid.d"));
        assert_eq!(o.primary_dir(), PathBuf::from("/etc/cni/net.d"));
        assert_eq!(o.wait, Duration::from_secs(300));
    }

    #[test]
    fn both_flag_forms_and_lists() {
        let o = run(&[
            "--host-root=/",
            "--primary",
            "/etc/cni/net.d-real/10-flannel.conflist",
            "--global-namespaces",
            "default, kube-system",
            "--once",
            "--wait=0",
            "--pod-resources-socket=/run/kubelet/pod-resources.sock",
        ])
        .unwrap();
        assert_eq!(o.pod_resources_socket, PathBuf::from("/run/kubelet/pod-resources.sock"));
        assert_eq!(
            run(&[]).unwrap().pod_resources_socket,
            PathBuf::from("/var/lib/kubelet/pod-resources/kubelet.sock")
        );
        assert_eq!(o.host_root, PathBuf::from("/"));
        assert_eq!(o.conf_path(), PathBuf::from("/etc/cni/net.d/00-braid.conflist"));
        assert_eq!(o.primary_dir(), PathBuf::from("/etc/cni/net.d-real"));
        assert_eq!(o.global_namespaces, ["default", "kube-system"]);
        assert!(o.once);
        assert!(o.wait.is_zero());
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        for bad in [
            &["--bogus"][..],
            &["--wait"],
            &["--wait", "ten"],
            &["--interval", "0"],
            &["--cni-bin-dir", "relative/dir"],
            &["--conf-file", "00-braid.conf"],
            &["--conf-file", "a/b.conflist"],
            &["--global-namespaces", "Not_A_Label"],
            &["--default-network-namespace", "Kube_System"],
            &["--default-network-namespace"],
            &["--default-network-pod-namespace=yes"],
            &["--no-interface-events=1"],
            &["--once=yes"],
            &["--once", "--uninstall"],
            &["--once", "--kubernetes-api"],
            &["--kubernetes-api=yes"],
            &["--nad-conf-dir", "etc"],
            &["--api-timeout", "0"],
            &["--status-rescan", "0"],
            &["--metrics-addr", "9464"],
            &["--metrics-addr", "localhost:9464"],
            &["--hotplug"],
            &["--hotplug", "--once"],
            &["--vmtap=yes"],
            &["--vmtap", "--vmtap-dan-dir", "dans"],
            &["--vmtap-dan-dir", "/run/kata-containers/dans"],
            &["--dra"],
            &["--dra=yes", "--kubernetes-api"],
            &["--kubernetes-api", "--dra", "--dra-driver-name", "Net.Braid"],
            &["--kubernetes-api", "--dra", "--dra-driver-name", "net..braid"],
            &["--kubernetes-api", "--dra", "--dra-driver-name", &"a".repeat(64)],
            &["--kubelet-dir", "var/lib/kubelet"],
            &["--dra-claims-dir", "claims"],
            &["--dra-attachments", "0"],
            &["--dra-attachments", "-1"],
            &["--dra-attachments", "many"],
            &["--dra-attachments"],
            &["positional"],
        ] {
            let e = run(bad).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_agents_timing_and_metrics_flags() {
        let o = run(&["--api-timeout", "3", "--status-rescan=2", "--metrics-addr", "127.0.0.1:9464"]).unwrap();
        assert_eq!((o.api_timeout, o.status_rescan), (Duration::from_secs(3), Duration::from_secs(2)));
        assert_eq!(o.metrics_addr, Some("127.0.0.1:9464".parse().unwrap()));
        let d = run(&[]).unwrap();
        assert_eq!(
            (d.api_timeout, d.status_rescan, d.metrics_addr),
            (Duration::from_secs(10), Duration::from_secs(60), None)
        );
        assert!(!d.hotplug, "hot-plug is opt-in");
        assert!(d.interface_events, "AddedInterface Events are on by default");
        assert!(!run(&["--kubernetes-api", "--no-interface-events"]).unwrap().interface_events);
        let d = run(&["--kubernetes-api"]).unwrap();
        assert!(d.dra_devices, "the node's DRA devices record is kept by default");
        assert_eq!(d.dra_devices_file, PathBuf::from("/var/lib/braid/dra-devices/devices.json"));
        let o = run(&["--kubernetes-api", "--no-dra-devices", "--dra-devices-file=/var/lib/b/d.json"]).unwrap();
        assert_eq!((o.dra_devices, o.dra_devices_file), (false, PathBuf::from("/var/lib/b/d.json")));
        assert!(run(&["--dra-devices-file", "d.json"]).is_err());
        assert_eq!((d.default_network_namespace.as_str(), d.default_network_pod_namespace), ("kube-system", false));
        let o = run(&["--default-network-namespace=nets", "--default-network-pod-namespace"]).unwrap();
        assert_eq!((o.default_network_namespace.as_str(), o.default_network_pod_namespace), ("nets", true));
        assert!(run(&["--kubernetes-api", "--hotplug"]).unwrap().hotplug);
        assert!(!d.dra_device_metadata, "device metadata is opt-in");
        let o = run(&["--kubernetes-api", "--dra", "--dra-device-metadata", "--dra-cdi-dir=/etc/cdi"]).unwrap();
        assert_eq!((o.dra_device_metadata, o.dra_cdi_dir), (true, PathBuf::from("/etc/cdi")));
        assert!(run(&["--kubernetes-api", "--dra-device-metadata"]).is_err(), "needs --dra");
        assert!(run(&["--kubernetes-api", "--dra", "--dra-cdi-dir=/etc/cdi"]).is_err(), "needs the metadata");
        assert!(run(&["--kubernetes-api", "--dra", "--dra-device-metadata", "--dra-cdi-dir=cdi"]).is_err());
    }

    #[test]
    fn vmtap_adds_its_binary() {
        let d = run(&[]).unwrap();
        assert_eq!((d.vmtap, d.vmtap_dan_dir.clone()), (false, None));
        assert_eq!(d.binaries(), ["delegator", "braid-podresources", "merger", "verifier"]);
        let o = run(&["--vmtap", "--vmtap-dan-dir=/run/kata-containers/dans"]).unwrap();
        assert!(o.vmtap);
        assert_eq!(o.vmtap_dan_dir, Some(PathBuf::from("/run/kata-containers/dans")));
        assert_eq!(o.binaries(), ["delegator", "braid-podresources", "merger", "verifier", "vmtap"]);
    }

    #[test]
    fn the_dra_flags() {
        let d = run(&[]).unwrap();
        assert!(!d.dra, "the DRA driver is opt-in");
        assert_eq!(d.dra_driver_name, "net.braid-cni.io");
        assert_eq!(d.kubelet_dir, PathBuf::from("/var/lib/kubelet"));
        assert_eq!(d.dra_claims_dir, PathBuf::from("/var/lib/braid/claims"));
        assert_eq!(d.dra_attachments, 1024);
        let o = run(&[
            "--kubernetes-api",
            "--dra",
            "--dra-driver-name=net.example.com",
            "--kubelet-dir",
            "/var/lib/k0s/kubelet",
            "--dra-claims-dir=/var/lib/braid/dra",
            "--dra-attachments",
            "1",
        ])
        .unwrap();
        assert!(o.dra);
        assert_eq!(o.dra_driver_name, "net.example.com");
        assert_eq!(o.host(&o.kubelet_dir), PathBuf::from("/host/var/lib/k0s/kubelet"));
        assert_eq!(o.dra_claims_dir, PathBuf::from("/var/lib/braid/dra"));
        assert_eq!(o.dra_attachments, 1);
        assert!(is_driver_name(&"a".repeat(63)) && !is_driver_name(""));
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(["--help".to_string()]).unwrap(), Action::Help);
        assert_eq!(parse(["--once".to_string(), "--version".to_string()]).unwrap(), Action::Version);
    }
}
