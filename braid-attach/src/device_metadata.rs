//! KEP-5304 device metadata for claim-backed networks: a file per claim and request that the
//! container runtime bind-mounts read-only into every container of the pod that lists the
//! claim (`resources.claims`), so that a program in the pod — a VM runtime above all — finds
//! its claim's interfaces without any API access.
//!
//! What Kubernetes 1.36 defines, and braid follows (k8s.io/dynamic-resource-allocation v0.36,
//! `api/metadata`, `kubeletplugin/metadata.go`; no feature gate: the driver opts in, as the Go
//! helper's `EnableDeviceMetadata` does):
//!
//! ```text
//! on the node   {pluginDataDir}/dra-device-metadata/{claimNamespace}_{claimName}/{request}/metadata.json
//! CDI spec      {cdiDir}/{driver}_metadata_{claimUID}_{request}.json   kind {driver}/metadata,
//!               device {claimUID}_{request}, one mount: the file, read-only (ro, bind)
//! in the pod    /var/run/kubernetes.io/dra-device-attributes/resourceclaims/{claimName}/{request}/{driver}-metadata.json
//!               …/resourceclaimtemplates/{podClaimName}/{request}/… for a claim from a template
//! ```
//!
//! The driver returns the CDI device ID (`{driver}/metadata={claimUID}_{request}`) in
//! `NodePrepareResources` on the first device of each request; the kubelet hands it to the
//! runtime with the containers that use the claim (containerd 2 and CRI-O read CDI specs from
//! `/etc/cdi` and `/var/run/cdi` by default). The file is a JSON stream of one
//! `metadata.resource.k8s.io/v1alpha1` `DeviceMetadata` object per API version written (braid:
//! v1alpha1, the only one): the claim's name, namespace, UID and a `generation`, the pod's claim
//! name for a template's claim, and the request's devices — driver, pool, name, the slice's
//! attributes and, once attached, KEP-4817's `networkData`.
//!
//! **Who writes what.** Prepare (the node agent) writes generation 1, durably, with no
//! `networkData` — the interface does not exist yet — and records the file's path in the claim
//! record. The delegator's ADD, once the claim's network is attached, rewrites it with each
//! device's `networkData` and the generation one higher ([`fill`]) — **in place**, because the
//! runtime bind-mounted the file's inode (a rename would leave the container the old one), and
//! before `RunPodSandbox` returns, so before any container of the pod starts: the Go helper
//! leaves this to NRI hooks (`UpdateRequestMetadata`), which braid has no need of.
//! Unprepare removes the claim's files ([`remove_claim`]).

use cni_runtime::files;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory below the plugin's data directory (`metadataSubDir`).
pub const SUBDIR: &str = "dra-device-metadata";
/// Where the files are in a container (`metadata.ContainerDir`).
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
/// The API version braid writes.
pub const API_VERSION: &str = "metadata.resource.k8s.io/v1alpha1";
/// The CDI spec version the Go helper writes (mounts only).
const CDI_VERSION: &str = "0.5.0";
/// The cap on a metadata file read back: far above any real one.
const MAX_FILE: u64 = 1 << 20;

/// The claim a file is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The pod's name for the claim (`resource.kubernetes.io/pod-claim-name`), for a claim
    /// made from a template.
    pub pod_claim_name: Option<String>,
}

/// Why a metadata file could not be written, filled or removed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name that does not belong in a path (Kubernetes names never are these).
    #[error("device metadata: {what} {value:?} cannot be part of a path")]
    BadName {
        /// `claim namespace`, `claim name`, `request`, `claim UID`.
        what: &'static str,
        /// The value.
        value: String,
    },
    /// The file system refused.
    #[error("device metadata {}: {what}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file that is not braid's metadata.
    #[error("device metadata {}: malformed: {why}", .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

fn io<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io { path: path.to_path_buf(), what, source }
}

/// `value` as one path component: not empty, `.` or `..`, no `/` or NUL.
fn part<'a>(what: &'static str, value: &'a str) -> Result<&'a str, Error> {
    if value.is_empty() || value == "." || value == ".." || value.contains(['/', '\0']) {
        Err(Error::BadName { what, value: value.to_string() })
    } else {
        Ok(value)
    }
}

/// `{plugin_data_dir}/dra-device-metadata/{namespace}_{name}`: the claim's files.
pub fn claim_dir(plugin_data_dir: &Path, namespace: &str, name: &str) -> Result<PathBuf, Error> {
    Ok(plugin_data_dir.join(SUBDIR).join(format!(
        "{}_{}",
        part("claim namespace", namespace)?,
        part("claim name", name)?
    )))
}

