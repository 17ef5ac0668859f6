//! Delegate processes started before their turn. A plugin acts only on the configuration it
//! reads from its stdin, so its process may exist — its runtime starting up — before the
//! engine may let it act: the first delegate's while the ADD takes its locks and makes its plan
//! durable ([`crate::Attacher::start_first`]), and, when delegates run one after another, the
//! next one's while the current one works. A Go plugin spends about a millisecond of its own
//! before it reads its stdin; one after another, a delegator used to add that millisecond per
//! delegate to what the runtime calling the same plugins directly would wait, and now hides it
//! (`docs/bench/NOTES.md`, the delegator's section).
//!
//! A process started ahead is sent its configuration only in its turn, exactly as one started
//! then; one whose turn never comes (an earlier delegate failed, the deadline passed) is killed
//! unsent and reaped when dropped ([`Started`]). Should the engine itself be killed meanwhile,
//! the plugin reads an empty stdin and exits without acting: nothing needs recording before
//! it is sent something, and the engine records it (pid and start time) right before that.

use cni_runtime::invoke::{Exec, Started};
use std::path::Path;
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
    /// the call its turn makes now. Any other process held is killed unsent.
    pub(crate) fn take(&self, i: usize, plugin: &Path, env: &[(String, String)]) -> Option<Started> {
        let held = self.slot.lock().ok().and_then(|mut s| s.take())?;
        match held {
            (j, s) if j == i && s.plugin() == plugin && s.env() == env => Some(s),
            _ => None,
        }
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
