//! Networks backed by the kubelet's devices: a definition that names a device-plugin resource
//! (a NAD's `k8s.v1.cni.cncf.io/resourceName` annotation, which the node agent records in the
//! mirrored file; a ConfigMap definition's top-level key of the same name) gets the ID of a
//! device the kubelet allocated to *this* pod, passed exactly as Multus passes it
//! (multus-cni v4.3.0 `pkg/types/conf.go` `delegateAddDeviceID`, `addDeviceIDInConfList`,
//! `mergeCNIRuntimeConfig`): `deviceID` and `pciBusID` in every plugin of the network, and the
//! runtimeConfig `deviceID` (to the plugins that declare the capability).
//!
//! The IDs come from the kubelet's PodResources API over its pod-resources socket — never from
//! the API server — through `braid-podresources`, a helper beside the delegator's own binary
//! that the delegator runs only when a selected network names a resource: the gRPC client it
//! needs would not fit the delegator's size budget, and an ADD of networks without a resource
//! runs none of this (no exec, no socket). One run per ADD answers for every resource.
//!
//! Hand-out order is Multus's (`pkg/k8sclient` `getKubernetesDelegate`, `ResourceInfo.Index`):
//! the pod's IDs of a resource sorted (the helper sorts them), then given to the selections that
//! name the resource in the pod's order, each a distinct one. A selection that writes its own
//! `deviceID` keeps it, taken out of the pool first — but only if it is one of the pod's own
//! devices of that resource: a pod may not pick a device the kubelet gave another pod.
//!
//! Device-info (NPWG device-info spec v1.1.0; Multus `pkg/multus` `CmdAdd`,
//! `getDelegateDeviceInfo`; network-attachment-definition-client `pkg/utils/cniconfig.go`): a
//! network given a device also gets the runtimeConfig `CNIDeviceInfoFile`, a file of its own
//! under `/var/run/k8s.cni.cncf.io/devinfo/cni/`; before its ADD the device plugin's file for
//! the device (`devinfo/dp/<resource>-<deviceID>-device.json`, which the SR-IOV network device
//! plugin writes at Allocate) is copied there, the delegate may write its own there instead,
//! and what the file holds after the ADD is the `device-info` of the network's entries in the
//! pod's network-status. DEL removes the sandbox's files. Multus names the file
//! `<network>-<containerID>_<ifname>`; braid puts the device ID where Multus puts the interface
//! name, which braid chooses only during the ADD (`net<N>`, under the pod namespace's lock).
//!
//! Where braid differs from Multus, on purpose: Multus attaches a network with no `deviceID`
//! when the pod has none (or too few) of its resource left, and when the kubelet cannot be
//! asked it fails with a generic error; braid refuses the pod before anything runs, naming the
//! network, the resource and the pod — code 7 where the pod (or its author) is wrong, code 11
//! where the kubelet did not answer and a retry can help. Multus ignores a selection's written
//! `deviceID` when the resource gives one; braid honours it, as above.

use super::names::RESOURCE_NAME;
use super::{Pod, Selection};
use braid_attach::{Delegate, DelegateConfig};
use cni_types::error::{INVALID_NETWORK_CONFIG, TRY_AGAIN_LATER};
use cni_types::{CniError, NetConfList};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The helper's file name, looked for beside the delegator's own binary.
pub const HELPER: &str = "braid-podresources";

/// Where device plugins and CNI plugins leave device-info files (network-attachment-definition-client
/// `pkg/utils/cniconfig.go` `baseDevInfoPath`): `dp/` the device plugins', `cni/` the CNI plugins'.
pub const DEVINFO_DIR: &str = "/var/run/k8s.cni.cncf.io/devinfo";

/// The runtimeConfig key (capability) naming a network's device-info file (Multus's).
pub const DEVICE_INFO_FILE: &str = "CNIDeviceInfoFile";

