//! Feeding a child its stdin and collecting its stdout and stderr on the calling thread, with a
//! deadline — one `poll(2)` loop instead of a thread per pipe. Plugins are exec'd on the path of
//! every pod start, several per ADD, so the threads' cost showed up in the benchmarks.

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::time::{Duration, Instant};

/// How long to keep reading after the child exited while something it spawned still holds
/// its pipes open (a daemon that inherited them): then what was read is what it printed.
const LINGER: Duration = Duration::from_millis(200);

/// The longest single wait, so an exited child is noticed while a grandchild holds the pipes.
const SLICE: Duration = Duration::from_millis(50);

/// The most kept of each of a child's outputs: the cap cni-skel's dispatcher puts on a
/// plugin's stdin (`MAX_STDIN`, 16 MiB). A result or an error object is a few kilobytes; a child
/// that prints more is broken, and must not make its caller hold everything in memory. What
/// comes beyond the cap is read and dropped, so the child never blocks on a full pipe.
pub const MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// What the child did.
#[derive(Debug)]
pub struct ChildOutput {
    /// Its exit status; `None` when the deadline passed first (it is still running).
    pub status: Option<ExitStatus>,
    /// What it printed on stdout, up to [`MAX_OUTPUT`] bytes.
    pub stdout: Vec<u8>,
    /// What it printed on stderr, up to [`MAX_OUTPUT`] bytes.
    pub stderr: Vec<u8>,
    /// How many bytes of stdout were dropped beyond the cap.
    pub stdout_dropped: u64,
    /// How many bytes of stderr were dropped beyond the cap.
    pub stderr_dropped: u64,
}

fn nonblocking(fd: impl AsFd) -> std::io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// One output pipe's bytes: kept up to `cap`, counted beyond.
struct Capped {
    kept: Vec<u8>,
    dropped: u64,
    cap: usize,
}

impl Capped {
    fn new(cap: usize) -> Capped {
        Capped { kept: Vec::new(), dropped: 0, cap }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.len()).min(bytes.len());
        self.kept.extend_from_slice(&bytes[..room]);
        self.dropped += (bytes.len() - room) as u64;
    }
}

/// Reads what is there; returns false at end of file (or on an error: the pipe is done).
fn drain(r: &mut impl Read, into: &mut Capped) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => into.push(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Writes what fits; returns false when done (all written, or the child closed its stdin).
fn feed(w: &mut ChildStdin, input: &[u8], written: &mut usize) -> bool {
    while *written < input.len() {
        match w.write(&input[*written..]) {
            Ok(0) => return false,
            Ok(n) => *written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // EPIPE: a child that does not read its stdin must not fail us.
            Err(_) => return false,
        }
    }
    false
}

/// A pidfd for the child (Linux 5.3+): readable once it has exited, so its exit can be waited
/// for in `poll` with a deadline instead of by napping. `None` on older kernels.
fn pidfd(child: &Child) -> Option<OwnedFd> {
    let pid = i32::try_from(child.id()).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and passes no memory; the child is not reaped
    // before we wait for it, so its pid cannot be reused meanwhile.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn poll_timeout(d: Duration) -> PollTimeout {
    PollTimeout::try_from(d.max(Duration::from_millis(1))).unwrap_or(PollTimeout::NONE)
}

/// Waits for the child's exit until `deadline`: on its pidfd when there is one, else with
/// short, growing naps (an exiting child is reapable microseconds after it closed its pipes).
fn wait_exit(
    child: &mut Child,
    pidfd: Option<&OwnedFd>,
    deadline: Option<Instant>,
) -> std::io::Result<Option<ExitStatus>> {
    let mut nap = Duration::from_micros(20);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        match pidfd {
            Some(fd) => {
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, deadline.map_or(PollTimeout::NONE, |d| poll_timeout(d - now))) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            None => {
                std::thread::sleep(deadline.map_or(nap, |d| nap.min(d - now)));
                nap = (nap * 2).min(Duration::from_millis(5));
            }
        }
    }
}

/// Waits for the child's exit until `deadline` (`None`: as long as it takes).
pub fn wait_until(child: &mut Child, deadline: Option<Instant>) -> std::io::Result<Option<ExitStatus>> {
    wait_exit(child, pidfd(child).as_ref(), deadline)
}

/// Feeds `input` to the child's stdin and collects its output (each up to [`MAX_OUTPUT`])
/// until it exits or `deadline`. The child must have been spawned with all three pipes.
pub fn communicate(child: &mut Child, input: &[u8], deadline: Option<Instant>) -> std::io::Result<ChildOutput> {
    communicate_capped(child, input, deadline, MAX_OUTPUT)
}