/// `…/{namespace}_{name}/{request}/metadata.json`: one request's file (the base request: a
/// prioritized list's subrequest shares its request's file).
pub fn file(plugin_data_dir: &Path, namespace: &str, name: &str, request: &str) -> Result<PathBuf, Error> {
    Ok(claim_dir(plugin_data_dir, namespace, name)?.join(part("request", request)?).join("metadata.json"))
}

/// Where the file is in the pod's containers.
pub fn container_path(driver: &str, claim: &ClaimRef, request: &str) -> String {
    match claim.pod_claim_name.as_deref().filter(|n| !n.is_empty()) {
        Some(pod_claim) => {
            format!("{CONTAINER_DIR}/resourceclaimtemplates/{pod_claim}/{request}/{driver}-metadata.json")
        }
        None => format!("{CONTAINER_DIR}/resourceclaims/{}/{request}/{driver}-metadata.json", claim.name),
    }
}

/// `{cdi_dir}/{driver}_metadata_{uid}_{request}.json`.
pub fn cdi_spec_file(cdi_dir: &Path, driver: &str, uid: &str, request: &str) -> Result<PathBuf, Error> {
    Ok(cdi_dir.join(format!("{driver}_metadata_{}_{}.json", part("claim UID", uid)?, part("request", request)?)))
}

/// The CDI device ID the kubelet passes to the runtime: `{driver}/metadata={uid}_{request}`.
pub fn cdi_device_id(driver: &str, uid: &str, request: &str) -> String {
    format!("{driver}/metadata={uid}_{request}")
}

/// The CDI spec that mounts `host` (as the runtime sees it) at [`container_path`].
pub fn cdi_spec(driver: &str, claim: &ClaimRef, request: &str, host: &Path) -> Value {
    json!({
        "cdiVersion": CDI_VERSION,
        "kind": format!("{driver}/metadata"),
        "devices": [{
            "name": format!("{}_{request}", claim.uid),
            "containerEdits": {"mounts": [{
                "hostPath": host.to_string_lossy(),
                "containerPath": container_path(driver, claim, request),
                "options": ["ro", "bind"],
            }]},
        }],
    })
}

/// One device of a request: `{"driver", "pool", "name", "attributes"}` (the slice's attributes
/// in the API's form, e.g. `{"network": {"string": "t/side"}}`).
pub fn device(driver: &str, pool: &str, name: &str, attributes: Value) -> Value {
    let mut d = json!({"driver": driver, "pool": pool, "name": name});
    if attributes.as_object().is_some_and(|a| !a.is_empty()) {
        d["attributes"] = attributes;
    }
    d
}

/// The `DeviceMetadata` object of `request` (the allocation's, subrequest included), its
/// `devices` ([`device`]).
pub fn document(claim: &ClaimRef, generation: i64, request: &str, devices: Vec<Value>) -> Value {
    let mut d = json!({
        "kind": "DeviceMetadata",
        "apiVersion": API_VERSION,
        "metadata": {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid, "generation": generation},
        "requests": [{"name": request, "devices": devices}],
    });
    if let Some(p) = &claim.pod_claim_name {
        d["podClaimName"] = p.as_str().into();
    }
    d
}

/// KEP-4817's `networkData` of an interface: its name, its addresses in CIDR form and, when
/// known, its MAC (none rather than an empty one: the API server refuses an empty address).
pub fn network_data(interface: &str, ips: &[String], mac: Option<&str>) -> Value {
    let mut n = json!({"interfaceName": interface, "ips": ips});
    if let Some(m) = mac.filter(|m| !m.is_empty()) {
        n["hardwareAddress"] = m.into();
    }
    n
}

fn stream(doc: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(doc).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn mkdirs(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).map_err(io(dir, "creating"))
}

/// Writes `doc` to `path` and `spec` to `spec_path` for Prepare: atomically and durably (the
/// kubelet does not prepare again after a reboot), 0644, directories 0755 — unless `path`
/// already holds this claim's metadata (a Prepare repeated after the agent restarted: a
/// container may have the file mounted, and an ADD may have filled it), which is kept.
pub fn prepare(path: &Path, doc: &Value, spec_path: &Path, spec: &Value) -> Result<(), Error> {
    let uid = doc["metadata"]["uid"].as_str().unwrap_or_default();
    let kept = read_first(path).ok().is_some_and(|old| old["metadata"]["uid"].as_str() == Some(uid));
    if !kept {
        mkdirs(path.parent().unwrap_or(Path::new("/")))?;
        files::replace(path, &stream(doc), 0o644).map_err(|e| Error::Io {
            path: e.path,
            what: e.step.verb(),
            source: e.source,
        })?;
    }
    mkdirs(spec_path.parent().unwrap_or(Path::new("/")))?;
    let mut spec_bytes = serde_json::to_vec_pretty(spec).unwrap_or_default();
    spec_bytes.push(b'\n');
    files::replace(spec_path, &spec_bytes, 0o644).map_err(|e| Error::Io {
        path: e.path,
        what: e.step.verb(),
        source: e.source,
    })
}

