//! Braid plugins inside braid plugins: a delegate may itself be a delegator or a merger (or a
//! conflist holding one). Each level tells the next how deep it runs and which pod-namespace
//! locks it holds, so that a delegate that refers back to an enclosing network is refused at
//! once instead of recursing, and a nested plugin never waits for a lock its own caller holds
//! while waiting for it.

use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::CniError;

/// How many braid meta-plugins enclose this one: each sets it one higher for its delegates.
pub const DEPTH_ENV: &str = "BRAID_DEPTH";

/// Deeper than this is a delegate that refers back to an enclosing network: refused at once,
/// instead of recursing until the timeouts end it.
pub const MAX_DEPTH: u32 = 8;

/// Names the pod namespaces whose lock an enclosing braid plugin holds for its delegates
/// (`<dev>:<ino>`, comma-separated). A nested braid plugin (a delegate that is itself a
/// delegator or merger, or a conflist containing one) must not wait for a lock its own caller
/// holds while waiting for it.
pub const HELD_ENV: &str = "BRAID_NETNS_LOCKS";

/// The state files of the enclosing braid plugins that hold the pod namespace's lock for their
/// delegates, one per line. Their plans name every interface they chose there — also those of
/// delegates that have not run yet, which the kernel does not show — so a nested braid plugin
/// names its own interfaces around them (each plan is written before any delegate is sent its
/// configuration).
pub const PLANS_ENV: &str = "BRAID_ENCLOSING_PLANS";

/// The state files of the enclosing braid plugins ([`PLANS_ENV`]).
pub fn enclosing_plans() -> Vec<std::path::PathBuf> {
    std::env::var(PLANS_ENV).unwrap_or_default().lines().filter(|l| !l.is_empty()).map(Into::into).collect()
}

/// The [`PLANS_ENV`] pair for this process's delegates: the enclosing plans and `own`.
pub fn plans_for_delegates(own: &std::path::Path) -> (String, String) {
    let mut plans = std::env::var(PLANS_ENV).unwrap_or_default();
    if !plans.is_empty() && !plans.ends_with('\n') {
        plans.push('\n');
    }
    plans.push_str(&own.to_string_lossy());
    (PLANS_ENV.to_string(), plans)
}

/// This process's nesting depth ([`DEPTH_ENV`], 0 when unset or unreadable).
pub fn depth() -> u32 {
    std::env::var(DEPTH_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Whether this process runs as a delegate of another braid plugin.
pub fn nested() -> bool {
    depth() > 0
}

/// The [`DEPTH_ENV`] pair this process's delegates are run with: one level deeper.
pub fn delegate_depth() -> (String, String) {
    (DEPTH_ENV.to_string(), (depth() + 1).to_string())
}

/// Refuses to run `plugin` [`MAX_DEPTH`] or more levels deep (code 7).
pub fn refuse_too_deep(plugin: &str) -> Result<(), CniError> {
    let depth = depth();
    if depth >= MAX_DEPTH {
        return Err(CniError::new(
            INVALID_NETWORK_CONFIG,
            format!("{plugin} nested {depth} deep in braid plugins: a delegate refers back to an enclosing network"),
        ));
    }
    Ok(())
}
