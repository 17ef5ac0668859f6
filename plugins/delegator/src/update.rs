//! `delegator update`: the networks of a running pod brought to what its
//! `k8s.v1.cni.cncf.io/networks` annotation now asks — the node agent's network hot-plug
//! (`braid-install --hotplug`). CNI has no command for it, so it is a mode of the binary of its
//! own, never reached by a runtime (runtimes pass no arguments):
//!
//! ```text
//! delegator update [--root DIR] --conflist FILE
//! ```
//!
//! with the environment of the sandbox's ADD (`CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`,
//! `CNI_ARGS`, `CNI_PATH`) and on stdin the runtime arguments to offer (a JSON object, as
//! libcni's `CapabilityArgs`: `{"io.kubernetes.cri.pod-annotations": {…the pod's annotations
//! now…}}`). `FILE` is the conflist the runtime ran for the sandbox (braid's
//! `00-braid.conflist`); its first plugin must be the delegator. Like libcni's ADD of that
//! list, with one difference: the delegator's turn is the update — the selection made exactly
//! as ADD makes it (the same refusals), then only the difference attached and detached
//! ([`braid_attach::update`]), the network-status file written anew; every later plugin of the
//! list (vmtap, to give a VM the new interface) then gets an ADD with the chain's result so far
//! as `prevResult`. The output is the list's result, as a runtime's ADD would print it.
//!
//! `--root DIR` first makes `DIR` the root (`chroot(2)`): the agent runs in a container with
//! the node's filesystem mounted at `/host`, and every path — the conflist, the configuration's,
//! the state's, the delegates' and the pod namespace's — is then the node's, as for the runtime.

