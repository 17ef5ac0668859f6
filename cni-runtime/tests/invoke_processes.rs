//! `invoke` against real child processes (small shell scripts), and `upstream/invoke-tests.json`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_runtime::invoke::{self, find_in_path, Exec, InvokeError, RawExec, Watch};
use cni_runtime::testing::ScriptDir;
use cni_types::version::Command;
use cni_types::Invocation as Request;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn req() -> Request {
    Request {
        command: Command::Add,
        container_id: "ctr".into(),
        netns: "/run/netns/x".into(),
        ifname: "eth0".into(),
        args: "K=V".into(),
        path: "/opt/cni/bin".into(),
    }
}

const CONF: &[u8] = br#"{"cniVersion":"1.0.0","name":"n","type":"t"}"#;

#[test]
fn success_returns_the_result_and_sets_every_cni_variable() {
    let s = ScriptDir::new("ok").unwrap();
    let p = s.script(
        "ok",
        r#"cat >/dev/null; echo "{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"198.18.0.2/24\"}],\"dns\":{\"domain\":\"$CNI_COMMAND-$CNI_CONTAINERID-$CNI_NETNS-$CNI_IFNAME-$CNI_ARGS-$CNI_PATH\"}}""#,
    ).unwrap();
    let r = invoke::add(&RawExec::default(), &p, CONF, &req()).unwrap().to_latest();
    assert_eq!(r.ips[0].address.to_string(), "198.18.0.2/24");
    assert_eq!(r.dns.domain, "ADD-ctr-/run/netns/x-eth0-K=V-/opt/cni/bin");
}

#[test]
fn typed_error_keeps_its_code() {
    let s = ScriptDir::new("typed").unwrap();
    let p =
        s.script("typed", r#"echo '{"code":11,"msg":"try again","details":"busy"}'; echo oops >&2; exit 1"#).unwrap();
    let e = invoke::exec_without_result(&RawExec::default(), &p, CONF, &req()).unwrap_err();
    assert_eq!(e, InvokeError::Plugin(cni_types::CniError::with_details(11, "try again", "busy")));
    assert_eq!(cni_types::CniError::from(e).code, 11);
}

#[test]
fn garbage_empty_and_stderr_failures_use_gos_texts() {
    let s = ScriptDir::new("fail").unwrap();
    let garbage = s.script("garbage", "echo 'not json'; exit 1").unwrap();
    let e = invoke::exec_without_result(&RawExec::default(), &garbage, CONF, &req()).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "netplugin failed but error parsing its diagnostic message \"not json\\n\": invalid character"
        ),
        "{e}"
    );
    let quiet = s.script("quiet", "exit 3").unwrap();
    let e = invoke::exec_without_result(&RawExec::default(), &quiet, CONF, &req()).unwrap_err();
    assert_eq!(e.to_string(), "netplugin failed with no error message: exit status 3");
    let loud = s.script("loud", "echo 'some stderr message' >&2; exit 1").unwrap();
    let e = invoke::exec_without_result(&RawExec::default(), &loud, CONF, &req()).unwrap_err();
    assert_eq!(e.to_string(), "netplugin failed: \"some stderr message\\n\": exit status 1");
    assert_eq!(cni_types::CniError::from(e).code, 999);
    let bad_result = s.script("badresult", "echo hello").unwrap();
    let e = invoke::add(&RawExec::default(), &bad_result, CONF, &req()).unwrap_err();
    assert!(e.to_string().starts_with("failed to unmarshal raw result: invalid character 'h'"), "{e}");
}

#[test]
fn timeout_kills_the_child_and_what_it_spawned() {
    let s = ScriptDir::new("hang").unwrap();
    let marker = s.path.join("grandchild.pid");
    let p = s.script("hang", &format!("sleep 30 & echo $! > {}; sleep 30", marker.display())).unwrap();
    let exec = RawExec { timeout: Some(Duration::from_millis(1500)), ..RawExec::default() };
    let e = invoke::exec_without_result(&exec, &p, CONF, &req()).unwrap_err();
    assert!(e.to_string().ends_with("timed out after 1500ms"), "{e}");
    assert_gone(&marker);
}

