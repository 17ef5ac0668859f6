//! Logging for plugins: never to stdout (that is the runtime's channel), one line per event,
//! each naming the plugin, command and container, to stderr and/or a file chosen by the
//! plugin's configuration (`logFile`, `logLevel`).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Severity, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed.
    Error,
    /// Something is off but work goes on.
    Warn,
    /// What was done.
    Info,
    /// Details for debugging.
    Debug,
}

impl Level {
    /// Parses `error`, `warn`/`warning`, `info`, `debug` (any case).
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.to_ascii_lowercase().as_str() {
            "error" => Level::Error,
            "warn" | "warning" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            _ => return None,
        })
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        })
    }
}

/// Opens (creating 0600) a log file for appending: never through a symlink (plugins run as root,
/// and a link planted in a log directory would make them append wherever it points), never
/// blocking on a FIFO (`O_NONBLOCK`; with no reader `open(2)` fails at once), and only a
/// regular file is written to.
fn open_log(path: &str) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// A logger bound to one invocation.
#[derive(Debug)]
pub struct Logger {
    plugin: String,
    command: String,
    container_id: String,
    level: Level,
    stderr: bool,
    file: Option<File>,
    memory: Option<Vec<String>>,
}

impl Logger {
    /// The logger of one call: every line names `plugin`, the command and the container, and
    /// the configuration's `logLevel`/`logFile` apply when stdin holds a configuration that
    /// sets them (an unusable one is reported on the first line, never fatal).
    pub fn for_call(plugin: &str, args: &crate::CmdArgs) -> Logger {
        let mut l = Logger::new(plugin, args.command.as_str(), &args.container_id);
        if let Ok(conf) = args.conf() {
            l.configure(conf);
        }
        l
    }

    /// A logger writing warnings and errors to stderr.
    pub fn new(plugin: &str, command: &str, container_id: &str) -> Logger {
        Logger {
            plugin: plugin.into(),
            command: command.into(),
            container_id: container_id.into(),
            level: Level::Warn,
            stderr: true,
            file: None,
            memory: None,
        }
    }

    /// A logger that keeps every line (all levels) in memory instead of writing it: for tests
    /// that assert what a component logged (see [`Logger::lines`]).
    pub fn recording(plugin: &str, command: &str) -> Logger {
        Logger { level: Level::Debug, stderr: false, memory: Some(Vec::new()), ..Logger::new(plugin, command, "") }
    }

    /// The lines a [`Logger::recording`] kept (empty for any other logger).
    pub fn lines(&self) -> &[String] {
        self.memory.as_deref().unwrap_or_default()
    }

    /// Applies `logLevel` and `logFile` from a plugin configuration. With a file, stderr only
    /// gets warnings and errors. Returns a message when a key is unusable (logged, not fatal:
    /// a bad log path must not take a pod's network down).
    pub fn configure(&mut self, conf: &cni_types::NetConf) -> Option<String> {
        let mut problem = None;
        if let Some(v) = conf.get("logLevel").and_then(|v| v.as_str()) {
            match Level::parse(v) {
                Some(l) => self.level = l,
                None => problem = Some(format!("logLevel {v:?} is not one of error, warn, info, debug")),
            }
        }
        if let Some(path) = conf.get("logFile").and_then(|v| v.as_str()).filter(|p| !p.is_empty()) {
            match open_log(path) {
                Ok(f) => self.file = Some(f),
                Err(e) => problem = Some(format!("logFile {path}: {e}")),
            }
        }
        if let Some(p) = &problem {
            self.log(Level::Warn, p);
        }
        problem
    }

    /// Sets the threshold.
    pub fn set_level(&mut self, level: Level) {
        self.level = level;
    }

    /// Writes one line if `level` passes the threshold. Anything printable is a message: a
    /// string, an error, or `format_args!(…)`.
    pub fn log(&mut self, level: Level, msg: impl fmt::Display) {
        if level > self.level {
            return;
        }
        let line = format!(
            "{} {} [{}] {} {}: {}\n",
            rfc3339_now(),
            level,
            self.plugin,
            self.command,
            if self.container_id.is_empty() { "-" } else { &self.container_id },
            msg
        );
        if let Some(m) = &mut self.memory {
            m.push(line.trim_end().to_string());
        }
        if let Some(f) = &mut self.file {
            let _ = f.write_all(line.as_bytes());
        }
        if self.stderr && (self.file.is_none() || level <= Level::Warn) {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    /// An error line.
    pub fn error(&mut self, msg: impl fmt::Display) {
        self.log(Level::Error, msg)
    }

    /// A warning line.
    pub fn warn(&mut self, msg: impl fmt::Display) {
        self.log(Level::Warn, msg)
    }

    /// An info line.
    pub fn info(&mut self, msg: impl fmt::Display) {
        self.log(Level::Info, msg)
    }

    /// A debug line.
    pub fn debug(&mut self, msg: impl fmt::Display) {
        self.log(Level::Debug, msg)
    }
}

/// UTC time as `2026-12-02T11:23:40.123Z`, without a date library.
fn rfc3339_now() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_shape() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }

    #[test]
    fn file_logging_respects_level() {
        let dir = std::env::temp_dir().join(format!("braid-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("plugin.log");
        let conf = cni_types::NetConf::parse(
            format!(r#"{{"name":"n","logFile":"{}","logLevel":"info"}}"#, path.display()).as_bytes(),
        )
        .unwrap();
        let mut l = Logger::new("test", "ADD", "ctr1");
        assert!(l.configure(&conf).is_none());
        l.info(format_args!("hello"));
        l.debug(format_args!("hidden"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("INFO [test] ADD ctr1: hello"), "{text}");
        assert!(!text.contains("hidden"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_log_file_that_is_a_fifo_or_a_symlink_is_reported_not_used() {
        let dir = std::env::temp_dir().join(format!("braid-log-planted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("link.log")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo.log"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // A FIFO with a reader: open(2) succeeds, but writing could block: refused all the same.
        let reader = OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(dir.join("fifo.log"));
        for (name, why) in [("link.log", "Too many levels of symbolic links"), ("fifo.log", "not a regular file")] {
            let conf = cni_types::NetConf::parse(
                format!(r#"{{"name":"n","logFile":"{}"}}"#, dir.join(name).display()).as_bytes(),
            )
            .unwrap();
            let mut l = Logger::recording("test", "ADD");
            let problem = l.configure(&conf).unwrap();
            assert!(problem.starts_with(&format!("logFile {}: ", dir.join(name).display())), "{problem}");
            assert!(problem.contains(why), "{problem}");
            l.error("still logged");
        }
        drop(reader);
        assert_eq!(std::fs::read(&target).unwrap(), b"");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
