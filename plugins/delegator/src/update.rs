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
//! ([`braid_attach::update`]); every later plugin of the list (vmtap, to give a VM the new
//! interface) then gets an ADD with the chain's result so far as `prevResult`; then the
//! network-status file is written anew. The output is the list's result, as a runtime's ADD
//! would print it.
//!
//! **It converges.** All of it — the delegates' ADDs and DELs, the default routes, the later
//! plugins, the status file — runs under the sandbox's locks (the pod namespace's and the
//! container's, [`braid_attach::update::Held`]), so a DEL of the sandbox comes before or after
//! it, never in the middle, and leaves no file behind. A step that fails after the added
//! delegates' ADD (the `default-route` step, a later plugin) rolls the added attachments back
//! as a failed ADD does. The file records what is attached: when the sandbox carries out the
//! annotation, `networks` is the annotation; when an update failed part-way (a removal done, an
//! addition failed), the file says `unsettled` instead, and the node agent tries again (with
//! backoff) whatever the annotation then says — a user who reverts a failed edit gets back what
//! the removal took. When the network that took the default route (`default-route`) is removed
//! or changed, the routes it replaced are put back on the interfaces still there
//! ([`kubernetes::default_route::restore`]).
//!
//! `--root DIR` first makes `DIR` the root (`chroot(2)`): the agent runs in a container with
//! the node's filesystem mounted at `/host`, and every path — the conflist, the configuration's,
//! the state's, the delegates' and the pod namespace's — is then the node's, as for the runtime.

use crate::config::{result_mode, RULES};
use crate::kubernetes::default_route;
use crate::kubernetes::{self, status, Pod, StatusNetwork};
use crate::plugin::{finish_result, write_status, Report};
use braid_attach::update::Updated;
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
/// like any command: the same environment checks, version gate and error output), and the
/// rest of the list (`list`'s later plugins, with the runtime arguments `caps`).
pub struct Updater {
    list: Option<cni_types::NetConfList>,
    caps: Map<String, Value>,
}

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
    // The delegator's turn, through the dispatcher as a runtime's ADD would reach it; the rest
    // of the list runs inside it, under the sandbox's locks.
    let stdin = build_one_config(first, &list.name, &list.cni_version, None, &caps);
    let mut env = AddEnv { stdin: std::io::Cursor::new(stdin), out: Vec::new(), err: std::io::stderr() };
    let updater = Updater { list: Some(list.clone()), caps };
    match cni_skel::dispatch::run(&updater, &mut env) {
        0 => Ok(env.out),
        _ => Err(serde_json::from_slice::<CniError>(&env.out)
            .unwrap_or_else(|_| CniError::new(cni_types::error::INTERNAL, String::from_utf8_lossy(&env.out)))),
    }
}

