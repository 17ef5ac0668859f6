//! The executor every delegate runs through: a deadline on whatever it starts, and every process
//! it starts reported (so a crash-safe state names it). Its own module so that the engine's
//! parts that run delegates — [`crate::attach`], [`crate::ahead`], [`crate::status`] — all
//! depend on it, and none of them on another for it.

use cni_runtime::invoke::{Exec, Started, Watch};
use cni_runtime::InvokeError;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// An [`Exec`] that kills what it starts at `until` at the latest (the command's deadline, or
/// its ADD part) and reports every process it starts to `spawned`: whatever runs a delegate —
/// one plugin, or a conflist through [`cni_runtime::chain::Chain`] — runs it through this.
pub(crate) struct Bounded<'a> {
    pub(crate) inner: &'a dyn Exec,
    pub(crate) spawned: &'a dyn Fn(u32),
    pub(crate) until: Option<Instant>,
}

impl Exec for Bounded<'_> {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        self.inner.exec_until(plugin, stdin, env, Watch { spawned: self.spawned, until: self.until })
    }
    fn find(&self, name: &str, paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        self.inner.find(name, paths)
    }
    fn reports_spawns(&self) -> bool {
        self.inner.reports_spawns()
    }
    fn start_ahead(&self, plugin: &Path, env: &[(String, String)]) -> Option<Started> {
        self.inner.start_ahead(plugin, env)
    }
}
