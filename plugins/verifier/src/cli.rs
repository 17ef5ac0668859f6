//! Operators' mode: `verifier --netns PATH [--ifname NAME] < result.json` prints one line per
//! checked claim and exits 0 (all verified), 1 (mismatches) or 2 (cannot verify: bad
//! arguments, unreadable input, namespace not readable). No CNI environment is needed.
//!
//! stdin may be a result of any cniVersion, a configuration carrying `prevResult`, or a libcni
//! cache file (`/var/lib/cni/results/…`, whose `ifName` then becomes the default ifname).

use crate::inspect::{inspect, Report, Settle};
use crate::verify::{Finding, Options, RouteChecks};
use cni_types::AnyResult;
use serde_json::Value;
use std::io::{Read, Write};
use std::time::Duration;

const USAGE: &str =
    "usage: verifier --netns PATH [--ifname NAME] [--settle-ms N] [--no-host] [--upstream-routes] < result.json
  Verifies a CNI result against network namespace PATH and the current namespace (host side).
  stdin: a CNI result (any cniVersion), a config with prevResult, or a libcni cache file.
  --ifname NAME      the interface IPs without an index belong to (default: the cache file's
                     ifName, else the first interface of the result in PATH, else eth0)
  --settle-ms N      retry for up to N ms while the namespace settles (default 0)
  --no-host          do not check host-side interfaces (no sandbox)
  --upstream-routes  compare routes as upstream CHECK does (main table, dst and gw only)
exit status: 0 all verified, 1 mismatches, 2 cannot verify";

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Args {
    netns: String,
    ifname: Option<String>,
    settle: Duration,
    options: Options,
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut it = argv.iter();
    let (mut netns, mut ifname, mut settle) = (None, None, Duration::ZERO);
    let mut options = Options { check_host: true, routes: RouteChecks::Full };
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--netns" => netns = Some(value("--netns")?),
            "--ifname" => ifname = Some(value("--ifname")?),
            "--settle-ms" => {
                let v = value("--settle-ms")?;
                let ms: u64 = v.parse().map_err(|_| format!("--settle-ms takes milliseconds, not {v:?}"))?;
                settle = Duration::from_millis(ms.min(crate::config::MAX_SETTLE.as_millis() as u64));
            }
            "--no-host" => options.check_host = false,
            "--upstream-routes" => options.routes = RouteChecks::Upstream,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let netns = netns.ok_or("--netns PATH is required")?;
    Ok(Args { netns, ifname, settle, options })
}

/// The result in stdin and the ifname a cache file names.
fn read_input(bytes: &[u8]) -> Result<(cni_types::CniResult, Option<String>), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("stdin is not JSON: {e}"))?;
    let (result, ifname) = if v.get("kind").and_then(Value::as_str) == Some("cniCacheV1") {
        let r = v.get("result").cloned().ok_or("the cache file has no \"result\"")?;
        (r, v.get("ifName").and_then(Value::as_str).map(str::to_string))
    } else if let Some(prev) = v.get("prevResult") {
        (prev.clone(), None)
    } else {
        (v, None)
    };
    let any = AnyResult::from_bytes(&serde_json::to_vec(&result).map_err(|e| e.to_string())?)
        .map_err(|e| format!("stdin holds no CNI result: {e}"))?;
    Ok((any.to_latest(), ifname))
}

fn default_ifname(result: &cni_types::CniResult, netns: &str) -> String {
    let in_netns = cni_skel::netns::sandbox_matcher(netns);
    result.interfaces.iter().find(|i| in_netns(&i.sandbox)).map_or_else(|| "eth0".to_string(), |i| i.name.clone())
}

fn print(report: &Report, netns: &str, out: &mut dyn Write) -> std::io::Result<()> {
    for item in &report.items {
        let tag = match item.finding {
            Finding::Ok => "ok",
            Finding::Pending(_) => "pending",
            Finding::Mismatch(_) => "MISMATCH",
            Finding::Skipped(_) => "skipped",
        };
        writeln!(out, "{tag:<9}{item}")?;
    }
    let bad = report.mismatches().len();
    if bad == 0 {
        writeln!(out, "verified: {} claims match namespace {netns}", report.items.len())
    } else {
        writeln!(out, "{bad} mismatch{} between result and namespace {netns}", if bad == 1 { "" } else { "es" })
    }
}

/// Runs the operators' mode with `argv` (without the program name); returns the exit status.
pub fn run(argv: &[String]) -> i32 {
    let mut err = std::io::stderr().lock();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        let _ = writeln!(std::io::stdout().lock(), "{USAGE}");
        return 0;
    }
    let args = match parse_args(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(err, "verifier: {e}\n{USAGE}");
            return 2;
        }
    };
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().lock().take(cni_skel::dispatch::MAX_STDIN).read_to_end(&mut input) {
        let _ = writeln!(err, "verifier: cannot read stdin: {e}");
        return 2;
    }
    let (result, cached_ifname) = match read_input(&input) {
        Ok(x) => x,
        Err(e) => {
            let _ = writeln!(err, "verifier: {e}");
            return 2;
        }
    };
    let ifname = args.ifname.or(cached_ifname).unwrap_or_else(|| default_ifname(&result, &args.netns));
    match inspect(&result, &args.netns, &ifname, args.options, Settle { limit: args.settle, wait_for_pending: true }) {
        Err(e) => {
            let _ = writeln!(err, "verifier: {e}");
            2
        }
        Ok(report) => {
            let _ = print(&report, &args.netns, &mut std::io::stdout().lock());
            i32::from(!report.mismatches().is_empty())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn arguments() {
        let a = parse_args(&argv("--netns /run/netns/x --ifname net1 --settle-ms 300 --no-host --upstream-routes"))
            .unwrap();
        assert_eq!(a.netns, "/run/netns/x");
        assert_eq!(a.ifname.as_deref(), Some("net1"));
        assert_eq!(a.settle, Duration::from_millis(300));
        assert_eq!(a.options, Options { check_host: false, routes: RouteChecks::Upstream });
        assert!(parse_args(&argv("--ifname x")).unwrap_err().contains("--netns"));
        assert!(parse_args(&argv("--netns")).unwrap_err().contains("needs a value"));
        assert!(parse_args(&argv("--netns x --settle-ms soon")).unwrap_err().contains("--settle-ms"));
        assert!(parse_args(&argv("--netns x --bogus")).unwrap_err().contains("--bogus"));
    }

    #[test]
    fn inputs() {
        let r = r#"{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/run/netns/x"}],"ips":[{"address":"198.18.0.2/24","interface":0}]}"#;
        let (res, ifname) = read_input(r.as_bytes()).unwrap();
        assert_eq!((res.ips.len(), ifname), (1, None));
        assert_eq!(default_ifname(&res, "/run/netns/x"), "net1");
        assert_eq!(default_ifname(&res, "/run/netns/y"), "eth0");
        let conf = format!(r#"{{"cniVersion":"1.0.0","name":"n","prevResult":{r}}}"#);
        assert_eq!(read_input(conf.as_bytes()).unwrap().0.ips.len(), 1);
        let cache = format!(r#"{{"kind":"cniCacheV1","ifName":"eth3","result":{r}}}"#);
        assert_eq!(read_input(cache.as_bytes()).unwrap().1.as_deref(), Some("eth3"));
        assert!(read_input(b"nope").unwrap_err().contains("not JSON"));
        assert!(read_input(br#"{"cniVersion":"1.0.0","ips":[{"address":"x"}]}"#)
            .unwrap_err()
            .contains("no CNI result"));
    }
}
