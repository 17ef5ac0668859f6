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
//!
//! STATUS ends within its deadline — the `deadline` key, at most [`STATUS_LIMIT`] (5 s, the
//! interval at which containerd asks) — whatever a delegate or the state directory holds: the
//! delegates that answer STATUS are asked all at once (a thread each), each killed at the
//! deadline and then named as not answering (50); the owner file is read as ADD reads it (no
//! symlink followed, no FIFO waited on, 64 bytes at most). The answer is the first failure in
//! delegate order, as libcni's `GetStatusNetworkList` reports the first.

use crate::attach::{each, thread_panicked, Order};
use crate::bounded::Bounded;
use crate::config::{PluginRules, SharedConfig};
use crate::deadline::{secs, Deadline};
use crate::delegate::{Delegate, DelegateConfig};
use cni_runtime::chain::{Chain, ChainError, RuntimeConf};
use cni_runtime::invoke::{self, Exec, InvokeError, RawExec};
use cni_skel::CmdArgs;
use cni_types::error::{LIMITED_CONNECTIVITY, PLUGIN_NOT_AVAILABLE};
use cni_types::version::Command;
use cni_types::{CniError, NetConf};
use std::path::PathBuf;
use std::time::Duration;

/// The longest a STATUS takes: containerd asks every 5 s (and the kubelet its runtime's status
/// as often), so an answer comes before the next question — a delegate that does not answer by
/// then is not available. A shorter `deadline` bounds it more.
pub const STATUS_LIMIT: Duration = Duration::from_secs(5);

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
    let deadline = Deadline::new(config.started, config.deadline.min(STATUS_LIMIT));
    crate::state::StateStore::check(&config.state_dir).map_err(|e| unavailable(e.into(), false))?;
    if let Some(e) = crate::owner::foreign_owner(&config.state_dir, rules.plugin) {
        return Err(unavailable(e, false));
    }
    let exec = RawExec { timeout: Some(config.timeout), env: vec![crate::nesting::delegate_depth()] };
    delegates(&exec, &args.path_list(), &config.delegates, deadline)
}

/// The delegates' part of STATUS: every binary found on `paths`, every delegate of 1.1.0 or
/// later ready by its own STATUS — asked all at once (a thread each), each killed at
/// `deadline` — and the first failure in delegate order, its delegate named.
pub fn delegates(
    exec: &(dyn Exec + Sync),
    paths: &[PathBuf],
    delegates: &[Delegate],
    deadline: Deadline,
) -> Result<(), CniError> {
    let found: Vec<Result<(), CniError>> = delegates.iter().map(|d| binaries_of(exec, paths, &d.config)).collect();
    let asked: Vec<usize> =
        (0..delegates.len()).filter(|&i| found[i].is_ok() && answers_status(&delegates[i].config)).collect();
    let ask = |i: usize| ask(exec, paths, &delegates[i].config, deadline);
    let mut outcomes = found;
    for (&i, answer) in asked.iter().zip(each(Order::AllAtOnce, &asked, &ask, &|| Err(thread_panicked()))) {
        outcomes[i] = answer;
    }
    for (i, (d, outcome)) in delegates.iter().zip(outcomes).enumerate() {
        outcome.map_err(|e| e.context(format_args!("delegate {i} (network {:?})", d.name())))?;
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

/// Every binary of a delegate: for a delegate of any version — one below 1.1.0 has no STATUS
/// of its own, and a missing binary stops ADD all the same.
fn binaries_of(exec: &dyn Exec, paths: &[PathBuf], config: &DelegateConfig) -> Result<(), CniError> {
    match config {
        DelegateConfig::Plugin(c) => binaries(exec, paths, c),
        DelegateConfig::List(l) => l
            .plugins
            .iter()
            .try_for_each(|p| binaries(exec, paths, p).map_err(|e| e.context(format_args!("conflist {:?}", l.name)))),
    }
}

/// Whether the delegate is sent STATUS (libcni's rule: from 1.1.0; below, it does not exist).
fn answers_status(config: &DelegateConfig) -> bool {
    let version = match config {
        DelegateConfig::Plugin(c) => c.version(),
        DelegateConfig::List(l) => &l.cni_version,
    };
    Command::Status.allowed_in(version).unwrap_or(false)
}

/// The delegate's own STATUS (a conflist's: libcni's `GetStatusNetworkList`, each plugin in
/// order), killed at `deadline`.
fn ask(exec: &dyn Exec, paths: &[PathBuf], config: &DelegateConfig, deadline: Deadline) -> Result<(), CniError> {
    let bounded = Bounded { inner: exec, spawned: &|_| {}, until: deadline.until() };
    let refused = |e: &InvokeError| match e {
        InvokeError::DeadlinePassed { .. } => {
            let within = deadline.total().map(secs).unwrap_or_default();
            CniError::new(
                PLUGIN_NOT_AVAILABLE,
                format!("no answer to STATUS within the command's deadline ({within}): {e}"),
            )
        }
        InvokeError::Plugin(c) => unavailable(c.clone(), true),
        other => unavailable(CniError::from(other.clone()), true),
    };
    match config {
        DelegateConfig::Plugin(c) => {
            let inv = RuntimeConf::default().invocation(Command::Status, &cni_types::invocation::join_path(paths));
            exec.find(c.plugin_type(), paths)
                .and_then(|p| invoke::exec_without_result(&bounded, &p, &c.to_bytes(), &inv))
                .map_err(|e| refused(&e))
        }
        DelegateConfig::List(l) => {
            let chain = Chain { exec: &bounded, paths: paths.to_vec(), cache_dir: PathBuf::new() };
            chain.status(l).map_err(|e| match &e {
                ChainError::Invoke(source) | ChainError::Plugin { source, .. } => refused(source),
                _ => CniError::new(PLUGIN_NOT_AVAILABLE, e.to_string()),
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