/// [`communicate`] with each output kept up to `cap` bytes.
pub fn communicate_capped(
    child: &mut Child,
    input: &[u8],
    deadline: Option<Instant>,
    cap: usize,
) -> std::io::Result<ChildOutput> {
    let mut stdin: Option<ChildStdin> = child.stdin.take();
    let mut stdout: Option<ChildStdout> = child.stdout.take();
    let mut stderr: Option<ChildStderr> = child.stderr.take();
    for fd in [stdin.as_ref().map(AsFd::as_fd), stdout.as_ref().map(AsFd::as_fd), stderr.as_ref().map(AsFd::as_fd)]
        .into_iter()
        .flatten()
    {
        nonblocking(fd)?;
    }
    let (mut out, mut err, mut written) = (Capped::new(cap), Capped::new(cap), 0);
    if let Some(w) = stdin.as_mut() {
        if !feed(w, input, &mut written) {
            stdin = None;
        }
    }
    let pidfd = pidfd(child);
    let mut exited: Option<(ExitStatus, Instant)> = None;
    while stdout.is_some() || stderr.is_some() {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(ChildOutput::new(None, out, err));
        }
        if exited.is_some_and(|(_, at)| now.duration_since(at) >= LINGER) {
            break;
        }
        let slice = deadline.map_or(SLICE, |d| (d - now).min(SLICE));
        let (ready_in, ready_out, ready_err, ready_exit) = {
            let mut fds = Vec::with_capacity(4);
            let mut slots = [None; 4];
            if let Some(w) = stdin.as_ref() {
                slots[0] = Some(fds.len());
                fds.push(PollFd::new(w.as_fd(), PollFlags::POLLOUT));
            }
            if let Some(r) = stdout.as_ref() {
                slots[1] = Some(fds.len());
                fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
            }
            if let Some(r) = stderr.as_ref() {
                slots[2] = Some(fds.len());
                fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
            }
            if let (Some(p), None) = (pidfd.as_ref(), exited) {
                slots[3] = Some(fds.len());
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, poll_timeout(slice)) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |slot: Option<usize>| slot.and_then(|i| fds[i].revents()).is_some_and(|r| !r.is_empty());
            (ready(slots[0]), ready(slots[1]), ready(slots[2]), ready(slots[3]))
        };
        if (ready_exit || !(ready_in || ready_out || ready_err)) && exited.is_none() {
            if let Some(status) = child.try_wait()? {
                exited = Some((status, Instant::now()));
            }
            continue;
        }
        if ready_in {
            if let Some(w) = stdin.as_mut() {
                if !feed(w, input, &mut written) {
                    stdin = None;
                }
            }
        }
        if ready_out {
            if let Some(r) = stdout.as_mut() {
                if !drain(r, &mut out) {
                    stdout = None;
                }
            }
        }
        if ready_err {
            if let Some(r) = stderr.as_mut() {
                if !drain(r, &mut err) {
                    stderr = None;
                }
            }
        }
    }
    drop(stdin);
    let status = match exited {
        Some((s, _)) => Some(s),
        None => wait_exit(child, pidfd.as_ref(), deadline)?,
    };
    Ok(ChildOutput::new(status, out, err))
}

impl ChildOutput {
    fn new(status: Option<ExitStatus>, out: Capped, err: Capped) -> ChildOutput {
        ChildOutput {
            status,
            stdout: out.kept,
            stderr: err.kept,
            stdout_dropped: out.dropped,
            stderr_dropped: err.dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn sh(script: &str) -> Child {
        Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_megabyte_round_trips_through_both_pipes() {
        let input: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut c = sh("cat; cat /dev/null >&2; printf oops >&2");
        let o = communicate(&mut c, &input, Some(Instant::now() + Duration::from_secs(20))).unwrap();
        assert!(o.status.unwrap().success());
        assert_eq!(o.stdout, input);
        assert_eq!(o.stderr, b"oops");
    }

    #[test]
    fn a_child_that_ignores_a_large_stdin_does_not_block_us() {
        let input = vec![b'x'; 4 * 1024 * 1024];
        let mut c = sh("echo done");
        let o = communicate(&mut c, &input, Some(Instant::now() + Duration::from_secs(20))).unwrap();
        assert!(o.status.unwrap().success());
        assert_eq!(o.stdout, b"done\n");
    }

    #[test]
    fn a_grandchild_holding_the_pipes_does_not_hold_us() {
        // The grandchild holds stdout and stderr open for a minute: waiting for them to close
        // would return only once it is gone. It is still there when communicate returns.
        let mut c = sh("sleep 60 & echo $!; echo hi");
        let o = communicate(&mut c, b"", Some(Instant::now() + Duration::from_secs(120))).unwrap();
        let text = String::from_utf8(o.stdout).unwrap();
        let grandchild: i32 = text.lines().next().unwrap().parse().unwrap();
        let alive = crate::procs::RecordedProcess::of(grandchild as u32).is_some_and(|p| p.alive());
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(grandchild), nix::sys::signal::SIGKILL);
        assert!(o.status.unwrap().success());
        assert_eq!(text.lines().nth(1), Some("hi"));
        assert!(alive, "communicate returned only once the grandchild {grandchild} was gone");
    }

    #[test]
    fn output_beyond_the_cap_is_read_and_dropped() {
        // 3 MiB on each pipe, a 1 MiB cap: the child is never blocked on a full pipe and exits.
        let mut c = sh("head -c 3145728 /dev/zero; head -c 3145728 /dev/zero >&2; echo end >&2");
        let o = communicate_capped(&mut c, b"", Some(Instant::now() + Duration::from_secs(60)), 1 << 20).unwrap();
        assert!(o.status.unwrap().success());
        assert_eq!((o.stdout.len(), o.stdout_dropped), (1 << 20, 2 << 20));
        assert_eq!((o.stderr.len(), o.stderr_dropped), (1 << 20, (2 << 20) + 4));
        let mut c = sh("printf small");
        let o = communicate_capped(&mut c, b"", Some(Instant::now() + Duration::from_secs(60)), 5).unwrap();
        assert_eq!((o.stdout.as_slice(), o.stdout_dropped), (&b"small"[..], 0));
    }

    #[test]
    fn the_deadline_leaves_the_child_running() {
        let mut c = sh("echo partial; sleep 60");
        let o = communicate(&mut c, b"", Some(Instant::now() + Duration::from_millis(300))).unwrap();
        assert!(o.status.is_none());
        assert_eq!(o.stdout, b"partial\n");
        let _ = c.kill();
        let _ = c.wait();
    }
}
