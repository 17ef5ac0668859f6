//! The node's DRA devices record: the devices the ResourceSlices of this node publish (every
//! driver's), each with the two attributes Multus reads from them (multus-cni v4.3.1
//! `pkg/draclient/draclient.go`: `k8s.cni.cncf.io/resourceName`, `k8s.cni.cncf.io/deviceID`)
//! when it carries them — so that an ADD can hand a DRA-allocated device's ID to a network
//! whose NAD names that resource without asking the API server. The node agent
//! (`--kubernetes-api`) keeps it from one watch of the node's ResourceSlices; the delegator's
//! helper (`braid-podresources`) reads it for the devices the kubelet's PodResources `Get`
//! lists for the pod, by (driver, pool, device).
//!
//! ```text
//! /var/lib/braid/dra-devices/devices.json
//! ```
//!
//! ```json
//! {"node": "node1",
//!  "devices": {"gpu.example.com": {"node1": {"gpu-0": {}}},
//!              "sriov.example.com": {"node1": {"vf-1": {"resourceName": "braid.test/dravf",
//!                                                        "deviceID": "0000:00:1e.1"}}}}}
//! ```
//!
//! Every device of the node's slices is listed, with or without the attributes: a device of
//! the pod that is not listed is one the agent has not seen (yet), a different answer from one
//! that is listed without them (a GPU: skipped, as Multus skips it). Only the newest generation
//! of each pool counts (older slices of a pool are being replaced: the scheduler ignores them
//! too). On disk, durably (temporary file, fsync, rename, directory fsync), mode 0644: after a
//! reboot the kubelet may start pods before the agent has listed again.
//!
//! One type, here below both its users.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The default file (the agent's `--dra-devices-file`, the delegator's
/// `kubernetes.draDevicesFile`).
pub const DEFAULT_FILE: &str = "/var/lib/braid/dra-devices/devices.json";

/// The attribute naming the resource a device is for (Multus's `multusResourceNameAttr`): it
/// must equal the NAD's `k8s.v1.cni.cncf.io/resourceName`.
pub const RESOURCE_NAME_ATTR: &str = "k8s.cni.cncf.io/resourceName";

/// The attribute holding the device's ID (Multus's `multusDeviceIDAttr`), e.g. a PCI address.
pub const DEVICE_ID_ATTR: &str = "k8s.cni.cncf.io/deviceID";

/// The cap on the file read: far above any node's devices.
pub const MAX_FILE: u64 = 16 << 20;

/// What a device carries of Multus's two attributes (string values only, as Multus reads them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// `k8s.cni.cncf.io/resourceName`.
    #[serde(rename = "resourceName", default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    /// `k8s.cni.cncf.io/deviceID`.
    #[serde(rename = "deviceID", default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

impl Device {
    /// The (resource, ID) Multus maps this device to: both attributes set and not empty.
    pub fn multus(&self) -> Option<(&str, &str)> {
        match (self.resource_name.as_deref(), self.device_id.as_deref()) {
            (Some(r), Some(id)) if !r.is_empty() && !id.is_empty() => Some((r, id)),
            _ => None,
        }
    }
}

/// Driver → pool → device name → its attributes.
pub type Devices = BTreeMap<String, BTreeMap<String, BTreeMap<String, Device>>>;

/// The record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDevices {
    /// The node whose slices these are.
    pub node: String,
    /// Its devices.
    pub devices: Devices,
}

impl NodeDevices {
    /// The device `driver`/`pool`/`device`; `None` when the node's slices (as last seen) have no
    /// such device.
    pub fn get(&self, driver: &str, pool: &str, device: &str) -> Option<&Device> {
        self.devices.get(driver)?.get(pool)?.get(device)
    }

    /// The record in `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<NodeDevices, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// The record at `path` (a regular file, no symlink followed, at most [`MAX_FILE`]).
    pub fn read(path: &Path) -> Result<NodeDevices, String> {
        let bytes = cni_runtime::files::read_regular(path, MAX_FILE, cni_runtime::files::Links::Refuse)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        NodeDevices::parse(&bytes).map_err(|e| format!("{}: malformed: {e}", path.display()))
    }

    /// Writes the record to `path` durably and atomically (its directory created, 0755).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let mut bytes = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        cni_runtime::files::replace(path, &bytes, 0o644).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn written_and_read_back_and_multus_needs_both_attributes() {
        let dir = std::env::temp_dir().join(format!("braid-dra-devices-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub/dra-devices.json");
        let mut r = NodeDevices { node: "n1".into(), devices: Devices::new() };
        let vf = Device { resource_name: Some("braid.test/dravf".into()), device_id: Some("0000:00:1e.1".into()) };
        let pool = r.devices.entry("sriov.example".into()).or_default().entry("n1".into()).or_default();
        pool.insert("vf-1".into(), vf.clone());
        pool.insert("vf-2".into(), Device { resource_name: Some("x/y".into()), device_id: Some(String::new()) });
        r.devices
            .entry("gpu.example".into())
            .or_default()
            .entry("n1".into())
            .or_default()
            .insert("g".into(), Device::default());
        r.write(&path).unwrap();
        let back = NodeDevices::read(&path).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            back.get("sriov.example", "n1", "vf-1").and_then(Device::multus),
            Some(("braid.test/dravf", "0000:00:1e.1"))
        );
        assert_eq!(back.get("sriov.example", "n1", "vf-2").and_then(Device::multus), None, "an empty deviceID");
        assert_eq!(back.get("gpu.example", "n1", "g").map(Device::multus), Some(None), "listed, no attributes");
        assert_eq!(back.get("gpu.example", "n2", "g"), None, "not listed");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""g":{}"#), "{text}");
        assert!(NodeDevices::read(&dir.join("absent")).unwrap_err().contains("absent"));
        std::fs::write(&path, br#"{"node":"n1","devices":{},"extra":1}"#).unwrap();
        assert!(NodeDevices::read(&path).unwrap_err().contains("malformed"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
