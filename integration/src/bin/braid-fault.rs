//! A fault-injection CNI plugin for tests: it does what its configuration says, so tests can
//! cover what real plugins cannot — failing on command, hanging, crashing, printing garbage.
//!
//! Keys (all optional):
//! - `log`: a file to append one JSON line per call to: `{"command", "pid", "env": {CNI_*}, "stdin"}`.
//! - `fail`: `{"command": "ADD", "code": 7, "msg": "...", "details": "..."}` — fail that command.
//! - `failWhile` with `fail`: a file; fail only while it exists (a test ends the failures by
//!   removing it — a DEL that failed then goes through when tried again).
//! - `sleepMs` with `sleepOn` (a command, or `"*"`): sleep before acting.
//! - `hangWhile` with `sleepOn`: a file; sleep before acting for as long as it exists (a test
//!   ends the hang by removing it — a recorded configuration replayed by DEL then goes through).
//! - `abortOn`: a command on which the process aborts (SIGABRT) mid-call.
//! - `garbageOn`: a command on which it prints `this is not JSON` and exits with `garbageExit`
//!   (default 0).
//! - `errorExitZeroOn`: a command on which it prints an error object but exits 0.
//! - `result`: the ADD result to print, any cniVersion, printed verbatim.
//! - `reserve`: a directory where ADD reserves a slot the way host-local reserves an IP: it
//!   creates the first free file `r<N>` (`O_EXCL`), sleeps `reserveMs`, then writes
//!   `<CNI_CONTAINERID>\r\n<CNI_IFNAME>` into it, then sleeps `holdMs`; DEL removes every file
//!   holding exactly that (host-local's `ReleaseByID`), so a slot cut between its two steps is
//!   never released — the window a crash test forces.
//! - `link`: `true` to create a real veth pair named `CNI_IFNAME`/`<CNI_IFNAME>p` inside
//!   `CNI_NETNS` on ADD (and delete it on DEL), so leaks are visible.
//! - `meet` with `meetOn` (a command) and `meetCount`: a rendezvous that shows calls running at
//!   once without timing them. The call creates `<meet>/<pid>.here`, waits until `meetCount`
//!   such files exist, then creates `<pid>.met` — so every `.met` file proves its call was
//!   running while all the others were. A call that waited `meetMs` (default 4000) in vain —
//!   the calls ran one after another — creates `<pid>.alone` instead and goes on.
//!
//! And one variable of its environment: `BRAID_FAULT_STARTED`, a directory where the process
//! creates `<pid>.started` as the very first thing it does, before it reads its configuration —
//! so a test can see a process that exists but was not (yet) sent anything.
#![allow(clippy::print_stdout)]

use cni_skel::{CmdArgs, Environment, Plugin};
use cni_types::CniError;
use serde_json::{json, Value};
use std::io::{Read, Write};

struct Fault {
    conf: Value,
}

impl Fault {
    fn on(&self, key: &str, command: &str) -> bool {
        self.conf.get(key).and_then(Value::as_str).is_some_and(|c| c == command || c == "*")
    }

    fn act(&self, command: &str) -> Result<(), CniError> {
        if let Some(f) = self.conf.get("failWhile").and_then(Value::as_str) {
            if !std::path::Path::new(f).exists() {
                return Ok(());
            }
        }
        match self.conf.get("fail") {
            Some(f) if f.get("command").and_then(Value::as_str).is_some_and(|c| c == command || c == "*") => {
                Err(CniError::with_details(
                    f.get("code").and_then(Value::as_u64).unwrap_or(999) as u32,
                    f.get("msg").and_then(Value::as_str).unwrap_or("injected failure"),
                    f.get("details").and_then(Value::as_str).unwrap_or(""),
                ))
            }
            _ => Ok(()),
        }
    }

    fn link(&self, args: &CmdArgs, add: bool) -> Result<(), CniError> {
        if self.conf.get("link") != Some(&Value::Bool(true)) || args.netns.is_empty() {
            return Ok(());
        }
        let ifname = args.ifname.clone();
        let peer = format!("{}p", &ifname[..ifname.len().min(14)]);
        let work = move || {
            let mut cmd = std::process::Command::new("ip");
            if add {
                cmd.args(["link", "add", &ifname, "type", "veth", "peer", "name", &peer]);
            } else {
                cmd.args(["link", "del", &ifname]);
            }
            cmd.output()
        };
        match cni_skel::netns::run_in(std::path::Path::new(&args.netns), work) {
            Ok(Ok(out)) if out.status.success() || !add => Ok(()),
            Ok(Ok(out)) => Err(CniError::new(999, format!("ip link add: {}", String::from_utf8_lossy(&out.stderr)))),
            Ok(Err(e)) => Err(CniError::new(999, format!("ip: {e}"))),
            Err(e) if !add && e.is_missing() => Ok(()),
            Err(e) => Err(CniError::new(999, e.to_string())),
        }
    }
}

impl Plugin for Fault {
    fn add(&self, args: &CmdArgs) -> Result<cni_types::CniResult, CniError> {
        self.act("ADD")?;
        self.link(args, true)?;
        let version = args.conf()?.version().to_string();
        let r = match self.conf.get("result") {
            Some(r) => cni_types::AnyResult::from_bytes(&serde_json::to_vec(r).unwrap_or_default())
                .map_err(|e| CniError::new(6, format!("canned result: {e}")))?
                .to_latest(),
            None => cni_types::CniResult { cni_version: version, ..Default::default() },
        };
        Ok(r)
    }
    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        self.act("DEL")?;
        self.link(args, false)
    }
    fn check(&self, _: &CmdArgs) -> Result<(), CniError> {
        self.act("CHECK")
    }
    fn gc(&self, _: &CmdArgs) -> Result<(), CniError> {
        self.act("GC")
    }
    fn status(&self, _: &CmdArgs) -> Result<(), CniError> {
        self.act("STATUS")
    }
}

