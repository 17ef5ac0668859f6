//! Test seams for code that runs plugins (feature `testing`): a scripted [`Exec`] that records
//! every call — Go keeps the same kind of fake apart in `pkg/invoke/fakes`.

use crate::invoke::{Env, Exec, InvokeError, Watch};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One call recorded by [`FakeExec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeCall {
    /// The plugin binary.
    pub plugin: PathBuf,
    /// What it was sent on stdin.
    pub stdin: Vec<u8>,
    /// The environment overrides.
    pub env: Vec<(String, String)>,
    /// The deadline it was given ([`Exec::exec_until`]); `None` through plain [`Exec::exec`].
    pub until: Option<Instant>,
}

/// One scripted answer of [`FakeExec`].
#[derive(Debug)]
pub enum FakeReply {
    /// The plugin returns this.
    Answer(Result<Vec<u8>, InvokeError>),
    /// The plugin never returns: [`FakeExec`] waits for the call's deadline, then answers as
    /// `RawExec` does when it kills a child there ([`InvokeError::DeadlinePassed`]). A call
    /// without a deadline would wait forever: it fails at once instead, naming the mistake.
    Hang,
}

/// A scripted [`Exec`] for unit tests: records every call and answers from a queue.
#[derive(Debug, Default)]
pub struct FakeExec {
    /// Every call, in order.
    pub calls: std::sync::Mutex<Vec<FakeCall>>,
    /// Answers, in order; when empty, calls succeed with empty stdout.
    pub replies: std::sync::Mutex<std::collections::VecDeque<FakeReply>>,
}

impl FakeExec {
    /// Queues an answer.
    pub fn reply(&self, r: Result<Vec<u8>, InvokeError>) {
        self.push(FakeReply::Answer(r));
    }

    /// Queues a call that never returns by itself (see [`FakeReply::Hang`]).
    pub fn hang(&self) {
        self.push(FakeReply::Hang);
    }

    fn push(&self, r: FakeReply) {
        if let Ok(mut q) = self.replies.lock() {
            q.push_back(r);
        }
    }
}

impl Exec for FakeExec {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &Env) -> Result<Vec<u8>, InvokeError> {
        self.exec_until(plugin, stdin, env, Watch::NONE)
    }

    fn exec_until(&self, plugin: &Path, stdin: &[u8], env: &Env, watch: Watch<'_>) -> Result<Vec<u8>, InvokeError> {
        let until = watch.until;
        if let Ok(mut c) = self.calls.lock() {
            c.push(FakeCall { plugin: plugin.to_path_buf(), stdin: stdin.to_vec(), env: env.to_vec(), until });
        }
        let reply = self.replies.lock().ok().and_then(|mut q| q.pop_front());
        match reply {
            None => Ok(Vec::new()),
            Some(FakeReply::Answer(r)) => r,
            Some(FakeReply::Hang) => match until {
                Some(u) => {
                    std::thread::sleep(u.saturating_duration_since(Instant::now()));
                    Err(InvokeError::DeadlinePassed { path: plugin.to_path_buf(), started: true })
                }
                None => Err(InvokeError::Failed(format!(
                    "FakeExec: {} would hang forever: it was called without a deadline",
                    plugin.display()
                ))),
            },
        }
    }

    fn find(&self, name: &str, _paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        Ok(PathBuf::from("/fake").join(name))
    }
}

/// A directory of executable `sh` scripts standing in for plugins (real processes for
/// [`crate::RawExec`]), removed on drop.
#[derive(Debug)]
pub struct ScriptDir {
    /// The directory.
    pub path: PathBuf,
}

impl ScriptDir {
    /// A fresh directory under the system's temporary directory, named for `tag` and this
    /// process.
    pub fn new(tag: &str) -> std::io::Result<ScriptDir> {
        let path = std::env::temp_dir().join(format!("braid-scripts-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(ScriptDir { path })
    }

    /// An executable script `name`: `#!/bin/sh`, then `body`. Written by a child process: a
    /// file this process held open for writing could be inherited by a concurrent test's fork,
    /// and executing it would then fail with `ETXTBSY`.
    pub fn script(&self, name: &str, body: &str) -> std::io::Result<PathBuf> {
        let path = self.path.join(name);
        let status = std::process::Command::new("sh")
            .args(["-c", r#"printf '#!/bin/sh\n%s\n' "$BODY" > "$P" && chmod 755 "$P""#])
            .env("BODY", body)
            .env("P", &path)
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!("writing {}: sh {status}", path.display())));
        }
        Ok(path)
    }
}

impl Drop for ScriptDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