/// The kubelet's default pod-resources socket (kubelet `--pod-resources-directory`… its
/// `podresources.Socket` under `/var/lib/kubelet/pod-resources`).
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// How long the kubelet may take to answer by default: Multus's bound (10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how long to ask (`kubernetes.podResourcesSocket`, `kubernetes.podResourcesTimeout`),
/// and the node's DRA devices record (`kubernetes.draDevicesFile`) the helper matches the pod's
/// devices of other DRA drivers with.
#[derive(Debug, Clone, PartialEq)]
pub struct Kubelet {
    /// The kubelet's pod-resources socket.
    pub socket: PathBuf,
    /// The bound on the whole lookup.
    pub timeout: Duration,
    /// The node agent's record of the node's DRA devices ([`braid_attach::dra_devices`]).
    pub dra_devices: PathBuf,
}

impl Default for Kubelet {
    fn default() -> Self {
        Kubelet {
            socket: PathBuf::from(DEFAULT_SOCKET),
            timeout: DEFAULT_TIMEOUT,
            dra_devices: PathBuf::from(braid_attach::dra_devices::DEFAULT_FILE),
        }
    }
}

/// Why a device-backed network was refused (before anything ran).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// `CNI_ARGS` does not say which pod this is.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}), but CNI_ARGS does not name the pod (K8S_POD_NAMESPACE, K8S_POD_NAME): its devices cannot be looked up")]
    NoPod {
        /// `namespace/name`.
        network: String,
        /// The resource.
        resource: String,
    },
    /// The pod has none of the resource, and this node offers it.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}), but pod {pod} was allocated no device of it: request it in the pod's resources.limits ({resource}: 1 per selection), or a DRA device of it")]
    NotRequested {
        /// `namespace/name`.
        network: String,
        /// The resource.
        resource: String,
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// No device plugin of this node offers the resource.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}), which no device plugin on this node offers (the kubelet's allocatable resources: {known:?}), and pod {pod} has no device of it")]
    Unknown {
        /// `namespace/name`.
        network: String,
        /// The resource.
        resource: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// What the kubelet offers.
        known: Vec<String>,
    },
    /// More selections of the resource than the pod has devices of it.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}): pod {pod} selects {wanted} networks of it but was allocated {have} device(s) of it ({ids:?}): request one per selection")]
    TooFew {
        /// The first network left without a device.
        network: String,
        /// The resource.
        resource: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// How many selections name it.
        wanted: usize,
        /// How many the pod has.
        have: usize,
        /// Which.
        ids: Vec<String>,
    },
    /// A selection's `deviceID` that is not the pod's device of the resource.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}): the selection's deviceID {id:?} is not one of the devices of it allocated to pod {pod} ({ids:?})")]
    NotAllocated {
        /// `namespace/name`.
        network: String,
        /// The resource.
        resource: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// The selection's deviceID.
        id: String,
        /// The pod's.
        ids: Vec<String>,
    },
    /// Two selections wrote the same `deviceID` of the resource.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}): the selection's deviceID {id:?} is already taken by another selection of pod {pod}")]
    Twice {
        /// `namespace/name`.
        network: String,
        /// The resource.
        resource: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// The deviceID.
        id: String,
    },
    /// The kubelet could not be asked (socket missing, nobody listening, no answer in time),
    /// the helper could not run, or some of the pod's DRA devices are not in the node's DRA
    /// devices record (missing, or the agent has not seen them yet): retrying can help.
    #[error("network {network} names resource {resource} ({RESOURCE_NAME}), but the devices of pod {pod} cannot be read: {why}; nothing was attached, try again")]
    Kubelet {
        /// `namespace/name`.
        network: String,
        /// The resource.
        resource: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// What failed.
        why: String,
    },
}

impl From<DeviceError> for CniError {
    fn from(e: DeviceError) -> CniError {
        let code = match e {
            DeviceError::Kubelet { .. } => TRY_AGAIN_LATER,
            _ => INVALID_NETWORK_CONFIG,
        };
        CniError::new(code, e.to_string())
    }
}

/// The helper's answer: the pod's device IDs by resource (sorted), and when asked, the
/// resources the node offers at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// Resource → the pod's sorted IDs.
    pub devices: BTreeMap<String, Vec<String>>,
    /// Resources any device plugin of the node offers (`None`: not asked or not answered).
    pub allocatable: Option<Vec<String>>,
    /// Which call answered (`Get` or `List`), for the log.
    pub via: String,
    /// Why some of the pod's DRA devices could not be matched (the helper's `draUnresolved`).
    pub dra_unresolved: Option<String>,
}