/// The rendezvous of `meet` (see the crate documentation).
fn meet(conf: &Value) {
    let Some(dir) = conf.get("meet").and_then(Value::as_str).map(std::path::Path::new) else { return };
    let count = conf.get("meetCount").and_then(Value::as_u64).unwrap_or(2) as usize;
    let guard = std::time::Duration::from_millis(conf.get("meetMs").and_then(Value::as_u64).unwrap_or(4000));
    let pid = std::process::id();
    let _ = std::fs::write(dir.join(format!("{pid}.here")), b"");
    let here = || {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".here")).count())
            .unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while here() < count && start.elapsed() < guard {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let outcome = if here() >= count { "met" } else { "alone" };
    let _ = std::fs::write(dir.join(format!("{pid}.{outcome}")), b"");
}

/// The process environment with stdin already read (the fault plugin looks at it first).
struct Env {
    stdin: std::io::Cursor<Vec<u8>>,
    inner: cni_skel::ProcessEnv,
}

impl Environment for Env {
    fn getenv(&self, key: &str) -> Option<String> {
        self.inner.getenv(key)
    }
    fn stdin(&mut self) -> &mut dyn Read {
        &mut self.stdin
    }
    fn stdout(&mut self) -> &mut dyn Write {
        self.inner.stdout()
    }
    fn stderr(&mut self) -> &mut dyn Write {
        self.inner.stderr()
    }
}

fn main() {
    if let Some(dir) = std::env::var_os("BRAID_FAULT_STARTED") {
        let _ = std::fs::write(std::path::Path::new(&dir).join(format!("{}.started", std::process::id())), b"");
    }
    let mut stdin = Vec::new();
    let command = std::env::var("CNI_COMMAND").unwrap_or_default();
    if command != "VERSION" {
        let _ = std::io::stdin().read_to_end(&mut stdin);
    }
    let conf: Value = serde_json::from_slice(&stdin).unwrap_or(Value::Null);
    if let Some(path) = conf.get("log").and_then(Value::as_str) {
        let env: serde_json::Map<String, Value> =
            std::env::vars().filter(|(k, _)| k.starts_with("CNI_")).map(|(k, v)| (k, Value::String(v))).collect();
        let line = json!({"command": command, "pid": std::process::id(), "env": env, "stdin": String::from_utf8_lossy(&stdin)});
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            // One write per line: O_APPEND keeps parallel callers' lines whole.
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
    let fault = Fault { conf };
    if fault.on("meetOn", &command) {
        meet(&fault.conf);
    }
    if fault.on("sleepOn", &command) {
        let ms = fault.conf.get("sleepMs").and_then(Value::as_u64).unwrap_or(0);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        if let Some(path) = fault.conf.get("hangWhile").and_then(Value::as_str) {
            while std::path::Path::new(path).exists() {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    if let Some(dir) = fault.conf.get("reserve").and_then(Value::as_str) {
        let id = std::env::var("CNI_CONTAINERID").unwrap_or_default();
        let owner = format!("{id}\r\n{}", std::env::var("CNI_IFNAME").unwrap_or_default());
        let ms = |k: &str| std::time::Duration::from_millis(fault.conf.get(k).and_then(Value::as_u64).unwrap_or(0));
        match command.as_str() {
            "ADD" => {
                let slot = (0..1000).find_map(|n| {
                    std::fs::OpenOptions::new().write(true).create_new(true).open(format!("{dir}/r{n}")).ok()
                });
                if let Some(mut f) = slot {
                    std::thread::sleep(ms("reserveMs"));
                    let _ = f.write_all(owner.as_bytes());
                    std::thread::sleep(ms("holdMs"));
                }
            }
            "DEL" => {
                for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    if std::fs::read_to_string(e.path()).is_ok_and(|c| c.trim() == owner) {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
            _ => {}
        }
    }
    if fault.on("abortOn", &command) {
        std::process::abort();
    }
    if fault.on("garbageOn", &command) {
        print!("this is not JSON");
        let code = fault.conf.get("garbageExit").and_then(Value::as_i64).unwrap_or(0) as i32;
        std::process::exit(code);
    }
    if fault.on("errorExitZeroOn", &command) {
        print!("{}", CniError::new(7, "error object with exit status 0").to_json_pretty());
        std::process::exit(0);
    }
    if command == "ADD" && fault.conf.get("result").is_some() && fault.conf.get("fail").is_none() {
        // Print the canned result verbatim, in its own version, as a real plugin would.
        let args = CmdArgs {
            invocation: cni_types::Invocation {
                netns: std::env::var("CNI_NETNS").unwrap_or_default(),
                ifname: std::env::var("CNI_IFNAME").unwrap_or_default(),
                ..Default::default()
            },
            ..CmdArgs::default()
        };
        if let Err(e) = fault.link(&args, true) {
            print!("{}", e.to_json_pretty());
            std::process::exit(1);
        }
        print!("{}", fault.conf["result"]);
        std::process::exit(0);
    }
    let mut env = Env { stdin: std::io::Cursor::new(stdin), inner: cni_skel::ProcessEnv::new() };
    std::process::exit(cni_skel::run(&fault, &mut env));
}