/// The file's first object (a reader takes the first version it knows). braid writes one
/// object on one line, so its first line is read (not a stream deserializer: the delegator
/// reads this file, and every generic instantiation counts against its 1.2 MB size budget).
fn read_first(path: &Path) -> Result<Value, Error> {
    let bytes = files::read_regular(path, MAX_FILE, files::Links::Refuse).map_err(io(path, "reading"))?;
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    match serde_json::from_slice::<Value>(line) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(Error::Malformed { path: path.to_path_buf(), why: "not an object".into() }),
        Err(e) => Err(Error::Malformed { path: path.to_path_buf(), why: e.to_string() }),
    }
}

/// Fills the metadata at `path` once the claim's devices are attached: each `(pool, device)`
/// of `networks` gets its `networkData`, the generation goes one up, and the file is
/// rewritten in place (truncated and written, not renamed: the runtime mounted its inode),
/// not fsynced — after a reboot the pod's next sandbox's ADD fills it again.
pub fn fill(path: &Path, networks: &[(&str, &str, Value)]) -> Result<(), Error> {
    let mut doc = read_first(path)?;
    let malformed = |why: &str| Error::Malformed { path: path.to_path_buf(), why: why.into() };
    let generation = doc["metadata"]["generation"].as_i64().unwrap_or(0);
    doc["metadata"]["generation"] = (generation + 1).into();
    let requests = doc.get_mut("requests").and_then(Value::as_array_mut).ok_or_else(|| malformed("no requests"))?;
    for (pool, device, data) in networks {
        let found = requests
            .iter_mut()
            .filter_map(|r| r.get_mut("devices").and_then(Value::as_array_mut))
            .flatten()
            .find(|d| d["pool"].as_str() == Some(pool) && d["name"].as_str() == Some(device))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| malformed(&format!("no device {pool}/{device}")))?;
        found.insert("networkData".into(), data.clone());
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(io(path, "opening"))?;
    f.write_all(&stream(&doc)).map_err(io(path, "writing"))
}

