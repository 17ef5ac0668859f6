//! Running one plugin process and timing it, the way a runtime does: fresh process, CNI
//! variables, config on stdin, wait for the exit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One plugin call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The binary.
    pub plugin: PathBuf,
    /// `CNI_COMMAND`.
    pub command: &'static str,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_PATH`.
    pub path: String,
    /// stdin.
    pub stdin: Vec<u8>,
}

impl Call {
    /// The environment a runtime sets (nothing else is inherited but `PATH`).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CNI_COMMAND", self.command.to_string()),
            ("CNI_CONTAINERID", self.container_id.clone()),
            ("CNI_NETNS", self.netns.clone()),
            ("CNI_IFNAME", self.ifname.clone()),
            ("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAME=bench".to_string()),
            ("CNI_PATH", self.path.clone()),
            ("PATH", "/usr/sbin:/usr/bin:/sbin:/bin".to_string()),
        ]
    }

    /// Runs the call, timing spawn to exit; fails with the plugin's output when it fails.
    pub fn run(&self) -> Result<(Duration, Vec<u8>), String> {
        let start = Instant::now();
        let mut child = Command::new(&self.plugin)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.plugin.display()))?;
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(&self.stdin);
        }
        let out = child.wait_with_output().map_err(|e| format!("{}: {e}", self.plugin.display()))?;
        let took = start.elapsed();
        if !out.status.success() {
            return Err(format!(
                "{} {} failed: {}{}",
                name(&self.plugin),
                self.command,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok((took, out.stdout))
    }
}

/// A binary's file name.
pub fn name(p: &Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}
