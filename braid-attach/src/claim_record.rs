//! The node-local claim record: what braid's DRA driver (the node agent's
//! `NodePrepareResources`) leaves on the node for the delegator's ADD of a pod whose
//! ResourceClaim asks for braid networks — one file per claim and pod it is reserved for:
//!
//! ```text
//! <claimsDir>/<podUID>/<claimUID>.json
//! ```
//!
//! ```json
//! {"claim": {"namespace": "t", "name": "web-net-x7k2p", "uid": "…"},
//!  "networks": [
//!    {"request": "net", "driver": "net.braid-cni.io", "pool": "node2", "device": "t-side-1a2b3c4d",
//!     "shareID": "…", "element": {"name": "side", "namespace": "t", "interface": "net9"}}]}
//! ```
//!
//! `element` is an NPWG selection element (the keys of `k8s.v1.cni.cncf.io/networks`' JSON
//! form); the delegator validates it exactly as an annotation's. `shareID` is the allocation's
//! (DRAConsumableCapacity: one device shared by many claims) and absent when it has none.
//! `metadata`, when the driver writes KEP-5304 device metadata (`--dra-device-metadata`), is
//! the request's metadata file as the node sees it, which the delegator's ADD fills in
//! ([`crate::device_metadata`]).
//!
//! **On disk, durably** (temporary file, fsync, rename, directory fsync: [`write()`]), not under
//! `/run`: after a node reboot the kubelet's checkpoint says the claim is prepared and never
//! calls `NodePrepareResources` again (kubelet `pkg/kubelet/cm/dra/manager.go`
//! `PrepareResources`: prepared claims of the checkpoint are skipped), yet the pod's new
//! sandbox's ADD needs the record. Files 0644, directories 0755: nothing in it is secret (what
//! the claim's status shows anyone who may read the claim).
//!
//! One type, here below both its users: the node agent writes and removes records, the
//! delegator reads them. UIDs go into paths only after [`valid_uid`] (Kubernetes UIDs are
//! UUIDs; nothing with a `/`, a `.` or more than 64 bytes is one).

use cni_runtime::files::{self, Links};
use serde::Serialize;
use serde_json::{Map, Value};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The default `claimsDir` (the delegator's `kubernetes.claimsDir`, the agent's flag).
pub const DEFAULT_DIR: &str = "/var/lib/braid/claims";

/// The cap on one record: far above any real one (a claim has at most 32 requests).
const MAX_RECORD: u64 = 1 << 20;

/// Which claim: its reference as the kubelet passes it (`NodePrepareResources`' `Claim`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// `metadata.namespace` (the pod's).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// One network of the claim: the request and device it was allocated, and the selection
/// element to attach it with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Network {
    /// The claim's request (`status.allocation.devices.results[].request`).
    pub request: String,
    /// The allocation result's driver.
    pub driver: String,
    /// Its pool (braid's: the node's name).
    pub pool: String,
    /// Its device (one per network, [`Claim`]s share it).
    pub device: String,
    /// The allocation's `shareID`, when the device is shared.
    #[serde(rename = "shareID", skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// The NPWG selection element the delegator attaches.
    pub element: Map<String, Value>,
    /// The request's KEP-5304 device metadata file, as the node sees it, when the driver
    /// writes one ([`crate::device_metadata`]): the delegator fills in the `networkData` of
    /// this device once it is attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
}

/// A claim prepared for a pod. Written with serde ([`write()`]); read by [`ClaimRecord::parse`]
/// (not a derived `Deserialize`: the delegator reads records on every ADD, and the derived
/// visitors of three structs were 8 KB of its 1.2 MB size budget).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimRecord {
    /// The claim.
    pub claim: Claim,
    /// Its networks, in the order the delegator attaches them.
    pub networks: Vec<Network>,
}

/// `o`'s keys are all of `keys` (those before `optional` required) and nothing else.
fn only(o: &Map<String, Value>, at: &str, keys: &[&str], optional: usize) -> Result<(), String> {
    if let Some(k) = o.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!("{at}: unknown key {k:?}"));
    }
    match keys[..optional].iter().find(|k| !o.contains_key(**k)) {
        Some(k) => Err(format!("{at}: no {k:?}")),
        None => Ok(()),
    }
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{at} must be an object"))
}

fn text(o: &Map<String, Value>, at: &str, key: &str) -> Result<String, String> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("{at}.{key} must be a string")),
    }
}

