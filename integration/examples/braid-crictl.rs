//! A tiny `crictl` for scripts/demo.sh, on the containerd tests' CRI client (`src/cri.rs`): the
//! demo stands in for the kubelet with it. An example target, so that tonic and prost stay
//! dev-dependencies and no build of the plugins (`cargo build --bins`) ever sees them.
//!
//! ```text
//! braid-crictl SOCKET wait-network NAME [SECONDS]   until NetworkReady and NAME is loaded
//! braid-crictl SOCKET runp NAMESPACE/NAME [KEY=VALUE...]   RunPodSandbox with these annotations; prints the ID
//! braid-crictl SOCKET ips ID        the pod IPs PodSandboxStatus reports, one a line
//! braid-crictl SOCKET netns ID      the pod's network namespace (from the runtime spec)
//! braid-crictl SOCKET stopp ID      StopPodSandbox
//! braid-crictl SOCKET rmp ID        RemovePodSandbox
//! ```
//!
//! Exit codes: 0 done, 1 the call failed or timed out, 2 bad command line.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs)]

#[path = "../src/cri.rs"]
mod cri;

use cri::{Cri, PodSandboxConfig, PodSandboxMetadata};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const USAGE: &str = "usage: braid-crictl SOCKET wait-network NAME [SECONDS] | runp NAMESPACE/NAME [KEY=VALUE...] \
                     | ips ID | netns ID | stopp ID | rmp ID";

fn main() {
    std::process::exit(match run(std::env::args().skip(1).collect()) {
        Ok(()) => 0,
        Err((code, msg)) => {
            eprintln!("braid-crictl: {msg}");
            code
        }
    });
}

fn run(args: Vec<String>) -> Result<(), (i32, String)> {
    let usage = || (2, USAGE.to_string());
    let [socket, verb, arg, rest @ ..] = args.as_slice() else { return Err(usage()) };
    let cri = Cri::connect(Path::new(socket), Duration::from_secs(60)).map_err(|e| (1, e))?;
    let failed = |what: &'static str| move |e: cri::CriError| (1, format!("{what}: {e}"));
    match verb.as_str() {
        "wait-network" => {
            let secs: u64 = match rest {
                [] => 20,
                [s] => s.parse().map_err(|_| usage())?,
                _ => return Err(usage()),
            };
            let start = Instant::now();
            let mut last = String::new();
            while start.elapsed() < Duration::from_secs(secs) {
                if let Ok(s) = cri.status() {
                    let ready = s
                        .status
                        .as_ref()
                        .is_some_and(|st| st.conditions.iter().any(|c| c.r#type == "NetworkReady" && c.status));
                    last = s.info.get("cniconfig").cloned().unwrap_or_default();
                    let loaded = serde_json::from_str::<Value>(&last).ok().is_some_and(|v| {
                        v["Networks"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|n| n["Config"]["Name"].as_str() == Some(arg.as_str()))
                    });
                    if ready && loaded {
                        return Ok(());
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((1, format!("the runtime did not load the network {arg:?} within {secs} s; cniconfig: {last}")))
        }
        "runp" => {
            let (namespace, name) = arg.split_once('/').ok_or_else(usage)?;
            let mut annotations = std::collections::HashMap::new();
            for kv in rest {
                let (k, v) = kv.split_once('=').ok_or_else(usage)?;
                annotations.insert(k.to_string(), v.to_string());
            }
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
            let config = PodSandboxConfig {
                metadata: Some(PodSandboxMetadata {
                    name: name.into(),
                    uid: format!("{:x}-{nanos:x}", std::process::id()),
                    namespace: namespace.into(),
                    attempt: 0,
                }),
                hostname: name.into(),
                labels: std::collections::HashMap::new(),
                annotations,
            };
            println!("{}", cri.run_pod_sandbox(config).map_err(failed("RunPodSandbox"))?);
            Ok(())
        }
        "ips" | "netns" if rest.is_empty() => {
            let s = cri.pod_sandbox_status(arg).map_err(failed("PodSandboxStatus"))?;
            if verb == "ips" {
                let net = s.status.and_then(|s| s.network).unwrap_or_default();
                for ip in std::iter::once(net.ip).chain(net.additional_ips.into_iter().map(|p| p.ip)) {
                    if !ip.is_empty() {
                        println!("{ip}");
                    }
                }
                return Ok(());
            }
            let info: Value = s.info.get("info").and_then(|i| serde_json::from_str(i).ok()).unwrap_or(Value::Null);
            let path = info["runtimeSpec"]["linux"]["namespaces"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|n| n["type"] == "network")
                .and_then(|n| n["path"].as_str())
                .ok_or((1, format!("no network namespace in the sandbox's info: {info}")))?;
            println!("{path}");
            Ok(())
        }
        "stopp" if rest.is_empty() => cri.stop_pod_sandbox(arg).map_err(failed("StopPodSandbox")),
        "rmp" if rest.is_empty() => cri.remove_pod_sandbox(arg).map_err(failed("RemovePodSandbox")),
        _ => Err(usage()),
    }
}
