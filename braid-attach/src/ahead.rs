//! Delegate processes started before their turn. A plugin acts only on the configuration it
//! reads from its stdin, so its process may exist — its runtime starting up — before the
//! engine may let it act: the first delegate's while the ADD takes its locks and makes its plan
//! durable ([`crate::Attacher::start_first`]), and, when delegates run one after another, the
//! next one's while the current one works. A Go plugin spends about a millisecond of its own
//! before it reads its stdin; one after another, a delegator used to add that millisecond per
//! delegate to what the runtime calling the same plugins directly would wait, and now hides it
//! (`docs/bench/NOTES.md`, the delegator's section).
//!
//! A delegate's *first process* is what its turn starts first: a single plugin's only one; a
//! conflist's first plugin on ADD and CHECK, its last on DEL (libcni runs a list's DEL in
//! reverse, `libcni/api.go` `DelNetworkList`) — the conflists the installer, NADs and
//! ConfigMaps give are where braid is deployed. Only that process is started ahead: the rest of
//! a list needs the result of the plugin before it ([`FirstStarted`] hands the chain the
//! process for its first call).
//!
//! A process started ahead is sent its configuration only in its turn, exactly as one started
//! then; one whose turn never comes (an earlier delegate failed, the deadline passed) is killed
//! unsent and reaped when dropped ([`Started`]). Should the engine itself be killed meanwhile,
//! the plugin reads an empty stdin and exits without acting: nothing needs recording before
//! it is sent something, and the engine records it (pid and start time) right before that.

use crate::bounded::Bounded;
use cni_runtime::invoke::{Env, Exec, Started, Watch};
use cni_runtime::InvokeError;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// The delegate processes waiting for their turn, by the delegate's index in the plan: the
/// next one's, and one started at the command's start for a later turn — DEL's of the primary
/// (the last in DEL's order), which waits while the selected networks' DELs run before it,
/// instead of being killed unsent when the next one's is started and started again in its turn.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    slot: Mutex<Vec<(usize, Started)>>,
}

impl Ahead {
    /// Holding `started`, the process of delegate `i`.
    pub(crate) fn with(i: usize, started: Option<Started>) -> Ahead {
        Ahead { slot: Mutex::new(started.map(|s| (i, s)).into_iter().collect()) }
    }

    /// Starts delegate `i`'s process (`plugin` with `env`) ahead with `exec`, unless `until`
    /// has passed or one for exactly that call is held already; one of `i` held for another
    /// call is killed unsent.
    pub(crate) fn start(
        &self,
        exec: &dyn Exec,
        i: usize,
        plugin: &Path,
        env: &[(String, String)],
        until: Option<Instant>,
    ) {
        let Ok(mut slot) = self.slot.lock() else { return };
        if slot.iter().any(|(j, p)| *j == i && p.plugin() == plugin && p.env() == env) {
            return;
        }
        if let Some(k) = slot.iter().position(|(j, _)| *j == i) {
            drop(slot.swap_remove(k));
        }
        let started = match until {
            Some(u) if Instant::now() >= u => None,
            _ => exec.start_ahead(plugin, env),
        };
        slot.extend(started.map(|p| (i, p)));
    }

    /// Delegate `i`'s process, if one was started ahead running `plugin` with exactly `env` —
    /// the call its turn makes now; one of delegate `i` started for another call is killed
    /// unsent. Another delegate's process stays held: in a parallel ADD each delegate's thread
    /// asks for its own, and the first one's must not be killed by another thread asking first.
    pub(crate) fn take(&self, i: usize, plugin: &Path, env: &[(String, String)]) -> Option<Started> {
        let held = self.slot.lock().ok().and_then(|mut s| {
            let k = s.iter().position(|(j, _)| *j == i)?;
            Some(s.swap_remove(k).1)
        })?;
        (held.plugin() == plugin && held.env() == env).then_some(held)
    }

    /// Delegate `i`'s process in its turn: the one started ahead for exactly this call, or one
    /// started now (so that the next delegate's can be started before this one is sent its
    /// configuration). `None` when `exec` cannot start ahead or `until` has passed: the turn
    /// then runs the plugin through `exec` as usual.
    pub(crate) fn take_or_start(
        &self,
        exec: &dyn Exec,
        i: usize,
        plugin: &Path,
        env: &[(String, String)],
        until: Option<Instant>,
    ) -> Option<Started> {
        self.take(i, plugin, env).or_else(|| {
            self.start(exec, i, plugin, env, until);
            self.take(i, plugin, env)
        })
    }

