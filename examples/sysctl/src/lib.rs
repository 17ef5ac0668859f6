//! `sysctl`, an example chained plugin built on cni-skel: it sets `net.*` sysctls inside the
//! pod's network namespace on ADD, checks them on CHECK, and passes `prevResult` on. Its Go
//! counterpart is the sysctl part of containernetworking/plugins `plugins/meta/tuning`.
//!
//! ```json
//! {"type": "sysctl", "sysctls": {"net.ipv4.conf.IFNAME.arp_notify": "1"}}
//! ```
//! Keys use `.` or `/` as separators; `IFNAME` is replaced by `CNI_IFNAME`; only `net.*` keys
//! are accepted (`tuning.go`, `getSysctlFilename`), so nothing outside the namespace changes.

use cni_skel::cni_types::error::{INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_skel::netns;
use cni_skel::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// CHECK found a sysctl with another value than configured (plugin codes start at 100).
pub const MISMATCH: u32 = 110;

#[derive(serde::Deserialize)]
struct Conf {
    #[serde(default)]
    sysctls: BTreeMap<String, String>,
}

/// Each configured sysctl as (key, file under /proc/sys, value).
fn settings(args: &CmdArgs) -> Result<Vec<(String, PathBuf, String)>, CniError> {
    let conf: Conf = args.conf()?.plugin_config()?;
    let mut out = Vec::new();
    for (key, value) in conf.sysctls {
        let sep = if key.contains('/') { '/' } else { '.' };
        let parts: Vec<&str> = key.split(sep).map(|p| if p == "IFNAME" { args.ifname.as_str() } else { p }).collect();
        if parts[0] != "net" || parts.iter().any(|p| p.is_empty() || *p == "." || *p == ".." || p.contains('/')) {
            let msg = format!("sysctls: {key:?} is not a net.* sysctl");
            return Err(CniError::new(INVALID_NETWORK_CONFIG, msg));
        }
        out.push((key.clone(), Path::new("/proc/sys").join(parts.join("/")), value));
    }
    Ok(out)
}

/// The plugin.
pub struct Sysctl;

impl Plugin for Sysctl {
    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        let prev = args.conf()?.require_prev_result()?;
        let wanted = settings(args)?;
        if wanted.is_empty() {
            return Ok(prev);
        }
        netns::run_in(Path::new(&args.netns), || {
            wanted.iter().try_for_each(|(key, file, value)| {
                std::fs::write(file, value).map_err(|e| CniError::new(IO_FAILURE, format!("sysctl {key}: {e}")))
            })
        })??;
        Ok(prev)
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        args.conf()?.require_prev_result()?;
        let wanted = settings(args)?;
        let differ: Vec<String> = netns::run_in(Path::new(&args.netns), || {
            let read = |f: &PathBuf| std::fs::read_to_string(f).map(|s| s.trim().to_string());
            let wrong = |(key, file, value): &(String, PathBuf, String)| match read(file) {
                Ok(got) if got == value.trim() => None,
                Ok(got) => Some(format!("{key} is {got}, expected {value}")),
                Err(e) => Some(format!("{key}: {e}")),
            };
            wanted.iter().filter_map(wrong).collect()
        })?;
        if differ.is_empty() {
            return Ok(());
        }
        let msg = format!("{} sysctl(s) differ in {}", differ.len(), args.netns);
        Err(CniError::with_details(MISMATCH, msg, differ.join("; ")))
    }

    /// `net.*` sysctls live and die with the namespace and its interfaces: nothing to undo.
    fn del(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }
}
