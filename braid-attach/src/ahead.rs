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

/// The one delegate process waiting for its turn, by the delegate's index in the plan.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    slot: Mutex<Option<(usize, Started)>>,
}

impl Ahead {
    /// Holding `started`, the process of delegate `i`.
    pub(crate) fn with(i: usize, started: Option<Started>) -> Ahead {
        Ahead { slot: Mutex::new(started.map(|s| (i, s))) }
    }

    /// Starts delegate `i`'s process (`plugin` with `env`) ahead with `exec`, unless `until`
    /// has passed; any process held before is killed unsent.
    pub(crate) fn start(
        &self,
        exec: &dyn Exec,
        i: usize,
        plugin: &Path,
        env: &[(String, String)],
        until: Option<Instant>,
    ) {
        let started = match until {
            Some(u) if Instant::now() >= u => None,
            _ => exec.start_ahead(plugin, env),
        };
        let old = self.slot.lock().ok().and_then(|mut s| std::mem::replace(&mut *s, started.map(|p| (i, p))));
        drop(old);
    }

    /// Delegate `i`'s process, if one was started ahead running `plugin` with exactly `env` —
    /// the call its turn makes now; one of delegate `i` started for another call is killed
    /// unsent. Another delegate's process stays held: in a parallel ADD each delegate's thread
    /// asks for its own, and the first one's must not be killed by another thread asking first.
    pub(crate) fn take(&self, i: usize, plugin: &Path, env: &[(String, String)]) -> Option<Started> {
        let held = self.slot.lock().ok().and_then(|mut s| match s.take() {
            Some((j, p)) if j == i => Some(p),
            other => {
                *s = other;
                None
            }
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

    /// Kills the waiting process, if any, unsent: its turn will not come.
    pub(crate) fn clear(&self) {
        let old = self.slot.lock().ok().and_then(|mut s| s.take());
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
