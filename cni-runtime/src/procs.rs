//! Finding and ending a plugin process that outlived the one that started it.
//!
//! A meta-plugin killed with SIGKILL leaves its running delegate behind: it has its own process
//! group (so that a timeout can kill what it spawned) and gets no signal. A later DEL must end
//! it before undoing its work, or the orphan finishes afterwards and leaves an attachment
//! nobody knows of. A pid alone could name a new process by then; with its start time (field 22
//! of `/proc/<pid>/stat`, `proc(5)`) it names exactly the one that was started.

use std::time::{Duration, Instant};

/// A process, named so that it cannot be confused with a later one of the same pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedProcess {
    /// Its pid, which is also its process group (`RawExec` starts plugins in their own).
    pub pid: u32,
    /// Its start time, in clock ticks since boot.
    pub start: u64,
}

/// Why [`RecordedProcess::kill_group`] did not end a process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KillError {
    /// The pid is no process group id (beyond `i32`).
    #[error(transparent)]
    Pid(#[from] std::num::TryFromIntError),
    /// It still ran when the wait was up.
    #[error("process {pid} survived SIGKILL for {wait:?}")]
    Survived {
        /// Its pid.
        pid: u32,
        /// How long it was waited for.
        wait: Duration,
    },
}

/// `(state, starttime)` from `/proc/<pid>/stat`, `None` when there is no such process.
fn stat(pid: u32) -> Option<(char, u64)> {
    // One read into a buffer that fits the line (about 300 bytes; `fs::read_to_string` would
    // fstat the file, which reports size 0, and read it in five growing steps).
    let mut text = String::with_capacity(1024);
    std::io::Read::read_to_string(&mut std::fs::File::open(format!("/proc/{pid}/stat")).ok()?, &mut text).ok()?;
    // The command name is in parentheses and may contain anything, so fields count from the
    // last ')': state is field 3, starttime field 22.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((fields.first()?.chars().next()?, fields.get(19)?.parse().ok()?))
}

impl RecordedProcess {
    /// The process with this pid as it runs now, if any.
    pub fn of(pid: u32) -> Option<RecordedProcess> {
        stat(pid).map(|(_, start)| RecordedProcess { pid, start })
    }

    /// Whether this very process still runs (a zombie has finished: nothing more it can do).
    pub fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|(state, start)| start == self.start && state != 'Z')
    }

    /// Waits until this process has ended on its own, or `until` passed; whether it ended. It
    /// need not be our child: its `/proc` entry is watched (naps from 1 ms to 20 ms).
    pub fn wait_gone(&self, until: Instant) -> bool {
        let mut nap = Duration::from_millis(1);
        while self.alive() {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep(nap.min(until - now));
            nap = (nap * 2).min(Duration::from_millis(20));
        }
        true
    }

    /// Kills its whole process group if it still runs, and waits (up to `wait`) until it has
    /// ended. Returns whether it was running; an error when it survived the wait.
    pub fn kill_group(&self, wait: Duration) -> Result<bool, KillError> {
        if !self.alive() {
            return Ok(false);
        }
        let pgid = i32::try_from(self.pid)?;
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::SIGKILL);
        let deadline = Instant::now() + wait;
        while self.alive() {
            if Instant::now() > deadline {
                return Err(KillError::Survived { pid: self.pid, wait });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_process_is_named_by_pid_and_start_time_and_its_group_killed() {
        let me = RecordedProcess::of(std::process::id()).unwrap();
        assert!(me.alive());
        assert!(!RecordedProcess { start: me.start + 1, ..me }.alive(), "another start time is another process");
        let mut child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let c = RecordedProcess::of(child.id()).unwrap();
        // Reaped by us, so wait from another thread while killing.
        let waiter = std::thread::spawn(move || child.wait());
        assert_eq!(c.kill_group(Duration::from_secs(5)), Ok(true));
        waiter.join().unwrap().unwrap();
        assert_eq!(c.kill_group(Duration::from_secs(1)), Ok(false));
    }

    #[test]
    fn a_process_that_ends_on_its_own_is_waited_for_one_that_does_not_is_not() {
        let mut quick = std::process::Command::new("sh")
            .args(["-c", "read x"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let q = RecordedProcess::of(quick.id()).unwrap();
        let mut slow = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let s = RecordedProcess::of(slow.id()).unwrap();
        // Not yet: its deadline has passed at once.
        assert!(!q.wait_gone(Instant::now()));
        drop(quick.stdin.take());
        // Once it has ended (reaped here), waiting returns true even with its deadline past;
        // the one still running is reported as not gone. No duration decides either answer.
        quick.wait().unwrap();
        assert!(!q.alive());
        assert!(q.wait_gone(Instant::now()));
        assert!(s.alive());
        assert!(!s.wait_gone(Instant::now()));
        let _ = slow.kill();
        let _ = slow.wait();
    }
}