/// Removes the claim's metadata (its directory) and its CDI specs (every request's). Absent is
/// fine: Unprepare is idempotent.
pub fn remove_claim(plugin_data_dir: &Path, cdi_dir: &Path, driver: &str, claim: &ClaimRef) -> Result<(), Error> {
    let dir = claim_dir(plugin_data_dir, &claim.namespace, &claim.name)?;
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&dir, "removing")(e)),
    }
    let prefix = format!("{driver}_metadata_{}_", part("claim UID", &claim.uid)?);
    let entries = match std::fs::read_dir(cdi_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(cdi_dir, "listing")(e)),
    };
    for e in entries {
        let e = e.map_err(io(cdi_dir, "listing"))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&prefix) && name.ends_with(".json") {
            let p = e.path();
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&p, "removing")(e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::test_dir::Dir;
    use std::os::unix::fs::MetadataExt;

    fn claim(template: Option<&str>) -> ClaimRef {
        ClaimRef {
            namespace: "t".into(),
            name: "web-net-x7k2p".into(),
            uid: "c-1".into(),
            pod_claim_name: template.map(str::to_string),
        }
    }

    #[test]
    fn paths_are_the_go_helpers() {
        let pdd = Path::new("/var/lib/kubelet/plugins/net.braid-cni.io");
        assert_eq!(
            file(pdd, "t", "web-net-x7k2p", "net").unwrap(),
            Path::new(
                "/var/lib/kubelet/plugins/net.braid-cni.io/dra-device-metadata/t_web-net-x7k2p/net/metadata.json"
            )
        );
        assert_eq!(
            cdi_spec_file(Path::new("/var/run/cdi"), "net.braid-cni.io", "c-1", "net").unwrap(),
            Path::new("/var/run/cdi/net.braid-cni.io_metadata_c-1_net.json")
        );
        assert_eq!(cdi_device_id("net.braid-cni.io", "c-1", "net"), "net.braid-cni.io/metadata=c-1_net");
        assert_eq!(
            container_path("net.braid-cni.io", &claim(None), "net"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/web-net-x7k2p/net/net.braid-cni.io-metadata.json"
        );
        assert_eq!(
            container_path("net.braid-cni.io", &claim(Some("net")), "side"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/net/side/net.braid-cni.io-metadata.json"
        );
        for bad in ["", ".", "..", "a/b"] {
            assert!(file(pdd, bad, "n", "r").unwrap_err().to_string().contains("claim namespace"));
            assert!(file(pdd, "t", bad, "r").unwrap_err().to_string().contains("claim name"));
            assert!(file(pdd, "t", "n", bad).unwrap_err().to_string().contains("request"));
            assert!(cdi_spec_file(pdd, "d", bad, "r").is_err());
        }
    }

    #[test]
    fn prepared_then_filled_in_place_then_removed() {
        let d = Dir::new("metadata-fill");
        let pdd = d.0.join("plugins/net.braid-cni.io");
        let cdi = d.0.join("cdi");
        let c = claim(Some("net"));
        let path = file(&pdd, &c.namespace, &c.name, "net").unwrap();
        let spec_path = cdi_spec_file(&cdi, "net.braid-cni.io", &c.uid, "net").unwrap();
        let attrs = json!({"network": {"string": "t/side"}, "type": {"string": "macvlan"}});
        let doc = document(&c, 1, "net", vec![device("net.braid-cni.io", "node2", "t-side-1a2b3c4d", attrs)]);
        let spec = cdi_spec("net.braid-cni.io", &c, "net", &path);
        prepare(&path, &doc, &spec_path, &spec).unwrap();
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written,
            json!({"kind": "DeviceMetadata", "apiVersion": "metadata.resource.k8s.io/v1alpha1",
                   "metadata": {"name": "web-net-x7k2p", "namespace": "t", "uid": "c-1", "generation": 1},
                   "podClaimName": "net",
                   "requests": [{"name": "net", "devices": [{"driver": "net.braid-cni.io", "pool": "node2",
                     "name": "t-side-1a2b3c4d", "attributes": {"network": {"string": "t/side"}, "type": {"string": "macvlan"}}}]}]})
        );
        let spec_read: Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
        assert_eq!(spec_read["kind"], "net.braid-cni.io/metadata");
        assert_eq!(spec_read["devices"][0]["name"], "c-1_net");
        assert_eq!(spec_read["devices"][0]["containerEdits"]["mounts"][0]["hostPath"], path.to_str().unwrap());
        assert_eq!(spec_read["devices"][0]["containerEdits"]["mounts"][0]["options"], json!(["ro", "bind"]));
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o644);

        let inode = std::fs::metadata(&path).unwrap().ino();
        let data = network_data("side0", &["198.18.9.5/24".into()], Some("02:00:00:00:09:05"));
        fill(&path, &[("node2", "t-side-1a2b3c4d", data.clone())]).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "in place: a bind mount of the file sees it");
        let filled: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(filled["metadata"]["generation"], 2);
        assert_eq!(filled["requests"][0]["devices"][0]["networkData"], data);
        assert_eq!(filled["requests"][0]["devices"][0]["attributes"]["network"], json!({"string": "t/side"}));

        // Prepare again (the agent restarted): the filled file stays.
        prepare(&path, &doc, &spec_path, &spec).unwrap();
        let again: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(again, filled);

        // A device the file does not have is an error naming it, and changes nothing.
        let e = fill(&path, &[("node2", "other", data)]).unwrap_err().to_string();
        assert!(e.contains("no device node2/other"), "{e}");
        assert_eq!(serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap()).unwrap(), filled);

        // Another claim's spec stays when this one's go.
        let other = cdi.join("net.braid-cni.io_metadata_c-2_net.json");
        std::fs::write(&other, b"{}").unwrap();
        remove_claim(&pdd, &cdi, "net.braid-cni.io", &c).unwrap();
        assert!(!path.exists() && !spec_path.exists() && other.exists());
        assert!(!claim_dir(&pdd, "t", "web-net-x7k2p").unwrap().exists());
        remove_claim(&pdd, &cdi, "net.braid-cni.io", &c).unwrap();
        assert!(fill(&path, &[]).unwrap_err().to_string().contains("reading"));
    }

    #[test]
    fn network_data_without_a_mac_has_no_hardware_address() {
        assert_eq!(network_data("net1", &[], None), json!({"interfaceName": "net1", "ips": []}));
        assert_eq!(network_data("net1", &[], Some("")), json!({"interfaceName": "net1", "ips": []}));
    }
}