    /// Kills the waiting processes, if any, unsent: their turn will not come.
    pub(crate) fn clear(&self) {
        let old: Vec<(usize, Started)> = self.slot.lock().map(|mut s| std::mem::take(&mut *s)).unwrap_or_default();
        drop(old);
    }
}

/// An executor whose first call runs on the process started ahead for it, if it is that
/// process's call (same binary, same variables): a single plugin's call, or the first call of
/// a conflist run through [`cni_runtime::chain::Chain`]. Every other call, and the first one
/// when nothing was started for it, runs through the [`Bounded`] executor as it would without
/// it. A process never used is killed unsent when this is dropped (the chain refused the list
/// before running anything, or its first call was for another binary).
pub(crate) struct FirstStarted<'a> {
    exec: &'a Bounded<'a>,
    first: Cell<Option<Started>>,
}

impl<'a> FirstStarted<'a> {
    /// `exec`, its first call served by `first` when it fits.
    pub(crate) fn new(exec: &'a Bounded<'a>, first: Option<Started>) -> FirstStarted<'a> {
        FirstStarted { exec, first: Cell::new(first) }
    }
}

impl Exec for FirstStarted<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &Env) -> Result<Vec<u8>, InvokeError> {
        // Taken by the first call whatever it is: one that does not fit is killed unsent now.
        match self.first.take().filter(|s| s.plugin() == plugin && s.env() == env) {
            Some(s) => s.finish(stdin, Watch { spawned: self.exec.spawned, until: self.exec.until }),
            None => self.exec.exec(plugin, stdin, env),
        }
    }
    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        self.exec.find(name, paths)
    }
    fn reports_spawns(&self) -> bool {
        self.exec.reports_spawns()
    }
    fn start_ahead(&self, plugin: &Path, env: &Env) -> Option<Started> {
        self.exec.start_ahead(plugin, env)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use cni_runtime::invoke::RawExec;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Real processes (`cat`, which waits for its stdin), counted as they start.
    #[derive(Default)]
    struct Counting {
        raw: RawExec,
        starts: AtomicUsize,
    }

    impl Exec for Counting {
        fn exec(&self, plugin: &Path, stdin: &[u8], env: &Env) -> Result<Vec<u8>, InvokeError> {
            self.raw.exec(plugin, stdin, env)
        }
        fn start_ahead(&self, plugin: &Path, env: &Env) -> Option<Started> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            self.raw.start_ahead(plugin, env)
        }
    }

    fn env(ifname: &str) -> Vec<(String, String)> {
        vec![("CNI_COMMAND".into(), "DEL".into()), ("CNI_IFNAME".into(), ifname.into())]
    }

    /// DEL of a pod with a selected network (plan [primary, net1]): the primary's process
    /// started at DEL's start (delegate 0) waits while net1's turn starts its own and then
    /// starts "the next one" — the primary's, already held — and is the one used in its turn.
    #[test]
    fn a_process_held_for_a_later_turn_survives_the_turns_before_it_and_is_not_started_twice() {
        let exec = Counting::default();
        let cat = Path::new("/bin/cat");
        let primary = exec.start_ahead(cat, &env("eth0")).unwrap();
        let pid = primary.pid();
        let ahead = Ahead::with(0, Some(primary));
        // net1's turn: its own process, then the next one's (the primary's) ahead.
        let net1 = ahead.take_or_start(&exec, 1, cat, &env("net1"), None);
        assert!(net1.is_some());
        ahead.start(&exec, 0, cat, &env("eth0"), None);
        drop(net1);
        // The primary's turn: the process started first.
        let used = ahead.take(0, cat, &env("eth0")).expect("the primary's process is held");
        assert_eq!(used.pid(), pid, "the primary's process was killed unsent and started again");
        assert_eq!(exec.starts.load(Ordering::SeqCst), 2, "one process per turn");
        // One held for another call of the same delegate is replaced (killed unsent).
        ahead.start(&exec, 0, cat, &env("eth0"), None);
        ahead.start(&exec, 0, cat, &env("other"), None);
        assert!(ahead.take(0, cat, &env("eth0")).is_none());
        assert_eq!(exec.starts.load(Ordering::SeqCst), 4);
        ahead.clear();
    }
}
