//! What a boot printed, read: the guest's `BRAID-` lines on the serial console (its NICs, errors,
//! each probe's outcome), and the verdict a test asserts.

use super::guest::{Guest, Probe};
use std::path::PathBuf;
use std::process::ExitStatus;

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The probe.
    pub probe: Probe,
    /// `Some(true|false)` as the guest reported it; `None` if it never did.
    pub ok: Option<bool>,
}

/// What a boot printed and what it means.
#[derive(Debug, Clone, Default)]
pub struct VmRun {
    /// The serial console (`\r` removed).
    pub console: String,
    /// QEMU's own stderr.
    pub stderr: String,
    /// The guest printed `BRAID-DONE`.
    pub done: bool,
    /// The hang guard ran out (QEMU was killed).
    pub timed_out: bool,
    /// QEMU's exit status; `None` when it had to be killed.
    pub exit: Option<ExitStatus>,
    /// The guest's interface name per NIC (`None`: no interface with that MAC).
    pub nics: Vec<Option<String>>,
    /// Per probe, in order.
    pub probes: Vec<ProbeOutcome>,
    /// `BRAID-ERROR` lines of the guest (a failed `insmod`, `ip` command, missing NIC).
    pub errors: Vec<String>,
    /// `ip addr` and the routes as the guest printed them after configuring its NICs.
    pub network: String,
    /// The boot's directory (already removed when the run is returned).
    pub dir: PathBuf,
}

impl VmRun {
    /// Reads the `BRAID-` lines of a console. Kernel messages may share a line with them (the
    /// serial console is shared), so a marker is looked for anywhere in a line.
    pub fn parse(guest: &Guest, console: &str) -> VmRun {
        let mut run = VmRun {
            console: console.to_string(),
            nics: vec![None; guest.nics.len()],
            probes: guest.probes.iter().map(|p| ProbeOutcome { probe: p.clone(), ok: None }).collect(),
            ..VmRun::default()
        };
        let mut in_show = false;
        for line in console.lines() {
            let Some(at) = line.find("BRAID-") else {
                if in_show {
                    run.network += line;
                    run.network.push('\n');
                }
                continue;
            };
            let mut words = line[at..].split_whitespace();
            match words.next() {
                Some("BRAID-DONE") => run.done = true,
                Some("BRAID-SHOW") => in_show = words.next() == Some("begin"),
                Some("BRAID-ERROR") => run.errors.push(words.collect::<Vec<_>>().join(" ")),
                Some("BRAID-NIC") => {
                    let (i, name) = (words.next().and_then(|w| w.parse::<usize>().ok()), words.next());
                    if let (Some(slot), Some(name)) = (i.and_then(|i| run.nics.get_mut(i)), name) {
                        *slot = Some(name.to_string());
                    }
                }
                Some("BRAID-PROBE") => {
                    let (k, verdict) = (words.next().and_then(|w| w.parse::<usize>().ok()), words.next());
                    if let Some(p) = k.and_then(|k| run.probes.get_mut(k)) {
                        p.ok = match verdict {
                            Some("ok") => Some(true),
                            Some("fail") => Some(false),
                            _ => None,
                        };
                    }
                }
                _ => {}
            }
        }
        run
    }

    /// Probe `k` reported ok.
    pub fn probe_ok(&self, k: usize) -> bool {
        self.probes.get(k).is_some_and(|p| p.ok == Some(true))
    }

    /// Everything went as asked: the guest finished, found every NIC, hit no error, and every
    /// probe reported ok. Otherwise prints the whole console and panics with its tail.
    pub fn assert_ok(&self) {
        let mut why = Vec::new();
        if !self.done {
            why.push(if self.timed_out {
                "hang guard ran out (QEMU killed)".into()
            } else {
                "no BRAID-DONE".to_string()
            });
        }
        for (i, n) in self.nics.iter().enumerate() {
            if n.is_none() {
                why.push(format!("nic {i} not found in the guest"));
            }
        }
        why.extend(self.errors.iter().map(|e| format!("guest error: {e}")));
        for (k, p) in self.probes.iter().enumerate() {
            if p.ok != Some(true) {
                why.push(format!("probe {k} ({}): {}", p.probe, p.ok.map_or("not reported", |_| "failed")));
            }
        }
        if !why.is_empty() {
            self.fail(&why.join("; "));
        }
    }

    /// Prints the whole console on stderr and panics with `why`, QEMU's stderr and the console's
    /// last 40 lines.
    pub fn fail(&self, why: &str) -> ! {
        eprintln!("==== VM console ====\n{}\n==== QEMU stderr ====\n{}\n====", self.console, self.stderr);
        panic!(
            "VM: {why}\nQEMU exit: {:?}; stderr: {}\nconsole tail:\n{}",
            self.exit,
            self.stderr.trim(),
            self.tail(40)
        );
    }

    /// The console's last `n` lines.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.console.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::guest::tests::guest;

    #[test]
    fn the_console_is_parsed_even_with_kernel_messages_on_the_same_line() {
        let console = "SeaBIOS\nBRAID-NIC 0 eth0 0a:58:c6:12:00:02\n[ 1.2] virtio_net: x BRAID-NIC 1 eth1 0a\n\
                       BRAID-SHOW begin\n1: lo: <LOOPBACK>\nBRAID-SHOW end\nBRAID-ERROR ip -6 route add x\n\
                       BRAID-PROBE 0 ok\nBRAID-PROBE 1 fail\nBRAID-DONE\n[ 2.2] reboot: Power down\n";
        let run = VmRun::parse(&guest(), console);
        assert!(run.done);
        assert_eq!(run.nics, [Some("eth0".to_string()), Some("eth1".to_string())]);
        assert_eq!(run.network, "1: lo: <LOOPBACK>\n");
        assert_eq!(run.errors, ["ip -6 route add x"]);
        assert_eq!(run.probes.iter().map(|p| p.ok).collect::<Vec<_>>(), [Some(true), Some(false), None]);
        assert!(run.probe_ok(0) && !run.probe_ok(1) && !run.probe_ok(2) && !run.probe_ok(3));
        let err = std::panic::catch_unwind(|| run.assert_ok()).unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("probe 1 (ping 2001:db8:1::1 from nic 1 (up to 1 tries)): failed"), "{msg}");
        assert!(msg.contains("probe 2") && msg.contains("not reported"), "{msg}");
        assert!(msg.contains("reboot: Power down"), "the tail is attached: {msg}");
    }
}