/// What the selection's device-backed networks get: for each selected delegate (by index in
/// `selection.delegates`) the device ID, or the refusal. Pure: the kubelet's answer is given.
pub fn hand_out(selection: &Selection, pod: &str, answer: &Answer) -> Result<Vec<(usize, String)>, DeviceError> {
    // Too few devices while some of the pod's DRA devices are not known yet: that, not the pod.
    hand_out_known(selection, pod, answer).map_err(|e| match (e, &answer.dra_unresolved) {
        (
            DeviceError::Unknown { network, resource, pod, .. }
            | DeviceError::NotRequested { network, resource, pod }
            | DeviceError::TooFew { network, resource, pod, .. },
            Some(why),
        ) => DeviceError::Kubelet { network, resource, pod, why: why.clone() },
        (e, _) => e,
    })
}

/// [`hand_out`] from the devices the answer names alone.
fn hand_out_known(selection: &Selection, pod: &str, answer: &Answer) -> Result<Vec<(usize, String)>, DeviceError> {
    let mut out = Vec::new();
    // Resource → the IDs still free, in order.
    let mut pools: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let named: Vec<(usize, &str)> =
        selection.resources.iter().enumerate().filter_map(|(i, r)| r.as_deref().map(|r| (i, r))).collect();
    let network = |i: usize| selection.networks.get(i).map_or_else(String::new, |n| n.name.clone());
    for (i, r) in &named {
        let ids = answer.devices.get(*r).cloned().unwrap_or_default();
        if ids.is_empty() {
            let (network, resource, pod) = (network(*i), r.to_string(), pod.to_string());
            return Err(match &answer.allocatable {
                Some(known) if !known.iter().any(|k| k == r) => {
                    DeviceError::Unknown { network, resource, pod, known: known.clone() }
                }
                _ => DeviceError::NotRequested { network, resource, pod },
            });
        }
        pools.entry(r).or_insert(ids);
    }
    // Written IDs first: they are the pod author's choice, and take their device out of the
    // pool before the others are handed out in order.
    let mut written: Vec<usize> = Vec::new();
    for (i, r) in &named {
        let Some(id) = selection.delegates[*i].runtime_config.get("deviceID").and_then(Value::as_str) else {
            continue;
        };
        let all = answer.devices.get(*r).cloned().unwrap_or_default();
        let pool = pools.entry(r).or_default();
        match pool.iter().position(|p| p == id) {
            Some(at) => {
                pool.remove(at);
                out.push((*i, id.to_string()));
                written.push(*i);
            }
            None if all.iter().any(|a| a == id) => {
                return Err(DeviceError::Twice {
                    network: network(*i),
                    resource: r.to_string(),
                    pod: pod.to_string(),
                    id: id.to_string(),
                })
            }
            None => {
                return Err(DeviceError::NotAllocated {
                    network: network(*i),
                    resource: r.to_string(),
                    pod: pod.to_string(),
                    id: id.to_string(),
                    ids: all,
                })
            }
        }
    }
    for (i, r) in &named {
        if written.contains(i) {
            continue;
        }
        let pool = pools.entry(r).or_default();
        if pool.is_empty() {
            let ids = answer.devices.get(*r).cloned().unwrap_or_default();
            return Err(DeviceError::TooFew {
                network: network(*i),
                resource: r.to_string(),
                pod: pod.to_string(),
                wanted: named.iter().filter(|(_, n)| n == r).count(),
                have: ids.len(),
                ids,
            });
        }
        out.push((*i, pool.remove(0)));
    }
    out.sort();
    Ok(out)
}

