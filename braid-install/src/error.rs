//! The installer's failures and their exit codes.

use std::path::PathBuf;

/// Exit code: a bad command line.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: no primary network appeared within `--wait`, or `--primary` is unusable.
pub const EXIT_NO_PRIMARY: u8 = 3;
/// Exit code: a plugin binary could not be installed (or removed).
pub const EXIT_BINARIES: u8 = 4;
/// Exit code: braid's conflist could not be written (or removed).
pub const EXIT_CONFIG: u8 = 5;
/// Exit code: the ConfigMap directory could not be read, or the network definitions not written.
pub const EXIT_NETWORKS: u8 = 6;
/// Exit code: `--kubernetes-api` without `NODE_NAME` or without usable API credentials.
pub const EXIT_KUBERNETES: u8 = 7;
/// Exit code: `--metrics-addr` cannot be bound.
pub const EXIT_METRICS: u8 = 8;
/// Exit code: the installer could not set up its signal handling.
pub const EXIT_INTERNAL: u8 = 1;

/// Everything that stops the installer. Bad network definitions are not here: they are logged
/// and skipped.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A bad command line (the text says which flag).
    #[error("{0} (see --help)")]
    Usage(String),
    /// No primary network was found within the wait bound.
    #[error("no primary network in {} after {waited} s ({last}); braid's configuration was not written", .dir.display())]
    NoPrimary {
        /// Where it was looked for (as the installer sees it).
        dir: PathBuf,
        /// The bound, in seconds.
        waited: u64,
        /// The last reason (a file that did not parse, none present).
        last: String,
    },
    /// A plugin binary's source is missing or unreadable.
    #[error("cannot read plugin binary {} (is --source-dir right?): {source}", .path.display())]
    Source {
        /// The source file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Writing, renaming or removing a plugin binary failed.
    #[error("cannot install {}: {source}", .path.display())]
    Binary {
        /// The destination file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Writing or removing braid's conflist failed.
    #[error("cannot write {}: {source}", .path.display())]
    Config {
        /// The conflist.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The ConfigMap directory could not be read, or networksDir not written.
    #[error("network definitions: {}: {source}", .path.display())]
    Networks {
        /// The directory or file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `--kubernetes-api` cannot start: the node's name or the API credentials are missing.
    /// (An API server that does not answer is not this: the agent keeps retrying, and pods
    /// keep starting from the mirror.)
    #[error("--kubernetes-api: {0}")]
    Kubernetes(String),
    /// `--metrics-addr`: its server's runtime or thread could not be started (a port that cannot
    /// be bound is retried on that thread, never this error).
    #[error("--metrics-addr {addr}: {source}")]
    Metrics {
        /// The address.
        addr: std::net::SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// Blocking SIGTERM/SIGINT or waiting for them failed.
    #[error("cannot set up SIGTERM/SIGINT handling: {0}")]
    Signals(#[source] nix::Error),
}

impl InstallError {
    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            InstallError::Usage(_) => EXIT_USAGE,
            InstallError::NoPrimary { .. } => EXIT_NO_PRIMARY,
            InstallError::Source { .. } | InstallError::Binary { .. } => EXIT_BINARIES,
            InstallError::Config { .. } => EXIT_CONFIG,
            InstallError::Networks { .. } => EXIT_NETWORKS,
            InstallError::Kubernetes(_) => EXIT_KUBERNETES,
            InstallError::Metrics { .. } => EXIT_METRICS,
            InstallError::Signals(_) => EXIT_INTERNAL,
        }
    }
}
