//! vmtap's own keys, checked before anything is touched.

use cni_skel::cni_types::error::INVALID_NETWORK_CONFIG;
use cni_skel::cni_types::{validate, CniError};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The keys of a vmtap configuration (all optional).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Keys {
    /// Only these pod interfaces (by name) get a tap; default: every interface of `prevResult`
    /// in the pod namespace.
    #[serde(default)]
    pub interfaces: Option<Vec<String>>,
    /// Tap names by pod interface name; the others are `tap0`, `tap1`, … in result order.
    #[serde(default)]
    pub tap_names: BTreeMap<String, String>,
    /// Owner of the taps, for a VMM that runs unprivileged.
    #[serde(default)]
    pub owner: Option<Owner>,
    /// Where to write Kata Containers' Directly Attachable Network file.
    #[serde(default)]
    pub dan_dir: Option<PathBuf>,
}

/// `owner`: who may open the taps (`TUNSETOWNER`, `TUNSETGROUP`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// The user id.
    #[serde(default)]
    pub uid: Option<u32>,
    /// The group id.
    #[serde(default)]
    pub gid: Option<u32>,
}

impl Keys {
    /// Checks what can be checked without `prevResult`: tap names are interface names, unique.
    pub fn validate(&self) -> Result<(), CniError> {
        let mut seen = BTreeMap::new();
        for (pod, tap) in &self.tap_names {
            validate::interface_name(tap).map_err(|e| invalid(format!("tapNames.{pod}: {:?}: {}", tap, e.msg)))?;
            if tap.contains('%') {
                // The tun driver reads `%d` as a template (`tap%d`: the first free `tap<N>`).
                let msg = format!("tapNames.{pod}: {tap:?}: a tap name with % is a kernel name template, not a name");
                return Err(invalid(msg));
            }
            if let Some(other) = seen.insert(tap.as_str(), pod.as_str()) {
                return Err(invalid(format!("tapNames: {other} and {pod} both name the tap {tap:?}")));
            }
        }
        if let Some(list) = &self.interfaces {
            if list.is_empty() {
                return Err(invalid("interfaces: the list is empty; leave the key out to redirect every interface"));
            }
        }
        if let Some(dir) = &self.dan_dir {
            if !dir.is_absolute() {
                return Err(invalid(format!("danDir: {:?} is not an absolute path", dir.display().to_string())));
            }
        }
        Ok(())
    }
}

/// Code 7 with the message as given.
pub fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: serde_json::Value) -> Keys {
        serde_json::from_value(v).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn a_tap_name_must_be_an_interface_name_and_unique() {
        let k = keys(serde_json::json!({"tapNames": {"eth0": "a/b"}}));
        assert!(k.validate().unwrap_err().msg.starts_with("tapNames.eth0: \"a/b\": interface name contains"));
        let k = keys(serde_json::json!({"tapNames": {"eth0": "t", "net1": "t"}}));
        assert_eq!(k.validate().unwrap_err().msg, "tapNames: eth0 and net1 both name the tap \"t\"");
        let k = keys(serde_json::json!({"tapNames": {"eth0": "averyveryverylongname"}}));
        assert_eq!(k.validate().unwrap_err().code, 7);
        let k = keys(serde_json::json!({"tapNames": {"eth0": "tap%d"}}));
        assert_eq!(
            k.validate().unwrap_err().msg,
            "tapNames.eth0: \"tap%d\": a tap name with % is a kernel name template, not a name"
        );
    }

    #[test]
    fn an_empty_interface_list_and_a_relative_dan_dir_are_refused() {
        assert_eq!(keys(serde_json::json!({"interfaces": []})).validate().unwrap_err().code, 7);
        let e = keys(serde_json::json!({"danDir": "dans"})).validate().unwrap_err();
        assert_eq!(e.msg, "danDir: \"dans\" is not an absolute path");
        assert!(keys(serde_json::json!({"danDir": "/run/kata-containers/dans"})).validate().is_ok());
    }
}
