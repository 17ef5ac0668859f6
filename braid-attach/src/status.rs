//! STATUS for braid's meta-plugins: could an ADD run now?
//!
//! CNI 1.1 (SPEC.md, "STATUS: Check plugin status"): a plugin answers success when it is ready
//! to serve ADD, else error 50 ("the plugin is not available") or 51 ("not available, and
//! existing containers in the network may have limited connectivity"); a plugin that relies on
//! a delegate MUST forward STATUS to it and fail when it fails. containerd ≥ 2.0 sends STATUS
//! every 5 s (its CRI status loop; go-cni `Status` → libcni `GetStatusNetworkList`) and reports
//! the node's network not ready while it fails — the kubelet then marks the node NotReady and
//! no new pod is scheduled there. So STATUS must be true (neither "ready" without the cluster
//! network nor "not ready" with it) and cheap.
//!
//! A meta-plugin is available when every delegate it depends on can run:
//!
//! - its configuration reads, and every network named by reference is found in `confDir`
//!   (libcni's `LoadNetworkConf` rules, as ADD looks them up);
//! - every plugin of every delegate, and its `ipam.type`, is found on `CNI_PATH` (Go's
//!   `FindInPath`) — for a delegate of any version: one below 1.1.0 has no STATUS of its own,
//!   and a missing binary stops ADD all the same;
//! - delegates of cniVersion 1.1.0 or later answer their own STATUS (libcni's rule: below
//!   1.1.0 STATUS does not exist, so nothing is sent);
//! - its `stateDir`, if it exists, is one ADD may use (checked, never created: STATUS has no
//!   effect on the node).
//!
//! Each of these stops ADD and none harms a pod already attached (DEL works from the recorded
//! state), so braid's own answer is 50. A delegate's own 50 or 51 is passed on unchanged, with
//! the delegate named; any other failure of a delegate's STATUS becomes 50. Nothing is ever
//! exec'd for delegates below 1.1.0: the cost is reading the configuration (and `confDir` for
//! named networks) and a `stat` per binary.

use crate::config::{PluginRules, SharedConfig};
use crate::delegate::{Delegate, DelegateConfig};
use cni_runtime::chain::{Chain, RuntimeConf};
use cni_runtime::invoke::{self, Exec, RawExec};
use cni_skel::CmdArgs;
use cni_types::error::{LIMITED_CONNECTIVITY, PLUGIN_NOT_AVAILABLE};
use cni_types::version::Command;
use cni_types::{CniError, NetConf};
use std::path::PathBuf;

/// `e` as a STATUS answer: 50 and 51 as they are, anything else 50 (with its own code named
/// when it came from a delegate).
fn unavailable(e: CniError, from_delegate: bool) -> CniError {
    match e.code {
        PLUGIN_NOT_AVAILABLE | LIMITED_CONNECTIVITY => e,
        code if from_delegate => {
            let msg = format!("{} (its STATUS failed with code {code})", e.msg);
            CniError { code: PLUGIN_NOT_AVAILABLE, msg, details: e.details }
        }
        _ => e.with_code(PLUGIN_NOT_AVAILABLE),
    }
}

/// STATUS of a meta-plugin whose shared keys `rules` describes; see the module documentation.
pub fn status(args: &CmdArgs, rules: &PluginRules<'_>) -> Result<(), CniError> {
    let config = SharedConfig::parse(args, rules).map_err(|e| unavailable(e, false))?;
    crate::state::StateStore::check(&config.state_dir).map_err(|e| unavailable(e.into(), false))?;
    if let Some(e) = crate::owner::foreign_owner(&config.state_dir, rules.plugin) {
        return Err(unavailable(e, false));
    }
    let exec = RawExec { timeout: Some(config.timeout), env: vec![crate::nesting::delegate_depth()] };
    delegates(&exec, &args.path_list(), &config.delegates)
}

/// The delegates' part of STATUS: every binary found on `paths`, every delegate of 1.1.0 or
/// later ready by its own STATUS; the first failure, its delegate named.
pub fn delegates(exec: &dyn Exec, paths: &[PathBuf], delegates: &[Delegate]) -> Result<(), CniError> {
    for (i, d) in delegates.iter().enumerate() {
        delegate(exec, paths, &d.config)
            .map_err(|e| e.context(format_args!("delegate {i} (network {:?})", d.name())))?;
    }
    Ok(())
}

/// The binaries one plugin configuration needs: its type and its IPAM's.
fn binaries(exec: &dyn Exec, paths: &[PathBuf], conf: &NetConf) -> Result<(), CniError> {
    let ipam = conf.get("ipam").and_then(|i| i.get("type")).and_then(|t| t.as_str());
    for (name, what) in [(Some(conf.plugin_type()), "plugin"), (ipam, "IPAM plugin")] {
        if let Some(name) = name {
            exec.find(name, paths).map_err(|e| CniError::new(PLUGIN_NOT_AVAILABLE, format!("{what} {name:?}: {e}")))?;
        }
    }
    Ok(())
}

fn delegate(exec: &dyn Exec, paths: &[PathBuf], config: &DelegateConfig) -> Result<(), CniError> {
    match config {
        DelegateConfig::Plugin(c) => {
            binaries(exec, paths, c)?;
            if !Command::Status.allowed_in(c.version()).unwrap_or(false) {
                return Ok(());
            }
            let inv = RuntimeConf::default().invocation(Command::Status, &cni_types::invocation::join_path(paths));
            exec.find(c.plugin_type(), paths)
                .and_then(|p| invoke::exec_without_result(exec, &p, &c.to_bytes(), &inv))
                .map_err(|e| unavailable(CniError::from(e), true))
        }
        DelegateConfig::List(l) => {
            for p in &l.plugins {
                binaries(exec, paths, p).map_err(|e| e.context(format_args!("conflist {:?}", l.name)))?;
            }
            // libcni's GetStatusNetworkList: nothing below 1.1.0, else each plugin in order.
            let chain = Chain { exec, paths: paths.to_vec(), cache_dir: PathBuf::new() };
            chain.status(l).map_err(|e| match e.cause() {
                Some(cause) => unavailable(cause, true),
                None => CniError::new(PLUGIN_NOT_AVAILABLE, e.to_string()),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_50_and_51_pass_others_become_50() {
        for code in [PLUGIN_NOT_AVAILABLE, LIMITED_CONNECTIVITY] {
            assert_eq!(unavailable(CniError::new(code, "down"), true), CniError::new(code, "down"));
        }
        let e = unavailable(CniError::new(11, "busy"), true);
        assert_eq!((e.code, e.msg.as_str()), (50, "busy (its STATUS failed with code 11)"));
        let e = unavailable(CniError::new(7, "delegates must not be empty"), false);
        assert_eq!((e.code, e.msg.as_str()), (50, "delegates must not be empty"));
    }
}
