//! The plugin's view of its process: environment variables, stdin, stdout, stderr.
//!
//! The dispatcher reads everything through [`Environment`], so the whole Go-compatible
//! behaviour can be tested in-process with a [`TestEnv`], and a real plugin uses
//! [`ProcessEnv`].

use std::collections::HashMap;
use std::io::{self, Read, Write};

/// What the dispatcher may touch.
pub trait Environment {
    /// An environment variable; unset and non-UTF-8 values read as `None`.
    fn getenv(&self, key: &str) -> Option<String>;
    /// Standard input.
    fn stdin(&mut self) -> &mut dyn Read;
    /// Standard output: results and error objects only.
    fn stdout(&mut self) -> &mut dyn Write;
    /// Standard error: logs and the about text.
    fn stderr(&mut self) -> &mut dyn Write;
}

/// The real process environment.
pub struct ProcessEnv {
    stdin: io::Stdin,
    stdout: io::Stdout,
    stderr: io::Stderr,
}

impl ProcessEnv {
    /// The current process's environment and standard streams.
    pub fn new() -> ProcessEnv {
        ProcessEnv { stdin: io::stdin(), stdout: io::stdout(), stderr: io::stderr() }
    }
}

impl Default for ProcessEnv {
    fn default() -> Self {
        ProcessEnv::new()
    }
}

impl Environment for ProcessEnv {
    fn getenv(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }
    fn stdin(&mut self) -> &mut dyn Read {
        &mut self.stdin
    }
    fn stdout(&mut self) -> &mut dyn Write {
        &mut self.stdout
    }
    fn stderr(&mut self) -> &mut dyn Write {
        &mut self.stderr
    }
}

/// An in-memory environment for tests: set variables and stdin, then read what was written.
#[derive(Debug, Default, Clone)]
pub struct TestEnv {
    /// Environment variables.
    pub vars: HashMap<String, String>,
    /// Bytes served as stdin.
    pub stdin: io::Cursor<Vec<u8>>,
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr.
    pub stderr: Vec<u8>,
}

impl TestEnv {
    /// An environment with these variables and this stdin.
    pub fn new<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>, stdin: &[u8]) -> TestEnv {
        TestEnv {
            vars: vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            stdin: io::Cursor::new(stdin.to_vec()),
            ..TestEnv::default()
        }
    }

    /// stdout as text.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

impl Environment for TestEnv {
    fn getenv(&self, key: &str) -> Option<String> {
        self.vars.get(key).cloned()
    }
    fn stdin(&mut self) -> &mut dyn Read {
        &mut self.stdin
    }
    fn stdout(&mut self) -> &mut dyn Write {
        &mut self.stdout
    }
    fn stderr(&mut self) -> &mut dyn Write {
        &mut self.stderr
    }
}