/// Gives the selection's device-backed networks their devices (nothing at all — no exec, no
/// socket — when no selected network names a resource), and each its device-info file in
/// `devinfo` (`CNIDeviceInfoFile`; [`stage`] fills them). Returns the line to log.
pub fn assign(
    kubelet: &Kubelet,
    args: &str,
    container_id: &str,
    devinfo: &Path,
    selection: &mut Selection,
) -> Result<Option<String>, CniError> {
    let Some(first) = selection.resources.iter().position(Option::is_some) else {
        return Ok(None);
    };
    let network = selection.networks.get(first).map_or_else(String::new, |n| n.name.clone());
    let resource = selection.resources[first].clone().unwrap_or_default();
    let p = Pod::from_args(args);
    let (Some(ns), Some(name)) = (p.namespace, p.name) else {
        return Err(DeviceError::NoPod { network, resource }.into());
    };
    let pod = format!("{ns}/{name}");
    let mut wanted: Vec<&str> = selection.resources.iter().flatten().map(String::as_str).collect();
    wanted.sort();
    wanted.dedup();
    let answer = ask(kubelet, &ns, &name, &wanted).map_err(|why| DeviceError::Kubelet {
        network: network.clone(),
        resource: resource.clone(),
        pod: pod.clone(),
        why,
    })?;
    let given = hand_out(selection, &pod, &answer)?;
    let mut line = format!("devices of pod {pod} (PodResources {}):", answer.via);
    for (i, id) in given {
        let d = &mut selection.delegates[i];
        inject(&mut d.config, &id).map_err(|e| {
            CniError::new(INVALID_NETWORK_CONFIG, format!("network {}: cannot take deviceID {id}: {e}", d.name()))
        })?;
        let network = selection.networks.get(i).map_or("", |n| n.name.as_str());
        let resource = selection.resources[i].as_deref().unwrap_or_default();
        let file = devinfo.join("cni").join(file_name(&[network, "-", container_id, "_", &id]));
        d.runtime_config.insert("deviceID".into(), Value::String(id.clone()));
        d.runtime_config.insert(DEVICE_INFO_FILE.into(), Value::String(file.display().to_string()));
        line.push_str(&format!(" {network} {resource}={id}"));
    }
    Ok(Some(line))
}