impl ClaimRecord {
    /// The record in `bytes`: exactly the keys of the module's JSON (an unknown one — a typo —
    /// is refused rather than dropped), each of its type; why not otherwise.
    pub fn parse(bytes: &[u8]) -> Result<ClaimRecord, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let o = object(&v, "the record")?;
        only(o, "the record", &["claim", "networks"], 2)?;
        let c = object(&o["claim"], "claim")?;
        only(c, "claim", &["namespace", "name", "uid"], 3)?;
        let claim = Claim {
            namespace: text(c, "claim", "namespace")?,
            name: text(c, "claim", "name")?,
            uid: text(c, "claim", "uid")?,
        };
        let list = o["networks"].as_array().ok_or("networks must be a list")?;
        let mut networks = Vec::with_capacity(list.len());
        for (i, n) in list.iter().enumerate() {
            let at = format!("networks[{i}]");
            let n = object(n, &at)?;
            only(n, &at, &["request", "driver", "pool", "device", "element", "shareID", "metadata"], 5)?;
            networks.push(Network {
                request: text(n, &at, "request")?,
                driver: text(n, &at, "driver")?,
                pool: text(n, &at, "pool")?,
                device: text(n, &at, "device")?,
                share_id: n.get("shareID").map(|_| text(n, &at, "shareID")).transpose()?,
                element: object(&n["element"], &format!("{at}.element"))?.clone(),
                metadata: n.get("metadata").map(|_| text(n, &at, "metadata")).transpose()?,
            });
        }
        Ok(ClaimRecord { claim, networks })
    }
}

/// Why a record could not be read, written or removed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A pod or claim UID that does not belong in a path.
    #[error("claim record: {what} {value:?} is not a UID (only 0-9, a-z, A-Z and '-', at most 64)")]
    BadUid {
        /// `pod UID` or `claim UID`.
        what: &'static str,
        /// The value.
        value: String,
    },
    /// The file system refused.
    #[error("claim record {}: {what}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file that is not a record.
    #[error("claim record {}: malformed: {why}", .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl Error {
    /// Whether trying again may help (the file system refused; a malformed record stays so).
    pub fn is_io(&self) -> bool {
        matches!(self, Error::Io { .. })
    }
}

/// Whether `s` may go into a path as a UID: 1 to 64 of `[0-9a-zA-Z-]`.
pub fn valid_uid(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn uid<'a>(what: &'static str, value: &'a str) -> Result<&'a str, Error> {
    if valid_uid(value) {
        Ok(value)
    } else {
        Err(Error::BadUid { what, value: value.to_string() })
    }
}

fn io<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io { path: path.to_path_buf(), what, source }
}

/// `<claims_dir>/<pod_uid>/<claim_uid>.json`.
pub fn path(claims_dir: &Path, pod_uid: &str, claim_uid: &str) -> Result<PathBuf, Error> {
    Ok(claims_dir.join(uid("pod UID", pod_uid)?).join(format!("{}.json", uid("claim UID", claim_uid)?)))
}

/// Every record of the pod, sorted by claim name (then UID); none when its directory does not
/// exist — one failed `open(2)` for a pod without claims. Only `<claimUID>.json` files count
/// (a [`write()`]'s temporary file is hidden and ends otherwise); a file that does not parse as a
/// record, or whose claim UID differs from its name, is an error naming it.
pub fn read_pod(claims_dir: &Path, pod_uid: &str) -> Result<Vec<ClaimRecord>, Error> {
    let dir = claims_dir.join(uid("pod UID", pod_uid)?);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&dir, "listing")(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io(&dir, "listing"))?;
        let name = entry.file_name();
        let Some(claim_uid) = name.to_str().and_then(|n| n.strip_suffix(".json")).filter(|u| valid_uid(u)) else {
            continue;
        };
        let path = entry.path();
        let bytes = files::read_regular(&path, MAX_RECORD, Links::Refuse).map_err(io(&path, "reading"))?;
        let record = ClaimRecord::parse(&bytes).map_err(|why| Error::Malformed { path: path.clone(), why })?;
        if record.claim.uid != claim_uid {
            return Err(Error::Malformed {
                path,
                why: format!("claim.uid {:?} is not the file's name", record.claim.uid),
            });
        }
        // In place by (name, UID): a pod has a handful of claims, and a sort's code is kilobytes
        // of the delegator's size budget.
        let at = out.iter().position(|r| order(r) > order(&record)).unwrap_or(out.len());
        out.insert(at, record);
    }
    Ok(out)
}

