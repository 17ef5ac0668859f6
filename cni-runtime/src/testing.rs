//! Test seams for code that runs plugins (feature `testing`): a scripted [`Exec`] that records
//! every call — Go keeps the same kind of fake apart in `pkg/invoke/fakes`.

use crate::invoke::{Exec, InvokeError};
use std::path::{Path, PathBuf};

/// One call recorded by [`FakeExec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeCall {
    /// The plugin binary.
    pub plugin: PathBuf,
    /// What it was sent on stdin.
    pub stdin: Vec<u8>,
    /// The environment overrides.
    pub env: Vec<(String, String)>,
}

/// A scripted [`Exec`] for unit tests: records every call and answers from a queue.
#[derive(Debug, Default)]
pub struct FakeExec {
    /// Every call, in order.
    pub calls: std::sync::Mutex<Vec<FakeCall>>,
    /// Answers, in order; when empty, calls succeed with empty stdout.
    pub replies: std::sync::Mutex<std::collections::VecDeque<Result<Vec<u8>, InvokeError>>>,
}

impl FakeExec {
    /// Queues an answer.
    pub fn reply(&self, r: Result<Vec<u8>, InvokeError>) {
        if let Ok(mut q) = self.replies.lock() {
            q.push_back(r);
        }
    }
}

impl Exec for FakeExec {
    fn exec(&self, plugin: &Path, stdin: &[u8], env: &[(String, String)]) -> Result<Vec<u8>, InvokeError> {
        if let Ok(mut c) = self.calls.lock() {
            c.push(FakeCall { plugin: plugin.to_path_buf(), stdin: stdin.to_vec(), env: env.to_vec() });
        }
        self.replies.lock().ok().and_then(|mut q| q.pop_front()).unwrap_or(Ok(Vec::new()))
    }

    fn find(&self, name: &str, _paths: &[PathBuf]) -> Result<PathBuf, InvokeError> {
        Ok(PathBuf::from("/fake").join(name))
    }
}
