//! QEMU run in a pod's network namespace on a [`VmImage`] and a [`Guest`]: its console captured,
//! the boot bounded by the hang guard, the process killed by PID on every path.

use super::console::VmRun;
use super::guest::{mac, Guest};
use super::image::{newc_archive, write_file, VmImage};
use super::netns_path;
use crate::TempDir;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The QEMU binary (Debian's `qemu-system-x86`).
pub const QEMU: &str = "qemu-system-x86_64";

/// The kernel command line: the serial console, `panic=-1` (with `-no-reboot`, a guest whose
/// `/init` dies ends QEMU at once instead of hanging).
pub const KERNEL_CMDLINE: &str = "console=ttyS0 panic=-1 quiet";

/// QEMU's QMP socket in the boot's directory.
const QMP_SOCKET: &str = "qmp.sock";

/// How long QEMU gets to exit after the guest printed `BRAID-DONE` (it then runs `poweroff -f`).
const POWEROFF_GRACE: Duration = Duration::from_secs(30);

enum Event {
    Done,
    Eof,
}

/// A running QEMU (killed by PID and reaped on drop) and the console it is writing.
pub struct Vm {
    child: Child,
    console: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    events: mpsc::Receiver<Event>,
    readers: Vec<JoinHandle<()>>,
    guest: Guest,
    dir: TempDir,
}

impl fmt::Debug for Vm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vm").field("pid", &self.child.id()).field("dir", &self.dir).finish()
    }
}

impl Vm {
    /// Boots `guest` on `image` inside the network namespace `netns` (a path such as
    /// `/run/netns/<name>`, or a bare name) and waits for it: see [`Vm::wait`].
    pub fn boot(netns: impl AsRef<Path>, image: &VmImage, guest: &Guest) -> VmRun {
        Vm::start(netns, image, guest).wait()
    }

