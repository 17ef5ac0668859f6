//! A tiny `crictl` for scripts/demo.sh, on the containerd tests' CRI client
//! (`braid_integration::cri`): the demo stands in for the kubelet with it. An example target, so
//! that the crate's `cri` feature (tonic, prost) is on for it and no build of the plugins
//! (`cargo build --bins`) ever sees them.
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

use braid_integration::cri::{self, Cri, PodSandboxConfig};
use std::path::Path;
use std::time::{Duration, Instant};

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
                    last = s.cni_config().to_string();
                    if s.network_ready() && s.network_loaded(arg) {
                        return Ok(());
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((1, format!("the runtime did not load the network {arg:?} within {secs} s; cniconfig: {last}")))
        }
        "runp" => {
            let (namespace, name) = arg.split_once('/').ok_or_else(usage)?;
            let annotations =
                rest.iter().map(|kv| kv.split_once('=').ok_or_else(usage)).collect::<Result<Vec<_>, _>>()?;
            let config = PodSandboxConfig::pod(namespace, name, &annotations);
            println!("{}", cri.run_pod_sandbox(config).map_err(failed("RunPodSandbox"))?);
            Ok(())
        }
        "ips" | "netns" if rest.is_empty() => {
            let s = cri.pod_sandbox_status(arg).map_err(failed("PodSandboxStatus"))?;
            if verb == "ips" {
                for ip in s.ips() {
                    println!("{ip}");
                }
                return Ok(());
            }
            let path =
                s.netns().ok_or_else(|| (1, format!("no network namespace in the sandbox's info: {:?}", s.info)))?;
            println!("{}", path.display());
            Ok(())
        }
        "stopp" if rest.is_empty() => cri.stop_pod_sandbox(arg).map_err(failed("StopPodSandbox")),
        "rmp" if rest.is_empty() => cri.remove_pod_sandbox(arg).map_err(failed("RemovePodSandbox")),
        _ => Err(usage()),
    }
}
