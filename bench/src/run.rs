//! Running one plugin process and timing it, the way braid's runtime does: the same
//! `cni_skel` invoke machinery (every `CNI_*` variable set, config on stdin) for braid's
//! plugins and the reference plugins alike, timed from spawn to reap.

use cni_runtime::invoke::{Exec, RawExec};
use cni_types::version::Command;
use cni_types::Invocation;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// No benchmarked call should come near this; a hung plugin fails the run instead of stalling it.
const TIMEOUT: Duration = Duration::from_secs(60);

/// One plugin call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The binary.
    pub plugin: PathBuf,
    /// The CNI parameters.
    pub req: Invocation,
    /// stdin.
    pub stdin: Vec<u8>,
}

impl Call {
    /// The same call against another namespace.
    pub fn in_netns(mut self, netns: impl Into<String>) -> Call {
        self.req.netns = netns.into();
        self
    }

    /// Runs the call, timing spawn to exit; fails with the plugin's error when it fails.
    pub fn run(&self) -> Result<(Duration, Vec<u8>), String> {
        let start = Instant::now();
        let out = RawExec { timeout: Some(TIMEOUT), ..RawExec::default() }
            .exec(&self.plugin, &self.stdin, &self.req.env())
            .map_err(|e| format!("{} {} failed: {e}", name(&self.plugin), self.req.command.as_str()))?;
        Ok((start.elapsed(), out))
    }

    /// [`Call::run`], and the CPU time the plugin spent (user + system, the kernel's work on
    /// its behalf included, its sleeps not): the growth of this process's reaped children's
    /// usage, so no other thread of this process may reap a child meanwhile.
    pub fn run_cpu(&self) -> Result<(Duration, Duration, Vec<u8>), String> {
        let before = children_cpu()?;
        let (wall, out) = self.run()?;
        Ok((wall, children_cpu()?.saturating_sub(before), out))
    }
}

/// User + system time of this process's reaped children so far (`getrusage(RUSAGE_CHILDREN)`;
/// Linux derives both from the scheduler's nanosecond runtime, so their sum is exact).
fn children_cpu() -> Result<Duration, String> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(|e| format!("getrusage: {e}"))?;
    let d = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    Ok(d(u.user_time()) + d(u.system_time()))
}

/// A call's parameters as the `rss` helper child reads them from its stdin.
pub fn to_spec(call: &Call) -> serde_json::Value {
    serde_json::json!({"plugin": call.plugin, "command": call.req.command.as_str(),
        "containerId": call.req.container_id, "netns": call.req.netns, "ifname": call.req.ifname,
        "args": call.req.args, "path": call.req.path, "stdin": String::from_utf8_lossy(&call.stdin)})
}

/// The inverse of [`to_spec`].
pub fn from_spec(v: &serde_json::Value) -> Result<Call, String> {
    let s = |k: &str| v.get(k).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
    let command = Command::parse(&s("command")).ok_or_else(|| format!("unknown command {:?}", s("command")))?;
    Ok(Call {
        plugin: PathBuf::from(s("plugin")),
        req: Invocation {
            command,
            container_id: s("containerId"),
            netns: s("netns"),
            ifname: s("ifname"),
            args: s("args"),
            path: s("path"),
        },
        stdin: s("stdin").into_bytes(),
    })
}

/// A binary's file name.
pub fn name(p: &Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip() {
        let call = Call {
            plugin: PathBuf::from("/usr/lib/cni/bridge"),
            req: Invocation {
                command: Command::Del,
                container_id: "c".into(),
                netns: "/run/netns/x".into(),
                ifname: "eth0".into(),
                args: "A=1".into(),
                path: "/p".into(),
            },
            stdin: b"{\"x\":1}".to_vec(),
        };
        let back = from_spec(&to_spec(&call)).unwrap();
        assert_eq!((back.plugin, back.req, back.stdin), (call.plugin, call.req, call.stdin));
        assert!(from_spec(&serde_json::json!({"command": "FROB"})).is_err());
    }
}
