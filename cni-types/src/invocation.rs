//! One call of a plugin: the `CNI_*` parameters a runtime (or a meta-plugin) sets for it.
//!
//! The spec (§ "Parameters") passes these as environment variables; this is the one type that
//! carries them everywhere in braid — the skeleton's `CmdArgs` converts into it, and the
//! runtime crate builds a child's environment from it.

use crate::version::Command;

/// The parameters of one plugin call (the spec's `CNI_COMMAND`, `CNI_CONTAINERID`,
/// `CNI_NETNS`, `CNI_IFNAME`, `CNI_ARGS`, `CNI_PATH`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `CNI_COMMAND`.
    pub command: Command,
    /// `CNI_CONTAINERID` (empty for GC, STATUS, VERSION).
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_ARGS`, `;`-separated `K=V` pairs, as sent (see [`crate::args::load_args`]).
    pub args: String,
    /// `CNI_PATH`, `:`-separated (see [`Invocation::path_list`]).
    pub path: String,
}

impl Invocation {
    /// A call of `command` with every other parameter empty.
    pub fn new(command: Command) -> Invocation {
        Invocation {
            command,
            container_id: String::new(),
            netns: String::new(),
            ifname: String::new(),
            args: String::new(),
            path: String::new(),
        }
    }

    /// The same call with another command (DEL after a failed ADD, CHECK of what ADD did).
    pub fn with_command(&self, command: Command) -> Invocation {
        Invocation { command, ..self.clone() }
    }

    /// The variables to set in the child. Every one is set, empty or not, so that nothing
    /// of the caller's own environment leaks into the child by inheritance (Go's
    /// `invoke.Args.AsEnv` overrides the same six).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("CNI_COMMAND", self.command.as_str()),
            ("CNI_CONTAINERID", self.container_id.as_str()),
            ("CNI_NETNS", self.netns.as_str()),
            ("CNI_IFNAME", self.ifname.as_str()),
            ("CNI_ARGS", self.args.as_str()),
            ("CNI_PATH", self.path.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// `CNI_PATH` split on `:`, empty entries dropped (Go's `filepath.SplitList`).
    pub fn path_list(&self) -> Vec<std::path::PathBuf> {
        split_path(&self.path)
    }
}

/// `CNI_PATH` split on `:`, empty entries dropped (Go's `filepath.SplitList`).
pub fn split_path(path: &str) -> Vec<std::path::PathBuf> {
    path.split(':').filter(|p| !p.is_empty()).map(Into::into).collect()
}

/// `CNI_PATH` joined from directories.
pub fn join_path(paths: &[std::path::PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")
}