use crate::config::{result_mode, RULES};
use crate::kubernetes::{self, status, Pod, StatusNetwork};
use crate::plugin::{finish, Report};
use braid_attach::{MetaCommand, SharedConfig};
use cni_runtime::chain::{build_one_config, RuntimeConf};
use cni_runtime::invoke::{self, Exec, RawExec};
use cni_skel::prelude::*;
use cni_types::error::{DECODING_FAILURE, INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_types::version::Command;
use serde_json::{Map, Value};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

/// The delegator's turn, as a [`Plugin`] whose ADD is the update (dispatched by `cni-skel`
/// like any command: the same environment checks, version gate and error output).
pub struct Updater;

/// Runs `delegator update …`; the exit code.
pub fn main(args: impl Iterator<Item = OsString>) -> i32 {
    let (bytes, code) = match run(args.collect()) {
        Ok(result) => (result, 0),
        Err(e) => (e.to_json_pretty().into_bytes(), 1),
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(&bytes).and_then(|()| out.flush());
    code
}

fn run(args: Vec<OsString>) -> Result<Vec<u8>, CniError> {
    let (mut root, mut conflist) = (None, None);
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match (a.to_str(), it.next()) {
            (Some("--root"), Some(v)) => root = Some(PathBuf::from(v)),
            (Some("--conflist"), Some(v)) => conflist = Some(PathBuf::from(v)),
            _ => {
                return Err(CniError::new(
                    INVALID_NETWORK_CONFIG,
                    format!("usage: delegator update [--root DIR] --conflist FILE (got {a:?})"),
                ))
            }
        }
    }
    let conflist = conflist
        .ok_or_else(|| CniError::new(INVALID_NETWORK_CONFIG, "usage: delegator update [--root DIR] --conflist FILE"))?;
    let mut caps = Vec::new();
    std::io::stdin()
        .take(1 << 20)
        .read_to_end(&mut caps)
        .map_err(|e| CniError::new(IO_FAILURE, format!("stdin: {e}")))?;
    let caps: Map<String, Value> = serde_json::from_slice(&caps).map_err(|e| {
        CniError::new(DECODING_FAILURE, format!("stdin must be the runtime arguments, a JSON object: {e}"))
    })?;
    if let Some(dir) = &root {
        std::os::unix::fs::chroot(dir)
            .and_then(|()| std::env::set_current_dir("/"))
            .map_err(|e| CniError::new(IO_FAILURE, format!("cannot make {} the root: {e}", dir.display())))?;
    }
    let list = cni_runtime::chain::load_list(&conflist)
        .map_err(|e| CniError::new(INVALID_NETWORK_CONFIG, format!("{}: {e}", conflist.display())))?;
    let first = list.plugins.first().filter(|p| p.plugin_type() == "delegator").ok_or_else(|| {
        CniError::new(INVALID_NETWORK_CONFIG, format!("{}: its first plugin is not the delegator", conflist.display()))
    })?;
    // The delegator's turn, through the dispatcher as a runtime's ADD would reach it.
    let stdin = build_one_config(first, &list.name, &list.cni_version, None, &caps);
    let mut env = AddEnv { stdin: std::io::Cursor::new(stdin), out: Vec::new(), err: std::io::stderr() };
    let code = cni_skel::dispatch::run(&Updater, &mut env);
    let mut prev = match code {
        0 => AnyResult::from_bytes(&env.out)
            .map_err(|e| CniError::new(DECODING_FAILURE, format!("the update's result: {e}")))?,
        _ => {
            return Err(serde_json::from_slice::<CniError>(&env.out)
                .unwrap_or_else(|_| CniError::new(cni_types::error::INTERNAL, String::from_utf8_lossy(&env.out))))
        }
    };
    // Every later plugin: an ADD with the result so far, as libcni chains them.
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let inv = cni_types::Invocation {
        container_id: var("CNI_CONTAINERID"),
        netns: var("CNI_NETNS"),
        ifname: var("CNI_IFNAME"),
        args: var("CNI_ARGS"),
        path: var("CNI_PATH"),
        ..cni_types::Invocation::new(Command::Add)
    };
    let call = RuntimeConf::from_invocation(&inv, caps.clone());
    let exec = RawExec::default();
    let paths: Vec<PathBuf> = std::env::split_paths(&std::env::var_os("CNI_PATH").unwrap_or_default()).collect();
    for plugin in &list.plugins[1..] {
        let stdin = build_one_config(plugin, &list.name, &list.cni_version, Some(&prev), &caps);
        let path = exec.find(plugin.plugin_type(), &paths)?;
        let req = call.invocation(Command::Add, &cni_types::invocation::join_path(&paths));
        prev = invoke::add(&exec, &path, &stdin, &req).map_err(|e| {
            let e: CniError = e.into();
            CniError::new(
                e.code,
                format!("after the update, plugin {:?} of {}: {}", plugin.plugin_type(), list.name, e.msg),
            )
        })?;
    }
    Ok(prev.to_json_pretty().into_bytes())
}

/// The environment of the delegator's turn: the process's variables with `CNI_COMMAND=ADD`,
/// its configuration as stdin, its output kept.
struct AddEnv {
    stdin: std::io::Cursor<Vec<u8>>,
    out: Vec<u8>,
    err: std::io::Stderr,
}

impl cni_skel::env::Environment for AddEnv {
    fn getenv(&self, key: &str) -> Option<String> {
        match key {
            "CNI_COMMAND" => Some("ADD".into()),
            _ => std::env::var(key).ok(),
        }
    }
    fn stdin(&mut self) -> &mut dyn Read {
        &mut self.stdin
    }
    fn stdout(&mut self) -> &mut dyn Write {
        &mut self.out
    }
    fn stderr(&mut self) -> &mut dyn Write {
        &mut self.err
    }
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
            CniError::new(
                INVALID_NETWORK_CONFIG,
                "update: no kubernetes block, so no networks selected by a pod to update",
            )
        })?;
        let selection = kubernetes::select(&kube, &config.conf, &args.args, &config.delegates)?;
        let mut all = config.delegates.clone();
        all.extend(selection.delegates.iter().cloned());
        braid_attach::delegates::validate(&all)?;
        let pod = Pod::from_args(&args.args);
        let path = status::path(&kube.status_dir, &pod, &args.container_id);
        let mut m = MetaCommand::new(config, args, &RULES)?;
        // Its log lines say UPDATE, not the ADD its environment carries.
        m.log = cni_skel::log::Logger::new(RULES.plugin, "UPDATE", &args.container_id);
        m.log.configure(&m.config.conf);
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
