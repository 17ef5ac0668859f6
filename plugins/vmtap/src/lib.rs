//! `vmtap`, a chained CNI plugin that hands every pod interface of `prevResult` to a VM: for
//! each, a tap in the pod namespace joined to it by two tc `mirred` redirects, and a result in
//! awslabs' tc-redirect-tap convention extended to every interface (see [`result`]). Placed
//! after braid's delegator (merged result), its merger, or any main plugin.
//!
//! Built the way an outside plugin author would: on `cni-skel` (dispatch, namespace entry,
//! keys, testing kit) and `cni-netlink` (blocking rtnetlink) — and, for its DEL alone,
//! `braid-attach`'s pod-namespace lock ([`pod_lock`]). See README.md for every key.

pub mod config;
pub mod dan;
pub mod error;
pub mod mark;
pub mod plan;
pub mod pod_lock;
pub mod result;
pub mod tap;
pub mod wire;

use crate::config::Keys;
use crate::error::VmtapError;
use crate::wire::Attachment;
use cni_skel::cni_types::result::vm_pairs;
use cni_skel::netns;
use cni_skel::prelude::*;
use std::path::Path;

/// The plugin.
pub struct Vmtap;

fn keys(args: &CmdArgs) -> Result<Keys, CniError> {
    let keys: Keys = args.conf()?.plugin_config()?;
    keys.validate()?;
    Ok(keys)
}

impl Plugin for Vmtap {
    /// From 0.3.0: earlier results have no `interfaces`, so there is nothing to pair.
    fn supported_versions(&self) -> Vec<String> {
        ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"].iter().map(|s| s.to_string()).collect()
    }

    fn about(&self) -> Option<String> {
        Some("vmtap: hands every pod interface of prevResult to a VM as a tap joined by tc redirects".to_string())
    }

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        let conf = args.conf()?;
        let keys = keys(args)?;
        let prev = conf.require_prev_result()?;
        let sel = plan::select(&prev, &keys, &netns::sandbox_matcher(&args.netns))?;
        let att = Attachment { container: &args.container_id, ifname: &args.ifname };
        let wired = netns::run_in(Path::new(&args.netns), || wire::add(&sel, &keys, att, &args.netns))??;
        if let Some(dir) = &keys.dan_dir {
            let doc = dan::document(&prev, &wired, &args.netns);
            if let Err(e) = dan::write(dir, &args.container_id, &doc) {
                // What this ADD made goes; the taps an earlier ADD made and this one kept stay
                // (the DAN file is replaced whole or not at all: the old one is still there).
                let new: Vec<&str> = wired.iter().filter(|(w, _)| !w.kept).map(|(w, _)| w.tap.as_str()).collect();
                let _ = netns::run_in(Path::new(&args.netns), || -> Result<(), VmtapError> {
                    wire::roll_back(&mut cni_netlink::Rtnl::open()?, att, &new)
                });
                return Err(e.into());
            }
        }
        Ok(result::extend(prev, &wired, &args.netns, &args.container_id))
    }

    /// Removes every tap vmtap made for this attachment (found by their mark, with or without
    /// `prevResult`), the filters that point at them and the ingress qdiscs vmtap added, and the
    /// DAN file. A namespace that is gone is success: its taps went with it.
    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        let keys = keys(args)?;
        // Held until the taps and the file are gone: an update running vmtap's ADD finishes first.
        let _lock = pod_lock::take(&args.netns)?;
        if let Some(dir) = &keys.dan_dir {
            dan::remove(dir, &args.container_id)?;
        }
        if args.netns.is_empty() {
            return Ok(());
        }
        let att = Attachment { container: &args.container_id, ifname: &args.ifname };
        match netns::run_in(Path::new(&args.netns), || -> Result<Vec<String>, VmtapError> {
            wire::teardown(&mut cni_netlink::Rtnl::open()?, att)
        }) {
            Ok(done) => done.map(|_| ()).map_err(CniError::from),
            Err(e) if e.is_missing() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Every tap/VM-interface pair of `prevResult` exists as the result says (see
    /// [`wire::inspect`]); with `danDir`, the DAN file exists.
    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        let conf = args.conf()?;
        let keys = keys(args)?;
        let prev = conf.require_prev_result()?;
        let pairs = vm_pairs(&prev, &netns::sandbox_matcher(&args.netns));
        let att = Attachment { container: &args.container_id, ifname: &args.ifname };
        let mut problems = if pairs.is_empty() {
            vec![format!("prevResult has no tap/VM interface pair for container {}", args.container_id)]
        } else {
            netns::run_in(Path::new(&args.netns), || wire::inspect(&pairs, att))??
        };
        if let Some(dir) = &keys.dan_dir {
            let file = dan::path(dir, &args.container_id);
            if !file.is_file() {
                problems.push(format!("Kata DAN file {} is missing", file.display()));
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(VmtapError::Mismatch { netns: args.netns.clone(), problems }.into())
    }
}
