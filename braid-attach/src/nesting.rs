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