/// The process whose pid `marker` holds ends (SIGKILL is delivered asynchronously); a hang
/// guard far beyond that, short of its own `sleep 30`, tells a survivor from a slow death.
fn assert_gone(marker: &Path) {
    let pid: u32 = std::fs::read_to_string(marker).unwrap().trim().parse().unwrap();
    let gone = cni_runtime::procs::RecordedProcess::of(pid)
        .is_none_or(|p| p.wait_gone(Instant::now() + Duration::from_secs(20)));
    assert!(gone, "grandchild {pid} survived");
}

#[test]
fn finding_plugins() {
    let s = ScriptDir::new("find").unwrap();
    let p = s.script("bridge", "true").unwrap();
    let missing = PathBuf::from("/nonexistent-braid");
    assert_eq!(find_in_path("bridge", &[missing.clone(), s.path.clone()]).unwrap(), p);
    assert_eq!(find_in_path("", std::slice::from_ref(&s.path)).unwrap_err().to_string(), "no plugin name provided");
    assert_eq!(
        find_in_path("../bridge", std::slice::from_ref(&s.path)).unwrap_err().to_string(),
        "invalid plugin name: ../bridge"
    );
    assert_eq!(find_in_path("bridge", &[]).unwrap_err().to_string(), "no paths provided");
    let e = find_in_path("nope", &[missing, PathBuf::from("/b")]).unwrap_err();
    assert_eq!(e.to_string(), "failed to find plugin \"nope\" in path [/nonexistent-braid /b]");
    // A directory of the plugin's name is not a plugin.
    std::fs::create_dir(s.path.join("dir")).unwrap();
    assert!(find_in_path("dir", std::slice::from_ref(&s.path)).is_err());
    let e = RawExec::default().exec(Path::new("/nonexistent-braid/x"), b"", &[]).unwrap_err();
    assert!(matches!(e, InvokeError::Spawn { .. }), "{e}");
}

#[test]
fn version_probe_sends_dummies() {
    let s = ScriptDir::new("version").unwrap();
    let p = s
        .script(
            "v",
            r#"in=$(cat); [ "$CNI_NETNS" = dummy ] && [ "$CNI_IFNAME" = dummy ] && [ "$CNI_PATH" = dummy ] || exit 1
echo "{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"],\"sent\":$in}""#,
        )
        .unwrap();
    let info = invoke::version_info(&RawExec::default(), &p).unwrap();
    assert_eq!(info.supported_versions, vec!["0.4.0", "1.0.0"]);
    let old = s.script("old", r#"echo '{"code":4,"msg":"unknown CNI_COMMAND: VERSION"}'; exit 1"#).unwrap();
    assert_eq!(invoke::version_info(&RawExec::default(), &old).unwrap().supported_versions, vec!["0.1.0"]);
}

#[path = "../../cni-skel/tests/common/mod.rs"]
mod common;

fn vector() -> Value {
    common::vector_json("upstream/invoke-tests.json")
}