    /// Starts QEMU inside `netns` and returns at once (the guest then configures its NICs, runs
    /// its probes and powers off). Each NIC's tap must exist in `netns`.
    pub fn start(netns: impl AsRef<Path>, image: &VmImage, guest: &Guest) -> Vm {
        let netns = netns_path(netns.as_ref());
        let script = guest.script();
        let dir = TempDir::new("vm");
        let cfg = dir.path().join("cfg");
        std::fs::create_dir_all(cfg.join("braid")).unwrap_or_else(|e| panic!("{}: {e}", cfg.display()));
        write_file(&cfg.join("braid/guest.sh"), script.as_bytes(), 0o644);
        let mut initrd = image.initramfs.clone();
        // Archives are concatenated on 4-byte boundaries (zeros between them are skipped).
        initrd.resize(initrd.len().next_multiple_of(4), 0);
        initrd.extend(newc_archive(&cfg));
        let initrd_path = dir.path().join("initrd");
        write_file(&initrd_path, &initrd, 0o644);

        let mut args: Vec<String> = [
            "-accel",
            "tcg",
            "-m",
            "256",
            "-smp",
            "1",
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(["-kernel".into(), image.kernel.display().to_string()]);
        args.extend(["-initrd".into(), initrd_path.display().to_string()]);
        args.extend(["-append".into(), KERNEL_CMDLINE.into()]);
        // QMP, for tests that hot-plug NICs into the running guest ([`Vm::qmp`]); nothing is
        // sent on it otherwise.
        args.extend(["-qmp".into(), format!("unix:{},server=on,wait=off", dir.path().join(QMP_SOCKET).display())]);
        for (i, n) in guest.nics.iter().enumerate() {
            args.extend(["-netdev".into(), format!("tap,id=n{i},ifname={},script=no,downscript=no", n.tap)]);
            args.extend(["-device".into(), format!("virtio-net-pci,netdev=n{i},mac={},romfile=", mac(&n.mac))]);
        }
        let taps: Vec<String> = guest.nics.iter().map(|n| n.tap.clone()).collect();
        let spawned = cni_skel::netns::run_in(&netns, move || {
            // As root, QEMU would create a missing tap itself: a typo would boot a guest on a
            // disconnected link instead of failing here.
            for tap in &taps {
                let there = Command::new("ip").args(["link", "show", "dev", tap]).output();
                if !there.as_ref().is_ok_and(|o| o.status.success()) {
                    return Err(format!("tap {tap} does not exist: {there:?}"));
                }
            }
            Command::new(QEMU)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting {QEMU}: {e} (install qemu-system-x86)"))
        });
        let mut child = spawned
            .unwrap_or_else(|e| panic!("entering {}: {e}", netns.display()))
            .unwrap_or_else(|e| panic!("in {}: {e}", netns.display()));

        let console = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, events) = mpsc::channel();
        let mut readers = Vec::new();
        if let Some(mut out) = child.stdout.take() {
            let console = Arc::clone(&console);
            readers.push(std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut done = false;
                while let Ok(n) = out.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let Ok(mut c) = console.lock() else { break };
                    let from = c.len().saturating_sub(16);
                    c.extend_from_slice(&buf[..n]);
                    if !done && c[from..].windows(11).any(|w| w == b"BRAID-DONE\r" || w == b"BRAID-DONE\n") {
                        done = true;
                        let _ = tx.send(Event::Done);
                    }
                }
                let _ = tx.send(Event::Eof);
            }));
        }
        if let Some(mut err) = child.stderr.take() {
            let stderr = Arc::clone(&stderr);
            readers.push(std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = err.read_to_end(&mut all);
                if let Ok(mut s) = stderr.lock() {
                    *s = all;
                }
            }));
        }
        Vm { child, console, stderr, events, readers, guest: guest.clone(), dir }
    }

    /// QEMU's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The console so far (`\r` removed): to wait for a guest to reach a point while it runs.
    pub fn console(&self) -> String {
        self.console.lock().map(|v| String::from_utf8_lossy(&v).replace('\r', "")).unwrap_or_default()
    }

    /// Waits until the console shows `text` (the guest reached a point of its script). `Err`
    /// with the console's tail when QEMU's console ends first or the hang guard runs out.
    pub fn wait_for_console(&self, text: &str) -> Result<(), String> {
        let until = Instant::now() + self.guest.timeout;
        loop {
            let console = self.console();
            if console.contains(text) {
                return Ok(());
            }
            let ended = self.readers.first().is_some_and(|r| r.is_finished());
            if ended || Instant::now() >= until {
                let tail: Vec<&str> = console.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!("the console never showed {text:?}:\n{}", tail.join("\n")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs QMP `commands` (`{"execute": …, "arguments": …}`) in order on one session and
    /// returns their `return` values; with `event`, then waits (bounded by the hang guard) for
    /// that event on the same session — QEMU sends events only to sessions open when they
    /// happen, e.g. `DEVICE_DELETED` once the guest let go of a NIC `device_del` asked for.
    /// `Err` names the command QEMU refused and QEMU's error.
    pub fn qmp(&self, commands: &[serde_json::Value], event: Option<&str>) -> Result<Vec<serde_json::Value>, String> {
        use std::io::{BufRead, BufReader, Write};
        let path = self.dir.path().join(QMP_SOCKET);
        let stream = std::os::unix::net::UnixStream::connect(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        stream.set_read_timeout(Some(self.guest.timeout)).map_err(|e| e.to_string())?;
        let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut lines = BufReader::new(stream).lines();
        // The next answer, or the awaited event; other events are passed over.
        let mut next = || -> Result<serde_json::Value, String> {
            loop {
                let line = lines.next().ok_or("QMP: the session ended")?.map_err(|e| format!("QMP: {e}"))?;
                let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("QMP {line:?}: {e}"))?;
                if v.get("event").is_none() || event.is_some_and(|e| v["event"] == e) {
                    return Ok(v);
                }
            }
        };
        let greeting = next()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("QMP greeting: {greeting}"));
        }
        let capabilities = serde_json::json!({"execute": "qmp_capabilities"});
        let mut out = Vec::new();
        let mut seen = false;
        for (k, c) in std::iter::once(&capabilities).chain(commands).enumerate() {
            writeln!(writer, "{c}").map_err(|e| format!("QMP: {e}"))?;
            let answer = loop {
                let v = next()?;
                if v.get("event").is_some() {
                    seen = true;
                    continue;
                }
                break v;
            };
            match answer.get("return") {
                Some(r) if k > 0 => out.push(r.clone()),
                Some(_) => {}
                None => return Err(format!("QMP {c}: {}", answer["error"])),
            }
        }
        if let Some(e) = event {
            while !seen {
                let v = next().map_err(|why| format!("waiting for the QMP event {e}: {why}"))?;
                seen = v.get("event").is_some();
            }
        }
        Ok(out)
    }

    /// This boot's directory (the initramfs with its configuration), removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits for `BRAID-DONE` (then for QEMU to power off), for QEMU to exit, or for the hang
    /// guard; QEMU is killed if it is still running. Parses the console.
    pub fn wait(mut self) -> VmRun {
        // The first event ends the wait: BRAID-DONE (QEMU then powers off), or the console's
        // end (QEMU exited), or nothing before the hang guard.
        let first = self.events.recv_timeout(self.guest.timeout);
        let timed_out = matches!(first, Err(mpsc::RecvTimeoutError::Timeout));
        let grace = if timed_out { Duration::ZERO } else { POWEROFF_GRACE };
        let exit = self.exit_within(grace);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let text = |b: &Arc<Mutex<Vec<u8>>>| {
            b.lock().map(|v| String::from_utf8_lossy(&v).replace('\r', "")).unwrap_or_default()
        };
        let mut run = VmRun::parse(&self.guest, &text(&self.console));
        run.stderr = text(&self.stderr);
        run.timed_out = timed_out;
        run.exit = exit;
        run.dir = self.dir.path().to_path_buf();
        run
    }

    /// The exit status if QEMU exits within `grace`; killed (by PID) and reaped otherwise.
    fn exit_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + grace;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // std sends no signal to a child it already reaped (no PID reuse hazard).
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}