/// The order of a pod's records: by claim name, then UID.
fn order(r: &ClaimRecord) -> (&str, &str) {
    (&r.claim.name, &r.claim.uid)
}

/// Creates `dir` (0755) when it is missing, and makes its new entry in `parent` durable.
fn make_dir(dir: &Path, parent: &Path) -> Result<(), Error> {
    match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => sync_dir(parent),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(dir, "creating")(e)),
    }
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir, "fsync"))
}

/// Writes `record` as the pod's record of its claim, atomically and durably
/// ([`cni_runtime::files::replace`]: temporary file in the same directory, fsync, rename,
/// directory fsync), 0644; `claims_dir` and the pod's directory are created 0755 when missing
/// (their entries fsynced too).
pub fn write(claims_dir: &Path, pod_uid: &str, record: &ClaimRecord) -> Result<(), Error> {
    let target = path(claims_dir, pod_uid, &record.claim.uid)?;
    let pod_dir = claims_dir.join(pod_uid);
    if let Some(parent) = claims_dir.parent() {
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        std::fs::DirBuilder::new().recursive(true).mode(0o755).create(parent).map_err(io(parent, "creating"))?;
        make_dir(claims_dir, parent)?;
    }
    let mut bytes = serde_json::to_vec(record).unwrap_or_default();
    bytes.push(b'\n');
    // A pod directory left empty is removed by [`remove_claim`]: when that happened between
    // its creation and the file's, it is created again once.
    for last in [false, true] {
        make_dir(&pod_dir, claims_dir)?;
        match files::replace(&target, &bytes, 0o644) {
            Ok(()) => return Ok(()),
            Err(e) if !last && e.step == files::Step::Create && e.source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::Io { path: e.path, what: e.step.verb(), source: e.source }),
        }
    }
    Ok(())
}

