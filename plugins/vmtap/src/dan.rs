//! Kata Containers' Directly Attachable Network (DAN) file: the same taps, described the way
//! Kata's runtime-rs reads them, so that Kata can attach the VM's NICs without scanning the
//! namespace.
//!
//! Format: `DanConfig` in kata-containers `src/runtime-rs/crates/resource/src/network/dan.rs`
//! (`netns`, `devices[]` of `{name, guest_mac, device: {type: "host-tap", tap_name, queue_num},
//! network_info: {interface: {ip_addresses, mtu}, routes: [{dest, gateway}]}}`); runtime-rs
//! reads `<[runtime] dan_conf>/<sandbox id>.json` (`dan_config_path`), and the sandbox ID is
//! the `CNI_CONTAINERID` the runtime gave the plugins.

use crate::error::VmtapError;
use crate::plan::Wire;
use crate::result::{routes_of, Made};
use cni_skel::cni_types::CniResult;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// `<dir>/<container id>.json`.
pub fn path(dir: &Path, container_id: &str) -> PathBuf {
    dir.join(format!("{container_id}.json"))
}

/// The document for the wires of `prev` (the result before vmtap's additions).
pub fn document(prev: &CniResult, wires: &[(Wire, Made)], netns: &str) -> Value {
    let devices: Vec<Value> = wires
        .iter()
        .enumerate()
        .map(|(k, (w, made))| {
            let addrs: Vec<String> = prev
                .ips
                .iter()
                .filter(|ip| ip.interface == Some(w.index as i64))
                .map(|ip| ip.address.to_string())
                .collect();
            let routes: Vec<Value> = routes_of(prev, w.index, k == 0)
                .iter()
                .map(|r| {
                    // runtime-rs: an empty `dest` is the default route.
                    let dest = if r.dst.is_default() { String::new() } else { r.dst.to_string() };
                    let gateway = r.gw.map(|g| g.to_string()).unwrap_or_default();
                    json!({"dest": dest, "gateway": gateway})
                })
                .collect();
            json!({
                "name": w.pod,
                "guest_mac": made.pod_mac,
                "device": {"type": "host-tap", "tap_name": w.tap, "queue_num": 1},
                "network_info": {
                    "interface": {"ip_addresses": addrs, "mtu": made.mtu},
                    "routes": routes,
                },
            })
        })
        .collect();
    json!({"netns": netns, "devices": devices})
}

/// Writes the file whole (temporary file, fsync, rename, fsync of `dir`), creating `dir` if
/// needed.
pub fn write(dir: &Path, container_id: &str, doc: &Value) -> Result<(), VmtapError> {
    let target = path(dir, container_id);
    let err = |op, source| VmtapError::Dan { op, path: target.display().to_string(), source };
    std::fs::create_dir_all(dir).map_err(|e| err("creating the directory of", e))?;
    let body = serde_json::to_vec_pretty(doc).unwrap_or_default();
    // The temporary name is fixed: DEL removes one a crashed ADD left.
    cni_runtime::files::replace_via(&target, &temp(dir, container_id), &body, 0o644)
        .map_err(|e| err("writing", e.source))
}

/// The temporary file [`write`] goes through.
fn temp(dir: &Path, container_id: &str) -> PathBuf {
    dir.join(format!(".{container_id}.json.tmp"))
}

/// Removes the file; a missing one is success.
pub fn remove(dir: &Path, container_id: &str) -> Result<(), VmtapError> {
    let target = path(dir, container_id);
    let _ = std::fs::remove_file(temp(dir, container_id));
    match std::fs::remove_file(&target) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(VmtapError::Dan { op: "removing", path: target.display().to_string(), source: e })
        }
        _ => Ok(()),
    }
}