impl Updater {
    /// Every later plugin of the list: an ADD with the result so far, as libcni chains them.
    fn rest_of_chain(&self, args: &CmdArgs, mut prev: AnyResult) -> Result<AnyResult, CniError> {
        let Some(list) = &self.list else { return Ok(prev) };
        let call = RuntimeConf::from_invocation(&args.invocation, self.caps.clone());
        let exec = RawExec::default();
        let paths = args.path_list();
        for plugin in &list.plugins[1..] {
            let stdin = build_one_config(plugin, &list.name, &list.cni_version, Some(&prev), &self.caps);
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
        Ok(prev)
    }
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
        // The claims' networks by selector: the status file's `claims` of what the update leaves.
        let claims: Vec<(String, kubernetes::claims::ClaimNetwork)> = selection
            .delegates
            .iter()
            .zip(&selection.networks)
            .filter_map(|(d, n)| Some((d.selector.clone()?, n.claim.clone()?)))
            .collect();
        let mut all = config.delegates.clone();
        all.extend(selection.delegates.iter().cloned());
        braid_attach::delegates::validate(&all)?;
        let pod = Pod::from_args(&args.args);
        let path = status::path(&kube.status_dir, &pod, &args.container_id);
        let before = path.as_deref().map(status::recorded).unwrap_or_default();
        let mut m = MetaCommand::new(config, args, &RULES)?;
        // Its log lines say UPDATE, not the ADD its environment carries.
        m.log = cni_skel::log::Logger::new(RULES.plugin, "UPDATE", &args.container_id);
        m.log.configure(&m.config.conf);
        // From here until `held` is dropped, the sandbox's locks are held.
        let mut held = m.update(selection.delegates)?;
        let failure = held.updated.failure.take();
        let mut replaced = restore_default_routes(&mut m, args, &held.updated, before.replaced.clone());
        let requested = selection.requested;
        let mut report = Report {
            mode: result_mode(&m.config.conf, held.updated.attachments.len())?,
            networks: status_networks(&held.updated, before.default_network.as_deref(), &claims),
            status: None,
            pod_uid: pod.uid,
            requested: requested.clone(),
            replaced: replaced.clone(),
            // The primary ADD attached stays, as ADD named it: an update never swaps it.
            default_network: before.default_network.clone(),
        };
        let done = match failure {
            Some(e) => Err(e),
            None => {
                let (results, ifnames, added) = parts(&held.updated);
                finish_result(&mut m, args, &report, &results, &ifnames, &added).and_then(|(result, moved, links)| {
                    // Moved now (or kept): put back below if the rest of the chain fails.
                    replaced = moved;
                    self.rest_of_chain(args, result).map(|r| (r, links))
                })
            }
        };
        let (result, links, unsettled) = match done {
            Ok((result, links)) => (Some(result), links, None),
            Err(e) => {
                // A step after the added delegates' ADD failed: they are rolled back as a failed
                // ADD rolls its delegates back.
                let mut e = e;
                if held.updated.added.iter().any(|a| *a) {
                    if let Err(r) = m.roll_back_added(&mut held) {
                        e.msg.push_str(&format!("; {}", r.msg));
                    }
                    replaced = restore_default_routes(&mut m, args, &held.updated, replaced);
                }
                (None, None, Some(e))
            }
        };
        // The file, still under the locks: what is attached, and whether that is the annotation.
        if let Some(path) = &path {
            let unchanged = !held.updated.changed() && !before.unsettled;
            if unsettled.is_none() || !unchanged {
                let why = unsettled.as_ref().map(|e| e.msg.clone()).unwrap_or_default();
                let record = status::Record {
                    replaced: replaced.as_ref(),
                    unsettled: unsettled.as_ref().map(|_| (requested.as_deref(), why.as_str())),
                    ..status::Record::default()
                };
                report.networks = status_networks(&held.updated, before.default_network.as_deref(), &claims);
                let (results, ifnames, _) = parts(&held.updated);
                write_status(&mut m, args, &report, path, (&results, &ifnames), links, record)?;
            }
        }
        drop(held);
        match (result, unsettled) {
            (_, Some(e)) => Err(e),
            (Some(r), None) => Ok(r),
            (None, None) => Err(CniError::new(cni_types::error::INTERNAL, "the update ended without a result")),
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

/// The network-status entries of what the update left: the configured delegates by name (the
/// first by `primary`, the pod's default network, when ADD put one in its place), the selected
/// ones by their selector (a claim's with its claim, from `claims`: the selectors of the claims'
/// networks the selection made).
fn status_networks(
    u: &Updated,
    primary: Option<&str>,
    claims: &[(String, kubernetes::claims::ClaimNetwork)],
) -> Vec<StatusNetwork> {
    u.attachments
        .iter()
        .enumerate()
        .map(|(i, a)| match (&a.selector, primary) {
            (Some(s), _) => StatusNetwork {
                // A kept attachment's device-info stays what its file holds (a hot-plugged
                // network is given no device: only ADD looks devices up).
                device_info: a.capability_args.as_ref().and_then(kubernetes::devices::device_info),
                claim: claims.iter().find(|(c, _)| c == s).map(|(_, c)| c.clone()),
                ..kubernetes::status_network(s)
            },
            (None, Some(p)) if i == 0 => StatusNetwork {
                name: p.to_string(),
                default: true,
                default_route: None,
                device_info: None,
                claim: None,
            },
            (None, _) => StatusNetwork {
                name: a.name.clone(),
                default: i == 0,
                default_route: None,
                device_info: None,
                claim: None,
            },
        })
        .collect()
}

/// The results, interfaces and added flags of what the update left.
fn parts(u: &Updated) -> (Vec<AnyResult>, Vec<String>, Vec<bool>) {
    (u.results.clone(), u.attachments.iter().map(|a| a.ifname.clone()).collect(), u.added.clone())
}

/// When the interface that took the default routes (`replaced.by`) is no longer attached, the
/// routes it replaced are put back on the interfaces still there; what stays replaced is
/// returned. A failure to put them back is logged (the update's own outcome stands).
fn restore_default_routes(
    m: &mut MetaCommand,
    args: &CmdArgs,
    u: &Updated,
    replaced: Option<status::Replaced>,
) -> Option<status::Replaced> {
    let r = replaced?;
    // Kept as it was: its routes stay replaced. Added anew (changed, on the same name) or gone:
    // put back first; a new `default-route` moves them again.
    if u.attachments.iter().zip(&u.added).any(|(a, added)| a.ifname == r.by && !added) {
        return Some(r);
    }
    let rtnl = match m.pod.rtnl() {
        Ok(rtnl) => rtnl,
        Err(e) => {
            m.log.warn(format_args!("the default routes {} replaced are not put back: {}", r.by, e.msg));
            return None;
        }
    };
    match default_route::restore(rtnl, std::path::Path::new(&args.netns), &r.routes) {
        Ok(back) => {
            for b in back {
                m.log.info(format_args!(
                    "update: {} is gone; put back the default route {} of {}",
                    r.by,
                    b.gateway.map_or_else(|| "without gateway".to_string(), |g| format!("via {g}")),
                    b.ifname
                ));
            }
        }
        Err(e) => m.log.warn(format_args!("the default routes {} replaced are not put back: {e}", r.by)),
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An update names the primary as ADD did: the pod's default network (recorded in the
    /// status file) stays `namespace/name` with `default: true`; the selected ones by selector.
    #[test]
    fn the_default_network_keeps_its_name_across_an_update() {
        let att = |name: &str, selector: Option<String>| -> braid_attach::plan::Attachment {
            serde_json::from_value(serde_json::json!({"name": name, "config": {}, "selector": selector})).unwrap()
        };
        let u = Updated {
            attachments: vec![att("ovn", None), att("blue", Some(r#"{"network":"team-a/blue"}"#.into()))],
            results: Vec::new(),
            added: vec![false, true],
            removed: Vec::new(),
            failure: None,
        };
        let named: Vec<(String, bool)> =
            status_networks(&u, Some("kube-system/ovn"), &[]).into_iter().map(|n| (n.name, n.default)).collect();
        assert_eq!(named, [("kube-system/ovn".to_string(), true), ("team-a/blue".to_string(), false)]);
        let named: Vec<String> = status_networks(&u, None, &[]).into_iter().map(|n| n.name).collect();
        assert_eq!(named, ["ovn", "team-a/blue"], "without an override: the cluster network's own name");
    }
}