/// Removes the claim's record from every pod's directory, and each pod directory it leaves
/// empty; the pods it was removed for. Absent everywhere is fine (Unprepare is idempotent).
pub fn remove_claim(claims_dir: &Path, claim_uid: &str) -> Result<Vec<String>, Error> {
    let file = format!("{}.json", uid("claim UID", claim_uid)?);
    let pods = match std::fs::read_dir(claims_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(claims_dir, "listing")(e)),
    };
    let mut removed = Vec::new();
    for pod in pods {
        let pod = pod.map_err(io(claims_dir, "listing"))?;
        let Some(pod_uid) = pod.file_name().to_str().filter(|u| valid_uid(u)).map(str::to_string) else {
            continue;
        };
        let dir = pod.path();
        let target = dir.join(&file);
        match std::fs::remove_file(&target) {
            Ok(()) => removed.push(pod_uid),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // A pod UID's name that is a file, not a directory: not a record.
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => continue,
            Err(e) => return Err(io(&target, "removing")(e)),
        }
        // Left empty: gone (not empty — another claim's record, a writer's — stays).
        match std::fs::remove_dir(&dir) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::DirectoryNotEmpty
                        | std::io::ErrorKind::AlreadyExists
                        | std::io::ErrorKind::NotFound
                ) => {}
            Err(e) => return Err(io(&dir, "removing")(e)),
        }
    }
    if !removed.is_empty() {
        sync_dir(claims_dir)?;
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    use crate::test_dir::Dir;

    fn claims_of(d: &Dir) -> PathBuf {
        d.0.join("var/claims")
    }

    fn record(name: &str, uid: &str) -> ClaimRecord {
        ClaimRecord {
            claim: Claim { namespace: "t".into(), name: name.into(), uid: uid.into() },
            networks: vec![Network {
                request: "net".into(),
                driver: "net.braid-cni.io".into(),
                pool: "node2".into(),
                device: "t-side-1a2b3c4d".into(),
                share_id: Some("5f0c".into()),
                element: json!({"name": "side", "interface": "net9"}).as_object().unwrap().clone(),
                metadata: None,
            }],
        }
    }

    #[test]
    fn the_design_documents_json_reads_and_writes_as_is() {
        let text = r#"{"claim":{"namespace":"t","name":"web-net-x7k2p","uid":"c-1"},"networks":[{"request":"net","driver":"net.braid-cni.io","pool":"node2","device":"t-side-1a2b3c4d","shareID":"s-1","element":{"name":"side","namespace":"t","interface":"net9","ips":["198.18.9.5/24"],"default-route":["198.18.9.1"],"cni-args":{"a":"b"}},"metadata":"/var/lib/kubelet/plugins/net.braid-cni.io/dra-device-metadata/t_web-net-x7k2p/net/metadata.json"},{"request":"other","driver":"net.braid-cni.io","pool":"node2","device":"d","element":{"name":"x"}}]}"#;
        let r = ClaimRecord::parse(text.as_bytes()).unwrap();
        assert_eq!(r.claim, Claim { namespace: "t".into(), name: "web-net-x7k2p".into(), uid: "c-1".into() });
        assert_eq!(r.networks[0].share_id.as_deref(), Some("s-1"));
        assert_eq!(r.networks[1].share_id, None);
        assert_eq!(
            r.networks[0].metadata.as_deref(),
            Some("/var/lib/kubelet/plugins/net.braid-cni.io/dra-device-metadata/t_web-net-x7k2p/net/metadata.json")
        );
        assert_eq!(r.networks[1].metadata, None);
        assert_eq!(r.networks[0].element["ips"], json!(["198.18.9.5/24"]));
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(text).unwrap(), "written back as read, no shareID where none");
        // A typo is not silently a record without the field; every key of its type.
        for (from, to, why) in [
            ("\"pool\"", "\"poll\"", "networks[0]: unknown key \"poll\""),
            ("\"uid\":\"c-1\"", "\"uid\":1", "claim.uid must be a string"),
            ("\"shareID\":\"s-1\"", "\"shareID\":null", "networks[0].shareID must be a string"),
            ("\"request\":\"other\",", "", "networks[1]: no \"request\""),
            (
                "\"metadata\":\"/var/lib/kubelet/plugins/net.braid-cni.io/dra-device-metadata/t_web-net-x7k2p/net/metadata.json\"",
                "\"metadata\":7",
                "networks[0].metadata must be a string",
            ),
            ("{\"name\":\"x\"}", "[]", "networks[1].element must be an object"),
        ] {
            let bad = text.replacen(from, to, 1);
            assert_ne!(bad, text);
            assert_eq!(ClaimRecord::parse(bad.as_bytes()).unwrap_err(), why, "{bad}");
        }
        assert!(ClaimRecord::parse(b"{").is_err());
        let claim = r#"{"namespace":"t","name":"b","uid":"c-2"}"#;
        let not_a_list = format!(r#"{{"claim":{claim},"networks":7}}"#);
        assert_eq!(ClaimRecord::parse(not_a_list.as_bytes()).unwrap_err(), "networks must be a list");
        assert_eq!(ClaimRecord::parse(b"[]").unwrap_err(), "the record must be an object");
        assert_eq!(
            ClaimRecord::parse(br#"{"claim":{"namespace":"t","name":"b","uid":"c-2"}}"#).unwrap_err(),
            "the record: no \"networks\""
        );
    }

    #[test]
    fn uids_are_checked_before_they_become_paths() {
        for ok in ["0b1c2d3e-aaaa-bbbb-cccc-0123456789ab", "a", &"x".repeat(64)] {
            assert!(valid_uid(ok), "{ok}");
        }
        for bad in ["", "..", ".", "a/b", "a.json", "a b", "ü", &"x".repeat(65)] {
            assert!(!valid_uid(bad), "{bad}");
            let e = path(Path::new("/c"), bad, "c").unwrap_err().to_string();
            assert!(e.contains("pod UID") && e.contains("is not a UID"), "{e}");
            assert!(path(Path::new("/c"), "p", bad).unwrap_err().to_string().contains("claim UID"));
            assert!(remove_claim(Path::new("/c"), bad).is_err());
            assert!(read_pod(Path::new("/c"), bad).is_err());
        }
        assert_eq!(path(Path::new("/c"), "p-1", "c-2").unwrap(), Path::new("/c/p-1/c-2.json"));
    }

    #[test]
    fn written_records_read_back_sorted_by_claim_name_with_their_modes() {
        let d = Dir::new("rw");
        let claims = claims_of(&d);
        assert_eq!(read_pod(&claims, "pod-1").unwrap(), Vec::new(), "no directory: no claims");
        for (name, uid) in [("zeta", "c-1"), ("alpha", "c-2"), ("mid", "c-3")] {
            write(&claims, "pod-1", &record(name, uid)).unwrap();
        }
        write(&claims, "pod-2", &record("other", "c-4")).unwrap();
        // Written again: replaced, not doubled.
        let mut again = record("mid", "c-3");
        again.networks[0].request = "net2".into();
        write(&claims, "pod-1", &again).unwrap();
        let got = read_pod(&claims, "pod-1").unwrap();
        let names: Vec<&str> = got.iter().map(|r| r.claim.name.as_str()).collect();
        assert_eq!(names, ["alpha", "mid", "zeta"]);
        assert_eq!(got[1], again);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&claims.join("pod-1/c-1.json")), 0o644);
        assert_eq!((mode(&claims), mode(&claims.join("pod-1"))), (0o755, 0o755));
        // No temporary file is left, and one a crashed writer left is not a record.
        let files: Vec<String> = std::fs::read_dir(claims.join("pod-1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files.len(), 3, "{files:?}");
        std::fs::write(claims.join("pod-1/.c-9.json.tmp77"), "{").unwrap();
        std::fs::write(claims.join("pod-1/notes.txt"), "x").unwrap();
        assert_eq!(read_pod(&claims, "pod-1").unwrap().len(), 3);
    }

    #[test]
    fn a_malformed_record_is_an_error_naming_its_file() {
        let d = Dir::new("bad");
        let claims = claims_of(&d);
        write(&claims, "pod-1", &record("a", "c-1")).unwrap();
        let bad = claims.join("pod-1/c-2.json");
        for body in ["{", r#"{"claim":{"namespace":"t","name":"b","uid":"c-2"}}"#, "[]"] {
            std::fs::write(&bad, body).unwrap();
            let e = read_pod(&claims, "pod-1").unwrap_err();
            assert!(!e.is_io());
            let e = e.to_string();
            assert!(e.starts_with(&format!("claim record {}: malformed: ", bad.display())), "{e}");
        }
        // The file's name is the claim's UID.
        let mut r = serde_json::to_value(record("b", "c-3")).unwrap();
        std::fs::write(&bad, r.to_string()).unwrap();
        let e = read_pod(&claims, "pod-1").unwrap_err().to_string();
        assert!(e.contains("claim.uid \"c-3\" is not the file's name"), "{e}");
        r["claim"]["uid"] = "c-2".into();
        std::fs::write(&bad, r.to_string()).unwrap();
        assert_eq!(read_pod(&claims, "pod-1").unwrap().len(), 2);
        // Not a regular file (a FIFO would hang a reader): refused, naming it.
        std::fs::remove_file(&bad).unwrap();
        std::os::unix::fs::symlink(claims.join("pod-1/c-1.json"), &bad).unwrap();
        let e = read_pod(&claims, "pod-1").unwrap_err();
        assert!(e.is_io() && e.to_string().contains(&bad.display().to_string()), "{e}");
    }

    #[test]
    fn removing_a_claim_removes_it_for_every_pod_and_the_pod_directories_it_empties() {
        let d = Dir::new("rm");
        let claims = claims_of(&d);
        assert_eq!(remove_claim(&claims, "c-1").unwrap(), Vec::<String>::new(), "no claims dir: nothing to do");
        write(&claims, "pod-1", &record("shared", "c-1")).unwrap();
        write(&claims, "pod-2", &record("shared", "c-1")).unwrap();
        write(&claims, "pod-2", &record("own", "c-2")).unwrap();
        write(&claims, "pod-3", &record("other", "c-3")).unwrap();
        std::fs::write(claims.join("stray"), "x").unwrap();
        assert_eq!(remove_claim(&claims, "c-1").unwrap(), ["pod-1", "pod-2"]);
        assert!(!claims.join("pod-1").exists(), "left empty: removed");
        let names =
            |pod: &str| -> Vec<String> { read_pod(&claims, pod).unwrap().into_iter().map(|r| r.claim.name).collect() };
        assert_eq!(names("pod-2"), ["own"]);
        assert_eq!(names("pod-3"), ["other"]);
        assert_eq!(remove_claim(&claims, "c-1").unwrap(), Vec::<String>::new(), "again: nothing, no error");
        // A pod whose directory went away gets it back on its next write.
        assert_eq!(remove_claim(&claims, "c-2").unwrap(), ["pod-2"]);
        write(&claims, "pod-2", &record("own", "c-2")).unwrap();
        assert_eq!(names("pod-2"), ["own"]);
    }
}