/// `deviceID` and `pciBusID` into every plugin of the network (Multus writes both whatever the
/// plugin: SR-IOV CNI reads `deviceID`, host-device `pciBusID`). A list's plugins are edited in
/// its bytes (what libcni semantics run), which are then read again.
fn inject(config: &mut DelegateConfig, id: &str) -> Result<(), String> {
    const KEYS: [&str; 2] = ["deviceID", "pciBusID"];
    match config {
        DelegateConfig::Plugin(c) => {
            for k in KEYS {
                c.set(k, id.into());
            }
        }
        DelegateConfig::List(l) => {
            let mut v: Value = serde_json::from_slice(&l.bytes).map_err(|e| e.to_string())?;
            let plugins = v.get_mut("plugins").and_then(Value::as_array_mut).into_iter().flatten();
            for p in plugins.filter_map(Value::as_object_mut) {
                for k in KEYS {
                    p.insert(k.into(), id.into());
                }
            }
            *l = NetConfList::parse(&serde_json::to_vec(&v).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// A device-info file's name from its parts, each `/` a `-` (nad-client's `strings.ReplaceAll`).
fn file_name(parts: &[&str]) -> String {
    parts.concat().replace('/', "-")
}

/// The device plugin's device-info file of a device (nad-client `getDPDeviceInfoPath`).
pub fn dp_file(devinfo: &Path, resource: &str, id: &str) -> PathBuf {
    devinfo.join("dp").join(file_name(&[resource, "-", id, "-device.json"]))
}

/// Before the ADD: each device-backed network's `CNIDeviceInfoFile` gets the device plugin's
/// file of its device, when the device plugin wrote one (Multus's `CopyDeviceInfoForCNIFromDP`;
/// a missing one is no error there either: the delegate may write its own). Networks without a
/// device are not looked at.
pub fn stage<'a>(
    devinfo: &Path,
    selected: impl Iterator<Item = (&'a Delegate, &'a Option<String>)>,
) -> Result<(), CniError> {
    for (d, resource) in selected {
        let (Some(resource), Some(id), Some(file)) =
            (resource, d.runtime_config.get("deviceID").and_then(Value::as_str), device_info_file(&d.runtime_config))
        else {
            continue;
        };
        let from = dp_file(devinfo, resource, id);
        let bytes = match std::fs::read(&from) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(devinfo_error(&from, "reading", &e)),
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(dir).map_err(|e| devinfo_error(dir, "creating", &e))?;
        cni_runtime::files::replace_volatile(&file, &bytes, 0o644)
            .map_err(|e| devinfo_error(&file, "writing", &e.source))?;
    }
    Ok(())
}

fn devinfo_error(path: &Path, what: &str, e: &std::io::Error) -> CniError {
    CniError::new(cni_types::error::IO_FAILURE, format!("device-info file {}: {what}: {e}", path.display()))
}

/// A network's `CNIDeviceInfoFile` (runtimeConfig), when it has one.
pub fn device_info_file(runtime_config: &Map<String, Value>) -> Option<PathBuf> {
    runtime_config.get(DEVICE_INFO_FILE).and_then(Value::as_str).map(PathBuf::from)
}

/// After the ADD: what the network's device-info file holds (a JSON object, the device-info
/// spec's), for its network-status entries; `None` without a file, or with one that is no JSON
/// object (Multus logs and leaves the entry without it too).
pub fn device_info(runtime_config: &Map<String, Value>) -> Option<Value> {
    let file = device_info_file(runtime_config)?;
    let bytes = cni_runtime::files::read_regular(&file, 1 << 16, cni_runtime::files::Links::Refuse).ok()?;
    serde_json::from_slice::<Value>(&bytes).ok().filter(Value::is_object)
}

/// DEL (and a failed ADD): the sandbox's device-info files, the ones [`assign`] named
/// (`<network>-<containerID>_<deviceID>`; Multus's `CleanDeviceInfoForCNI`). The directory is
/// absent on a node where no network was ever given a device: one failed open.
pub fn forget(devinfo: &Path, container_id: &str) {
    let dir = devinfo.join("cni");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mark = format!("-{container_id}_");
    for e in entries.flatten() {
        if e.file_name().to_str().is_some_and(|n| n.contains(&mark)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The helper beside the delegator's own binary.
fn helper() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("the delegator's own path: {e}"))?;
    Ok(me.parent().unwrap_or(Path::new("/")).join(HELPER))
}

/// Runs the helper (bounded: its own bound on the kubelet, and a kill a second after that).
fn ask(kubelet: &Kubelet, ns: &str, name: &str, resources: &[&str]) -> Result<Answer, String> {
    ask_at(&helper()?, kubelet, ns, name, resources)
}

/// [`ask`] with the helper at `path`. The helper starts with an empty signal mask: the
/// delegator may run with SIGTERM and SIGINT blocked (a mask inherited across exec — the
/// agent's updates are started with theirs emptied, but a runtime need not), and the helper
/// must stay killable by them.
fn ask_at(path: &Path, kubelet: &Kubelet, ns: &str, name: &str, resources: &[&str]) -> Result<Answer, String> {
    let mut command = Command::new(path);
    cni_runtime::invoke::empty_signal_mask(&mut command);
    let mut child = command
        .arg(&kubelet.socket)
        .arg(ns)
        .arg(name)
        .arg(kubelet.timeout.as_millis().max(1).to_string())
        .arg("--dra-devices")
        .arg(&kubelet.dra_devices)
        .args(resources)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {} (installed beside the delegator): {e}", path.display()))?;
    let deadline = Instant::now() + kubelet.timeout + Duration::from_secs(1);
    let out = cni_runtime::child_io::communicate(&mut child, b"", Some(deadline))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if out.status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "{} did not finish within {} ms",
            path.display(),
            (kubelet.timeout + Duration::from_secs(1)).as_millis()
        ));
    }
    parse_answer(&out.stdout).map_err(|e| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.trim().is_empty() {
            e
        } else {
            format!("{e} ({})", stderr.trim())
        }
    })
}

