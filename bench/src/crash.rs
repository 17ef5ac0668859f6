//! The long crash run: the delegator and the merger SIGKILLed at random moments of an ADD —
//! sequential and parallel — each kill followed by DEL as a runtime sends it, then everything
//! that could leak looked for and named: links in the pod namespace, IP reservations, the fault
//! delegate's two-step reservation slots, state files, lock files, the pod namespace's lock.
//! One verdict per plugin and mode: no leftover at all. (The test suite forces each crash window
//! deterministically: `integration/tests/crash_windows.rs`; this run looks for the ones nobody
//! thought of.)

use crate::cases::World;
use crate::stats::Sample;
use crate::verdict::Verdict;
use cni_types::version::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

/// A small generator of kill moments (xorshift), seeded from the clock and printed, so a run
/// that finds something can be repeated.
struct Moments(u64);

impl Moments {
    fn next(&mut self, below: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let ns = below.as_nanos().max(1) as u64;
        Duration::from_nanos(self.0 % ns)
    }
}

/// One plugin and mode of the run.
struct Mode {
    plugin: &'static str,
    parallel: bool,
}

impl Mode {
    fn label(&self) -> String {
        format!("{} {}", self.plugin, if self.parallel { "parallel" } else { "sequential" })
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The stdin of one ADD or DEL: the plugin with three delegates — ptp, a fault delegate that
/// reserves a slot in two steps (as host-local does) and holds a link, ptp.
fn stdin(w: &World, mode: &Mode, state: &Path, slots: &Path) -> Value {
    let delegates = json!([
        {"cniVersion": "1.0.0", "name": "one", "type": "ptp", "ipam": w_ipam(w, 200)},
        {"cniVersion": "1.0.0", "name": "slow", "type": "braid-fault", "link": true, "reserve": slots, "reserveMs": 15, "holdMs": 10,
         "sleepOn": "ADD", "sleepMs": 10, "result": {"cniVersion": "1.0.0", "interfaces": [{"name": "x"}]}},
        {"cniVersion": "1.0.0", "name": "three", "type": "ptp", "ipam": w_ipam(w, 201)}
    ]);
    let mut conf = json!({"cniVersion": "1.0.0", "name": format!("crash-{}", mode.plugin), "type": mode.plugin,
        "stateDir": state, "parallel": mode.parallel, "logLevel": "error", "delegates": delegates});
    if mode.plugin == "merger" {
        conf["prevResult"] = json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": w.ctr.path()}]});
    }
    conf
}

fn w_ipam(w: &World, subnet: u8) -> Value {
    json!({"type": "host-local", "dataDir": w.dir.path().join("crash-ipam"),
           "ranges": [[{"subnet": format!("198.18.{subnet}.0/24")}]]})
}

/// Everything a round may have left, named.
fn leftovers(w: &World, state: &Path, slots: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for l in w.ctr.links().into_iter().filter(|l| l != "lo") {
        found.push(format!("link {l} in the pod namespace"));
    }
    for f in files(&w.dir.path().join("crash-ipam")) {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with("198.") {
            found.push(format!("IP reservation {name} ({:?})", std::fs::read_to_string(&f).unwrap_or_default()));
        }
    }
    for f in files(slots) {
        found.push(format!("reservation slot {} ({:?})", f.display(), std::fs::read_to_string(&f).unwrap_or_default()));
    }
    for f in files(state) {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.contains('@') || name.ends_with(".lock") || name.contains(".tmp") {
            found.push(format!("state file {}", f.display()));
        }
    }
    if let Ok(m) = std::fs::metadata(w.ctr.path()) {
        use std::os::unix::fs::MetadataExt;
        let lock = Path::new("/run/braid/netns-locks").join(format!("netns-{}-{}.lock", m.dev(), m.ino()));
        if lock.exists() {
            found.push(format!("the pod namespace's lock file {}", lock.display()));
        }
    }
    found
}

/// Removes what a round left, so the next round starts clean (after it was reported).
fn sweep(w: &World, state: &Path, slots: &Path) {
    for l in w.ctr.links().into_iter().filter(|l| l != "lo") {
        let _ = Process::new("ip").args(["-n", w.ctr.name(), "link", "del", &l]).output();
    }
    for dir in [w.dir.path().join("crash-ipam"), slots.to_path_buf(), state.to_path_buf()] {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::create_dir_all(slots);
}

/// One ADD killed after `after` (or finished before), reaped; then DEL through the normal path.
fn round(w: &World, mode: &Mode, id: &str, conf: &Value, after: Duration) -> Result<(), String> {
    let bin = w.bins.join(mode.plugin);
    let path = format!("{}:{}", w.bins.display(), w.reference.display());
    let netns = w.ctr.path().display().to_string();
    let ifname = "eth0";
    let bytes = serde_json::to_vec(conf).unwrap_or_default();
    let add_bytes = bytes.clone();
    let (bin2, path2, netns2, id2) = (bin.clone(), path.clone(), netns.clone(), id.to_string());
    w.in_host(move || {
        use std::io::Write;
        let mut child = Process::new(&bin2)
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", &id2)
            .env("CNI_NETNS", &netns2)
            .env("CNI_IFNAME", ifname)
            .env("CNI_ARGS", "IgnoreUnknown=1")
            .env("CNI_PATH", &path2)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin2.display()))?;
        if let Some(mut i) = child.stdin.take() {
            let _ = i.write_all(&add_bytes);
        }
        let until = Instant::now() + after;
        while Instant::now() < until {
            if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = child.kill();
        let _ = child.wait();
        Ok::<(), String>(())
    })??;
    let del = crate::run::Call {
        plugin: bin,
        req: cni_types::Invocation {
            command: Command::Del,
            container_id: id.to_string(),
            netns,
            ifname: ifname.to_string(),
            args: "IgnoreUnknown=1".to_string(),
            path,
        },
        stdin: bytes,
    };
    w.in_host(|| del.run()).map_err(|e| e.to_string())?.map(|_| ())
}

/// The run: `kills` rounds for each of the delegator and the merger, sequential and parallel.
pub fn crash_run(w: &World, kills: usize) -> Result<(Vec<Sample>, Vec<Verdict>), String> {
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
    crate::report::say(&format!("crash run: {kills} SIGKILLs per plugin and mode, seed {seed}"));
    let mut moments = Moments(seed);
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    let modes = [
        Mode { plugin: "delegator", parallel: false },
        Mode { plugin: "delegator", parallel: true },
        Mode { plugin: "merger", parallel: false },
        Mode { plugin: "merger", parallel: true },
    ];
    for (m, mode) in modes.iter().enumerate() {
        let state = w.dir.path().join(format!("crash-state-{m}"));
        let slots = w.dir.path().join(format!("crash-slots-{m}"));
        sweep(w, &state, &slots);
        let conf = stdin(w, mode, &state, &slots);
        // How long one whole ADD takes here: the kills are spread over 1.2 times that.
        let started = Instant::now();
        round(w, mode, &format!("crash-probe-{m}"), &conf, Duration::from_secs(60))?;
        let whole = started.elapsed();
        let mut sample = Sample::new("crash run", format!("{}: kill moment", mode.label()), "ms");
        let mut found: Vec<String> = Vec::new();
        for k in 0..kills {
            let after = moments.next(whole.mul_f64(1.2));
            sample.push(after);
            let id = format!("crash-{m}-{k}");
            if let Err(e) = round(w, mode, &id, &conf, after) {
                found.push(format!("round {k} (kill at {after:?}): DEL failed: {e}"));
            }
            for l in leftovers(w, &state, &slots) {
                found.push(format!("round {k} (kill at {after:?}): {l}"));
            }
            if !found.is_empty() && found.iter().any(|f| f.starts_with(&format!("round {k} "))) {
                sweep(w, &state, &slots);
            }
        }
        for f in &found {
            crate::report::say(&format!("crash run, {}: LEFT: {f}", mode.label()));
        }
        verdicts.push(Verdict::plain(
            format!("crash run, {}", mode.label()),
            if found.is_empty() {
                format!(
                    "{kills} SIGKILLs over an ADD of {:.0} ms, each then DEL: nothing left",
                    whole.as_secs_f64() * 1000.0
                )
            } else {
                format!("{} leftovers in {kills} SIGKILLs: {}", found.len(), found.join("; "))
            },
            "nothing left",
            found.is_empty(),
        ));
        samples.push(sample);
        sweep(w, &state, &slots);
    }
    Ok((samples, verdicts))
}