#[test]
fn upstream_invoke_tests() {
    let v = vector();
    for c in v["ExecPluginWithResult"].as_array().unwrap() {
        let conf = c["netconf"].as_str().unwrap();
        let version = cni_types::config::decode_version(conf.as_bytes()).unwrap();
        let r = invoke::decode_result(c["pluginStdout"].as_str().unwrap().as_bytes(), &version).unwrap();
        assert_eq!(r.version(), c["resultVersion"].as_str().unwrap());
    }
    let a = &v["ArgsAsEnv"]["args"];
    let pairs: Vec<String> = a["PluginArgs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{}={}", p[0].as_str().unwrap(), p[1].as_str().unwrap()))
        .collect();
    let r = Request {
        command: Command::parse(a["Command"].as_str().unwrap()).unwrap(),
        container_id: a["ContainerID"].as_str().unwrap().into(),
        netns: a["NetNS"].as_str().unwrap().into(),
        ifname: a["IfName"].as_str().unwrap().into(),
        args: pairs.join(";"),
        path: a["Path"].as_str().unwrap().into(),
    };
    let env: Vec<String> = r.env().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    for want in v["ArgsAsEnv"]["envContains"].as_array().unwrap() {
        assert!(env.contains(&want.as_str().unwrap().to_string()), "{want}");
    }
    for c in v["RawExecErrors"].as_array().unwrap() {
        if let Some(exit) = c.get("exit") {
            let e = invoke::failure(
                c["stdout"].as_str().unwrap().as_bytes(),
                c["stderr"].as_str().unwrap().as_bytes(),
                &format!("exit status {exit}"),
            );
            assert_eq!(e.to_string(), c["error"].as_str().unwrap());
        } else {
            let e = invoke::failure(br#"{"code":7,"msg":"banana"}"#, b"", "exit status 1");
            assert_eq!(e.to_string(), c["error"].as_str().unwrap());
        }
    }
    let gv = &v["GetVersionInfo"];
    assert_eq!(gv["stdinSent"], r#"{"cniVersion":"1.1.0"}"#);
    assert!(v["Delegate"]["notFoundErrorPrefix"].as_str().is_some_and(|p| find_in_path(
        "x",
        &[PathBuf::from("/none")]
    )
    .unwrap_err()
    .to_string()
    .starts_with(p)));
}

#[test]
fn a_plugin_printing_more_than_the_cap_on_stdout_fails_and_is_not_held_in_full() {
    let s = ScriptDir::new("flood").unwrap();
    // 17 MB of stdout, then success: the pipe is drained to the end (the child exits), a result
    // that large is refused. (The stderr cap: child_io's unit tests, without flooding this one's.)
    let p = s.script("flood", "cat >/dev/null; head -c 17000000 /dev/zero").unwrap();
    let e = invoke::add(&RawExec::default(), &p, CONF, &req()).unwrap_err();
    assert_eq!(
        e,
        InvokeError::Failed(format!("{} printed more than 16777216 bytes on stdout (exit status 0)", p.display()))
    );
    assert_eq!(cni_types::CniError::from(e).code, 999);
}

#[test]
fn the_callers_deadline_kills_like_a_timeout_and_is_code_11() {
    let s = ScriptDir::new("deadline").unwrap();
    let marker = s.path.join("grandchild.pid");
    let p = s.script("hang", &format!("sleep 30 & echo $! > {}; sleep 30", marker.display())).unwrap();
    // The deadline comes before the per-call timeout: it is what kills.
    let exec = RawExec { timeout: Some(Duration::from_secs(60)), ..RawExec::default() };
    let until = Some(Instant::now() + Duration::from_millis(1500));
    let e = exec.exec_until(&p, CONF, &req().env(), Watch { until, ..Watch::NONE }).unwrap_err();
    assert_eq!(e, InvokeError::DeadlinePassed { path: p.clone(), started: true });
    assert_eq!(e.to_string(), format!("{} was killed at the command's deadline", p.display()));
    assert_eq!(cni_types::CniError::from(e).code, 11);
    assert_gone(&marker);
    // A timeout that comes first is still a timeout (code 999).
    let exec = RawExec { timeout: Some(Duration::from_millis(200)), ..RawExec::default() };
    let e = exec.exec_until(
        &p,
        CONF,
        &req().env(),
        Watch { until: Some(Instant::now() + Duration::from_secs(60)), ..Watch::NONE },
    );
    assert!(matches!(e, Err(InvokeError::TimedOut { .. })), "{e:?}");
    // Once the deadline has passed nothing is started.
    let ran = s.path.join("ran");
    let q = s.script("quick", &format!("touch {}", ran.display())).unwrap();
    let spawned = std::cell::Cell::new(false);
    let watch = Watch { spawned: &|_| spawned.set(true), until: Some(Instant::now()) };
    let e = exec.exec_until(&q, CONF, &req().env(), watch).unwrap_err();
    assert_eq!(e, InvokeError::DeadlinePassed { path: q.clone(), started: false });
    assert_eq!(e.to_string(), format!("{} was not started: the command's deadline had passed", q.display()));
    assert!(!spawned.get() && !ran.exists());
}

fn start(exec: &RawExec, p: &Path, env: &[(String, String)]) -> invoke::Started {
    exec.start(p, env).unwrap_or_else(|e| panic!("{}: {e:?}", p.display()))
}

/// Whether process `pid`'s stdin (a pipe) holds nothing and its writer is still open: read
/// without blocking through `/proc/<pid>/fd/0`, it would block — no byte sent, no EOF.
fn stdin_unsent(pid: u32) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/0"))
        .unwrap();
    matches!(pipe.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Whether our child `pid` was reaped (its /proc entry is gone).
fn reaped(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// A script that, once its stdin is closed, copies it to `got` and prints a result.
fn copying(s: &ScriptDir, got: &Path) -> PathBuf {
    s.script(
        "copying",
        &format!(
            r#"all=$(cat); printf '%s' "$all" > '{}'; echo '{{"cniVersion":"1.0.0","ips":[{{"address":"198.18.0.3/24"}}]}}'"#,
            got.display()
        ),
    ).unwrap()
}

/// A started `copying` script (its scripts, where it copies its stdin, the process).
fn started_copying(tag: &str) -> (ScriptDir, PathBuf, invoke::Started) {
    let s = ScriptDir::new(tag).unwrap();
    let got = s.path.join("got");
    let p = copying(&s, &got);
    let started = start(&RawExec::default(), &p, &req().env());
    (s, got, started)
}

/// A plugin started ahead runs but has its configuration only from `finish`, which reports
/// its pid first and then works as `exec_until` does.
#[test]
fn a_started_plugin_is_sent_its_stdin_by_finish_after_its_pid_is_reported() {
    let s = ScriptDir::new("started").unwrap();
    let got = s.path.join("got");
    let p = copying(&s, &got);
    let env = req().env();
    let started = start(&RawExec::default(), &p, &env);
    let pid = started.pid().unwrap();
    assert_eq!(started.plugin(), p);
    assert_eq!(started.env(), env);
    assert!(stdin_unsent(pid), "it was sent something before finish");
    let reported = std::sync::Mutex::new(None);
    let report = |p| *reported.lock().unwrap() = Some((p, stdin_unsent(p)));
    let out = started.finish(CONF, Watch { spawned: &report, until: None }).unwrap();
    assert_eq!(*reported.lock().unwrap(), Some((pid, true)), "the pid, reported before anything was sent");
    assert_eq!(std::fs::read(&got).unwrap(), CONF);
    assert!(String::from_utf8_lossy(&out).contains("198.18.0.3/24"));
    assert!(reaped(pid));
}

/// Dropped without `finish`, a plugin started ahead is killed and reaped, never sent anything.
#[test]
fn a_started_plugin_dropped_unsent_is_killed_and_reaped() {
    let (_s, got, started) = started_copying("dropped");
    let pid = started.pid().unwrap();
    drop(started);
    assert!(reaped(pid), "pid {pid} was not reaped");
    assert!(!got.exists(), "it was sent a configuration");
}

/// A deadline passed before `finish` kills the plugin unsent: it did nothing.
#[test]
fn a_started_plugin_past_the_deadline_is_killed_unsent() {
    let (_s, got, started) = started_copying("late");
    let pid = started.pid().unwrap();
    let e = started.finish(CONF, Watch { spawned: &|_| panic!("reported"), until: Some(Instant::now()) }).unwrap_err();
    assert!(matches!(e, InvokeError::DeadlinePassed { started: false, .. }), "{e:?}");
    assert!(reaped(pid), "pid {pid} was not reaped");
    assert!(!got.exists(), "it was sent a configuration");
}

/// `started_like` tells a process started by one executor from what another would start: the
/// executor's own variables and its timeout count; a mismatch is the caller's cue to drop it
/// (killed unsent).
#[test]
fn a_started_plugin_knows_the_executor_it_was_started_by() {
    let exec = RawExec { timeout: Some(Duration::from_secs(5)), env: vec![("BRAID_DEPTH".into(), "1".into())] };
    let s = ScriptDir::new("like").unwrap();
    let got = s.path.join("got");
    let started = start(&exec, &copying(&s, &got), &req().env());
    assert!(started.started_like(&exec.clone()));
    let other_env = RawExec { env: vec![("BRAID_DEPTH".into(), "2".into())], ..exec.clone() };
    let other_timeout = RawExec { timeout: Some(Duration::from_secs(6)), ..exec.clone() };
    assert!(!started.started_like(&other_env) && !started.started_like(&other_timeout));
    let pid = started.pid().unwrap();
    drop(started);
    assert!(reaped(pid) && !got.exists());
}