/// The helper's stdout: `{"via", "devices", "allocatable"?, "dra"?, "draUnresolved"?}` or
/// `{"kind", "msg"}` (`dra` is for the log only: the helper merged its IDs into `devices`).
pub fn parse_answer(stdout: &[u8]) -> Result<Answer, String> {
    let v: Value = serde_json::from_slice(stdout).map_err(|e| format!("{HELPER} printed no answer: {e}"))?;
    if let Some(msg) = v.get("msg").and_then(Value::as_str) {
        return Err(msg.to_string());
    }
    let mut devices = BTreeMap::new();
    for (r, ids) in v.get("devices").and_then(Value::as_object).into_iter().flatten() {
        let ids: Vec<String> =
            ids.as_array().into_iter().flatten().filter_map(|i| i.as_str().map(str::to_string)).collect();
        devices.insert(r.clone(), ids);
    }
    let allocatable = v
        .get("allocatable")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|r| r.as_str().map(str::to_string)).collect());
    Ok(Answer {
        devices,
        allocatable,
        via: v.get("via").and_then(Value::as_str).unwrap_or("?").to_string(),
        dra_unresolved: v.get("draUnresolved").and_then(Value::as_str).map(str::to_string),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::kubernetes::StatusNetwork;
    use braid_attach::Delegate;
    use serde_json::json;

    fn selection(nets: &[(&str, Option<&str>, Option<&str>)]) -> Selection {
        let mut s = Selection::default();
        for (name, resource, written) in nets {
            let mut d = Delegate::default();
            if let Some(id) = written {
                d.runtime_config.insert("deviceID".into(), json!(id));
            }
            s.delegates.push(d);
            s.networks.push(StatusNetwork {
                name: name.to_string(),
                default: false,
                default_route: None,
                device_info: None,
                claim: None,
            });
            s.resources.push(resource.map(str::to_string));
        }
        s
    }

    fn answer(devices: &[(&str, &[&str])], allocatable: Option<&[&str]>) -> Answer {
        Answer {
            devices: devices
                .iter()
                .map(|(r, ids)| (r.to_string(), ids.iter().map(|i| i.to_string()).collect()))
                .collect(),
            allocatable: allocatable.map(|a| a.iter().map(|r| r.to_string()).collect()),
            via: "Get".into(),
            dra_unresolved: None,
        }
    }

    const VF: &str = "braid.test/fakevf";

    #[test]
    fn selections_of_one_resource_take_its_sorted_ids_in_the_pods_order() {
        let s = selection(&[("a/one", Some(VF), None), ("a/plain", None, None), ("a/two", Some(VF), None)]);
        let a = answer(&[(VF, &["0000:00:1f.1", "0000:00:1f.4"])], None);
        assert_eq!(hand_out(&s, "a/p", &a).unwrap(), [(0, "0000:00:1f.1".into()), (2, "0000:00:1f.4".into())]);
    }

    #[test]
    fn a_written_device_id_is_honoured_and_taken_out_of_the_pool_only_if_it_is_the_pods() {
        let a = answer(&[(VF, &["0000:00:1f.1", "0000:00:1f.4"])], None);
        let s = selection(&[("a/one", Some(VF), None), ("a/two", Some(VF), Some("0000:00:1f.1"))]);
        assert_eq!(hand_out(&s, "a/p", &a).unwrap(), [(0, "0000:00:1f.4".into()), (1, "0000:00:1f.1".into())]);
        let s = selection(&[("a/one", Some(VF), Some("0000:00:1f.7"))]);
        let e = hand_out(&s, "a/p", &a).unwrap_err().to_string();
        assert!(e.contains("deviceID \"0000:00:1f.7\" is not one of the devices") && e.contains("pod a/p"), "{e}");
        let s = selection(&[("a/one", Some(VF), Some("0000:00:1f.1")), ("a/two", Some(VF), Some("0000:00:1f.1"))]);
        assert!(matches!(hand_out(&s, "a/p", &a), Err(DeviceError::Twice { .. })));
    }

    #[test]
    fn refusals_name_the_network_the_resource_and_the_pod_with_the_right_code() {
        let two = selection(&[("a/one", Some(VF), None), ("a/two", Some(VF), None)]);
        let e = hand_out(&two, "a/p", &answer(&[(VF, &["0000:00:1f.1"])], None)).unwrap_err();
        assert!(matches!(&e, DeviceError::TooFew { network, wanted: 2, have: 1, .. } if network == "a/two"), "{e}");
        let none = answer(&[("other/x", &["1"])], Some(&[VF, "other/x"]));
        let e = hand_out(&two, "a/p", &none).unwrap_err();
        let c: CniError = e.clone().into();
        assert_eq!(c.code, INVALID_NETWORK_CONFIG);
        assert!(
            c.msg.contains("network a/one") && c.msg.contains(VF) && c.msg.contains("pod a/p was allocated no device"),
            "{}",
            c.msg
        );
        let unknown = answer(&[], Some(&["other/x"]));
        let c: CniError = hand_out(&two, "a/p", &unknown).unwrap_err().into();
        assert!(c.msg.contains("which no device plugin on this node offers"), "{}", c.msg);
        let mut stale = answer(&[(VF, &["0000:00:1f.1"])], None);
        stale.dra_unresolved = Some("the pod's DRA devices d/n1/vf-0 (claim a/c) are not in the record".into());
        let c: CniError = hand_out(&two, "a/p", &stale).unwrap_err().into();
        assert_eq!(c.code, TRY_AGAIN_LATER);
        assert!(
            c.msg.contains("network a/two") && c.msg.contains("pod a/p") && c.msg.contains("d/n1/vf-0"),
            "{}",
            c.msg
        );
        let k: CniError =
            DeviceError::Kubelet { network: "a/one".into(), resource: VF.into(), pod: "a/p".into(), why: "x".into() }
                .into();
        assert_eq!(k.code, TRY_AGAIN_LATER);
    }

    #[test]
    fn without_a_resource_nothing_runs() {
        // No helper exists where the unit tests run: asking would fail with code 11.
        let nowhere = Path::new("/nonexistent/devinfo");
        let mut s = selection(&[("a/plain", None, None)]);
        let args = "K8S_POD_NAMESPACE=a;K8S_POD_NAME=p";
        assert_eq!(assign(&Kubelet::default(), args, "c1", nowhere, &mut s).unwrap(), None);
        assert!(s.delegates[0].runtime_config.is_empty(), "{:?}", s.delegates[0].runtime_config);
        let mut s = selection(&[("a/one", Some(VF), None)]);
        let e = assign(&Kubelet::default(), "K8S_POD_NAMESPACE=a", "c1", nowhere, &mut s).unwrap_err();
        assert!(e.code == INVALID_NETWORK_CONFIG && e.msg.contains("does not name the pod"), "{}", e.msg);
    }

    #[test]
    fn every_plugin_of_the_network_gets_device_id_and_pci_bus_id() {
        let list = br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"host-device"},{"type":"tuning"}]}"#;
        let mut c = DelegateConfig::List(NetConfList::parse(list).unwrap());
        inject(&mut c, "0000:00:1f.1").unwrap();
        let DelegateConfig::List(l) = &c else { unreachable!() };
        for p in &l.plugins {
            assert_eq!(
                (p.get("deviceID"), p.get("pciBusID")),
                (Some(&json!("0000:00:1f.1")), Some(&json!("0000:00:1f.1")))
            );
        }
        let v: Value = serde_json::from_slice(&l.bytes).unwrap();
        assert_eq!(v["plugins"][1]["pciBusID"], "0000:00:1f.1");
        let mut c = DelegateConfig::Plugin(
            cni_types::NetConf::parse(br#"{"cniVersion":"1.0.0","name":"n","type":"x"}"#).unwrap(),
        );
        inject(&mut c, "mlx5_core.sf.4").unwrap();
        let DelegateConfig::Plugin(p) = &c else { unreachable!() };
        assert_eq!(p.get("pciBusID"), Some(&json!("mlx5_core.sf.4")));
    }

    /// A directory of the test's own, removed on drop.
    struct Dir(PathBuf);
    impl Dir {
        fn new(what: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("braid-devices-{what}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn device_info_comes_from_the_device_plugins_file_through_the_networks_own_and_del_removes_it() {
        let d = Dir::new("devinfo");
        let dp = dp_file(&d.0, VF, "0000:00:1f.2");
        assert_eq!(dp, d.0.join("dp/braid.test-fakevf-0000:00:1f.2-device.json"));
        let info = json!({"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:00:1f.2"}});
        std::fs::create_dir_all(dp.parent().unwrap()).unwrap();
        std::fs::write(&dp, info.to_string()).unwrap();
        // Two networks given devices (one with a device plugin file, one without), one plain.
        let mut s = selection(&[("a/one", Some(VF), None), ("a/plain", None, None), ("a/two", Some(VF), None)]);
        for (i, id) in [(0, "0000:00:1f.2"), (2, "0000:00:1f.3")] {
            let file = d.0.join("cni").join(file_name(&[&s.networks[i].name, "-", "c1", "_", id]));
            s.delegates[i].runtime_config.insert("deviceID".into(), json!(id));
            s.delegates[i].runtime_config.insert(DEVICE_INFO_FILE.into(), json!(file.display().to_string()));
        }
        stage(&d.0, s.delegates.iter().zip(&s.resources)).unwrap();
        let one = device_info_file(&s.delegates[0].runtime_config).unwrap();
        assert_eq!(one, d.0.join("cni/a-one-c1_0000:00:1f.2"));
        assert_eq!(device_info(&s.delegates[0].runtime_config), Some(info.clone()));
        assert_eq!(device_info(&s.delegates[1].runtime_config), None, "a plain network has none");
        assert_eq!(device_info(&s.delegates[2].runtime_config), None, "no device plugin file, no delegate's");
        // What the delegate writes there is what network-status shows.
        let own = json!({"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:00:1f.3", "representor-device": "r3"}});
        std::fs::write(device_info_file(&s.delegates[2].runtime_config).unwrap(), own.to_string()).unwrap();
        assert_eq!(device_info(&s.delegates[2].runtime_config), Some(own));
        // Another sandbox's file stays; the device plugin's stays (it is the plugin's).
        let other = d.0.join("cni/a-one-c2_0000:00:1f.4");
        std::fs::write(&other, "{}").unwrap();
        forget(&d.0, "c1");
        let mut left: Vec<String> = std::fs::read_dir(d.0.join("cni"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["a-one-c2_0000:00:1f.4"]);
        assert!(dp.exists());
        forget(&d.0.join("absent"), "c1");
    }

    #[test]
    fn the_helper_starts_with_no_signal_blocked() {
        // The helper stand-in reports its own blocked signals in the answer's `via`: awk reads
        // /proc/self/status (a shell would not do: dash empties its mask when it starts).
        let d = Dir::new("mask");
        let helper = d.0.join(HELPER);
        let script = r#"#!/usr/bin/awk -f
BEGIN { while ((getline l < "/proc/self/status") > 0) if (l ~ /^SigBlk/) { split(l, a, "\t"); printf "{\"via\": \"%s\", \"devices\": {}}", a[2] } }
"#;
        std::fs::write(&helper, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let answer = std::thread::spawn(move || {
            let mut mask = nix::sys::signal::SigSet::empty();
            mask.add(nix::sys::signal::Signal::SIGTERM);
            mask.add(nix::sys::signal::Signal::SIGINT);
            mask.thread_block().unwrap();
            ask_at(&helper, &Kubelet::default(), "a", "p", &[VF])
        })
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(answer.via, "0000000000000000");
    }

    #[test]
    fn the_helpers_answer() {
        let a = parse_answer(br#"{"via":"List","devices":{"r/x":["b","a"]},"allocatable":["r/x"]}"#).unwrap();
        assert_eq!(
            (a.via.as_str(), &a.devices["r/x"], a.allocatable.as_deref()),
            ("List", &vec!["b".to_string(), "a".to_string()], Some(&["r/x".to_string()][..]))
        );
        assert_eq!(parse_answer(br#"{"kind":"timeout","msg":"no answer"}"#).unwrap_err(), "no answer");
        let a = parse_answer(br#"{"via":"Get","devices":{},"dra":[{"claim":"a/c"}],"draUnresolved":"why"}"#).unwrap();
        assert_eq!(a.dra_unresolved.as_deref(), Some("why"));
        assert!(parse_answer(b"").unwrap_err().contains("printed no answer"));
    }
}
