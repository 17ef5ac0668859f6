//! `delegator update`: the networks of a running pod brought to what its
//! `k8s.v1.cni.cncf.io/networks` annotation now asks — the node agent's network hot-plug
//! (`braid-install --hotplug`). CNI has no command for it, so it is a mode of the binary of its
//! own, never reached by a runtime: the first argument `update`, then the environment and
//! stdin of the sandbox's ADD (`CNI_COMMAND=ADD`, its `CNI_CONTAINERID`, `CNI_NETNS`,
//! `CNI_IFNAME`, `CNI_ARGS`, `CNI_PATH`; the delegator's configuration with the pod's current
//! annotations in `runtimeConfig["io.kubernetes.cri.pod-annotations"]`). The selection is made
//! exactly as ADD makes it (the same refusals), then the engine attaches and detaches only
//! the difference ([`braid_attach::update`]); the output is what ADD would print now, and the
//! network-status file is written anew (the agent publishes it).
//!
//! `--root DIR` first makes `DIR` the root (`chroot(2)`): the agent runs in a container with
//! the node's filesystem mounted at `/host`, and every path of the configuration, the state and
//! the delegates is the node's — the update then runs exactly as the runtime's ADD ran.

use crate::config::{result_mode, RULES};
use crate::kubernetes::{self, status, Pod, StatusNetwork};
use crate::plugin::{finish, Report};
use braid_attach::{MetaCommand, SharedConfig};
use cni_skel::prelude::*;
use cni_types::error::INVALID_NETWORK_CONFIG;
use std::ffi::OsString;

/// The update, as a [`Plugin`] whose ADD is the update (dispatched by `cni-skel` like any
/// command: the same environment checks, version gate and error output).
pub struct Updater;

/// Runs `delegator update [--root DIR]`; the exit code.
pub fn main(args: impl Iterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.collect();
    let root = match args.as_slice() {
        [] => None,
        [flag, dir] if flag == "--root" => Some(dir.clone()),
        _ => {
            let e = CniError::new(
                INVALID_NETWORK_CONFIG,
                format!("usage: delegator update [--root DIR] (got {args:?}); the rest comes from the CNI environment of an ADD"),
            );
            println!("{}", e.to_json_pretty());
            return 1;
        }
    };
    if let Some(dir) = root {
        if let Err(e) = std::os::unix::fs::chroot(&dir).and_then(|()| std::env::set_current_dir("/")) {
            let e = CniError::new(
                cni_types::error::IO_FAILURE,
                format!("update: cannot make {} the root: {e}", std::path::Path::new(&dir).display()),
            );
            println!("{}", e.to_json_pretty());
            return 1;
        }
    }
    cni_skel::main(&Updater)
}

fn only_add() -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, "delegator update runs with CNI_COMMAND=ADD (the sandbox's ADD environment)")
}

impl Plugin for Updater {
    fn about(&self) -> Option<String> {
        Some("braid delegator update: a running pod's networks brought to its annotation".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        Ok(self.add_in_family(args)?.to_latest())
    }

    fn add_in_family(&self, args: &CmdArgs) -> Result<AnyResult, CniError> {
        let config = SharedConfig::parse(args, &RULES)?;
        let kube = kubernetes::Config::parse(&config.conf)?.ok_or_else(|| {
            CniError::new(INVALID_NETWORK_CONFIG, "update: no kubernetes block, so no networks selected by a pod to update")
        })?;
        let selection = kubernetes::select(&kube, &config.conf, &args.args, &config.delegates)?;
        let mut all = config.delegates.clone();
        all.extend(selection.delegates.iter().cloned());
        braid_attach::delegates::validate(&all)?;
        let pod = Pod::from_args(&args.args);
        let path = status::path(&kube.status_dir, &pod, &args.container_id);
        let mut m = MetaCommand::new(config, args, &RULES)?;
        let updated = m.update(selection.delegates)?;
        let networks: Vec<StatusNetwork> = updated
            .attachments
            .iter()
            .enumerate()
            .map(|(i, a)| match &a.selector {
                Some(s) => kubernetes::status_network(s),
                None => StatusNetwork { name: a.name.clone(), default: i == 0, default_route: None },
            })
            .collect();
        // Carried out only when all of it was: otherwise the file keeps the request it carries
        // out, and the agent knows this one failed.
        let requested = match &updated.failure {
            None => selection.requested,
            Some(_) => path.as_deref().and_then(status::requested),
        };
        let mode = result_mode(&m.config.conf, updated.attachments.len())?;
        let report = Report { mode, networks, status: path, pod_uid: pod.uid, requested };
        let ifnames: Vec<String> = updated.attachments.iter().map(|a| a.ifname.clone()).collect();
        let result = finish(&mut m, args, &report, &updated.results, &ifnames, &updated.added);
        match updated.failure {
            Some(e) => Err(e),
            None => result,
        }
    }

    fn del(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Err(only_add())
    }

    fn check(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Err(only_add())
    }

    fn gc(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Err(only_add())
    }

    fn status(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Err(only_add())
    }
}
