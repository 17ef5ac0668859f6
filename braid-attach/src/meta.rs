//! The setup every braid meta-plugin runs for every command, written once: parse the shared
//! keys (`delegates`, `stateDir`, `timeout`, `deadline`, `parallel`, `confDir`), open the state store, build the
//! executor, the logger and the runtime view of the call, and hand the commands to the engine.

use crate::attach::{Attacher, Delegate};
use crate::deadline::Deadline;
use crate::state::StateStore;
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke::RawExec;
use cni_skel::log::Logger;
use cni_skel::CmdArgs;
use cni_types::result::AnyResult;
use cni_types::{CniError, NetConf};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest `timeout` accepted, in seconds (a day: anything near it is a typo).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

/// How many braid meta-plugins enclose this one: each sets it one higher for its delegates.
pub const DEPTH_ENV: &str = "BRAID_DEPTH";

/// Deeper than this is a delegate that refers back to an enclosing network: refused at once,
/// instead of recursing until the timeouts end it.
pub const MAX_DEPTH: u32 = 8;

/// This process's nesting depth ([`DEPTH_ENV`], 0 when unset or unreadable).
pub fn depth() -> u32 {
    std::env::var(DEPTH_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// What a meta-plugin decides for itself about the shared keys.
pub struct Spec<'a> {
    /// The plugin's name: log lines and the default `stateDir` (`/var/lib/cni/<name>`).
    pub plugin: &'a str,
    /// Whether `delegates` may be absent or empty (the merger's may; the delegator's may not).
    pub delegates_optional: bool,
    /// The interface name of delegate `i` when its entry names none, given `CNI_IFNAME`;
    /// `None` lets braid choose the first free `net<N>` at ADD.
    pub fixed_ifname: &'a dyn Fn(usize, &str) -> Option<String>,
}

/// The shared configuration of a meta-plugin.
#[derive(Debug, Clone)]
pub struct MetaConfig {
    /// The plugin's own configuration, as received.
    pub conf: NetConf,
    /// `delegates`, resolved and validated, in order, with their interface names.
    pub delegates: Vec<Delegate>,
    /// `stateDir` (default `/var/lib/cni/<plugin>`).
    pub state_dir: PathBuf,
    /// `timeout`: seconds per delegate call (default 60).
    pub timeout: Duration,
    /// `deadline`: seconds for the whole command, rollback included (default
    /// [`crate::deadline::DEFAULT`]); see [`crate::deadline`].
    pub deadline: Duration,
    /// When the command started (when its configuration was parsed): the deadline counts from
    /// here.
    pub started: Instant,
    /// `parallel`: start every delegate's ADD at once (default false; NPWG §7.3 says
    /// attachments are not parallelised, so it is the operator's choice).
    pub parallel: bool,
    /// For DEL only: why `delegates` could not be read. DEL works from the recorded state and
    /// must not fail because today's configuration is broken (an ADD it refused recorded
    /// nothing); without a state there is then nothing to delete.
    pub delegates_error: Option<CniError>,
}

impl MetaConfig {
    /// Parses the call's configuration through [`CmdArgs::conf`].
    pub fn parse(args: &CmdArgs, spec: &Spec<'_>) -> Result<MetaConfig, CniError> {
        let started = Instant::now();
        let conf = args.conf()?;
        let absent = match conf.get("delegates") {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        };
        let mut delegates_error = None;
        let delegates = if absent && spec.delegates_optional {
            Vec::new()
        } else {
            // GC and STATUS carry no CNI_IFNAME; their delegates' names matter to nobody.
            let ifname = if args.ifname.is_empty() { "eth0" } else { args.ifname.as_str() };
            match crate::delegates::parse(&conf, &|i| (spec.fixed_ifname)(i, ifname)) {
                Ok(d) => d,
                Err(e) if args.command == cni_types::version::Command::Del => {
                    delegates_error = Some(e);
                    Vec::new()
                }
                Err(e) => return Err(e),
            }
        };
        let default_dir = format!("/var/lib/cni/{}", spec.plugin);
        let state_dir = cni_skel::keys::path(&conf, "stateDir", &default_dir)?;
        let timeout = cni_skel::keys::seconds(&conf, "timeout", Duration::from_secs(60), MAX_TIMEOUT_SECS)?;
        let deadline = cni_skel::keys::seconds(&conf, "deadline", crate::deadline::DEFAULT, MAX_TIMEOUT_SECS)?;
        let parallel = cni_skel::keys::flag(&conf, "parallel", false)?;
        Ok(MetaConfig { conf, delegates, state_dir, timeout, deadline, started, parallel, delegates_error })
    }
}

/// One command of a meta-plugin: its configuration, logger, executor and state, ready to run.
pub struct Meta {
    /// The parsed configuration.
    pub config: MetaConfig,
    /// The call's logger (`logFile`/`logLevel` applied).
    pub log: Logger,
    /// The call as a runtime sees it: what every delegate call is built from.
    pub call: RuntimeConf,
    exec: RawExec,
    deadline: Deadline,
    paths: Vec<PathBuf>,
    store: StateStore,
    state_unusable: Option<CniError>,
    /// Set when `stateDir` belongs to another braid plugin (see [`claim`]).
    foreign: Option<CniError>,
}

impl Meta {
    /// Parses the configuration and opens the state store (code 5 when it cannot be).
    pub fn open(args: &CmdArgs, spec: &Spec<'_>) -> Result<Meta, CniError> {
        Meta::new(MetaConfig::parse(args, spec)?, args, spec)
    }

    /// Opens the state store for an already parsed (and by the plugin validated) configuration.
    pub fn new(config: MetaConfig, args: &CmdArgs, spec: &Spec<'_>) -> Result<Meta, CniError> {
        let mut log = Logger::new(spec.plugin, args.command.as_str(), &args.container_id);
        log.configure(&config.conf);
        // DEL must release the delegates even when the state directory is unusable (replaced by
        // a symlink, not ours): it then works from the configuration.
        let (store, state_unusable) = match StateStore::open(&config.state_dir) {
            Ok(s) => (s, None),
            Err(e) if args.command == cni_types::version::Command::Del => {
                (StateStore::unchecked(&config.state_dir), Some(CniError::from(e)))
            }
            Err(e) => return Err(e.into()),
        };
        let foreign = match &state_unusable {
            None => claim(&config.state_dir, spec.plugin)?,
            Some(_) => None,
        };
        let capability_args = config.conf.runtime_config_raw().and_then(|v| v.as_object().cloned()).unwrap_or_default();
        let call = RuntimeConf::from_invocation(&args.invocation(), capability_args);
        let depth = depth();
        if depth >= MAX_DEPTH {
            return Err(CniError::new(
                cni_types::error::INVALID_NETWORK_CONFIG,
                format!(
                    "{} nested {depth} deep in braid plugins: a delegate refers back to an enclosing network",
                    spec.plugin
                ),
            ));
        }
        let env = vec![(DEPTH_ENV.to_string(), (depth + 1).to_string())];
        let exec = RawExec { timeout: Some(config.timeout), env };
        let deadline = Deadline::new(config.started, config.deadline);
        Ok(Meta { config, log, call, exec, deadline, paths: args.path_list(), store, state_unusable, foreign })
    }

    /// ADD every delegate (rolled back on failure); their results in order. Auto-named
    /// delegates get their `net<N>` first, under the pod namespace's lock (see
    /// [`crate::ifnames`]), held until the last delegate's ADD returned.
    pub fn add(&mut self) -> Result<Vec<AnyResult>, CniError> {
        self.refuse_foreign()?;
        let names = crate::ifnames::assign(
            &self.call.netns,
            &mut self.config.delegates,
            std::path::Path::new(crate::ifnames::LOCK_DIR),
            &self.deadline,
        )?;
        // Nested braid plugins must not wait for the lock held here on their behalf.
        self.exec.env.retain(|(k, _)| k != crate::ifnames::HELD_ENV);
        self.exec.env.push((crate::ifnames::HELD_ENV.to_string(), names.held().to_string()));
        bounded(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline).add(
            &self.call,
            &self.config.delegates,
            &mut self.log,
        )
    }

    /// Gives every interface of `result` that lives in the pod namespace but lacks a MAC (the
    /// ones a merge synthesises for 0.1.0/0.2.0 delegates, or a delegate left out) its real MAC
    /// from the kernel, and with `mtu` its MTU: podman ≥ 4.1 refuses a sandbox interface
    /// without one (containers/common `libnetwork/cni/run.go`, `CNIResultToStatus`).
    pub fn fill_links(&self, result: &mut cni_types::CniResult, mtu: bool) -> Result<(), CniError> {
        crate::sandbox::fill_links(result, &self.call.netns, mtu)
    }

    /// DEL what ADD recorded (or the configured delegates, without a usable state).
    pub fn del(&mut self) -> Result<(), CniError> {
        if let Some(e) = &self.foreign {
            // Our ADD was refused for the same reason: nothing here is ours to delete, and the
            // other plugin's state must not be touched.
            self.log.warn(format_args!("{e}; nothing of this plugin's to delete"));
            return Ok(());
        }
        if let Some(e) = &self.config.delegates_error {
            self.log.warn(format_args!("{e}; deleting what the state records"));
        }
        let a = bounded(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline);
        let deleted = match &self.state_unusable {
            Some(why) => a.del_without_state(&self.call, &self.config.delegates, why, &mut self.log),
            None => a.del(&self.call, &self.config.delegates, &mut self.log),
        };
        if deleted.is_ok() {
            crate::ifnames::sweep(&self.call.netns, std::path::Path::new(crate::ifnames::LOCK_DIR));
        }
        deleted
    }

    /// CHECK every recorded delegate with its own result.
    pub fn check(&mut self) -> Result<(), CniError> {
        self.refuse_foreign()?;
        bounded(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline)
            .check(&self.call, &mut self.log)
    }

    /// GC with the configuration's valid attachments.
    pub fn gc(&mut self) -> Result<(), CniError> {
        self.refuse_foreign()?;
        let valid = self.config.conf.valid_attachments()?;
        bounded(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline).gc(
            &self.config.delegates,
            &valid,
            &mut self.log,
        )
    }
}

impl Meta {
    fn refuse_foreign(&self) -> Result<(), CniError> {
        self.foreign.clone().map_or(Ok(()), Err)
    }
}

/// The file naming the plugin a state directory belongs to.
pub const OWNER_FILE: &str = ".braid-owner";

/// Claims `dir` for `plugin`, or says which other braid plugin owns it. The delegator and the
/// merger key their states alike (`<containerID>@<ifname>`), so two of them sharing a
/// `stateDir` in one chain would overwrite each other's record — and the second one's rollback
/// or DEL would undo the first one's delegates. So a directory serves one plugin kind.
///
/// The owner file is read as state is: never through a symlink, never blocking on a FIFO, at
/// most a few bytes.
fn claim(dir: &std::path::Path, plugin: &str) -> Result<Option<CniError>, CniError> {
    use cni_runtime::files::{read_regular, Links};
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    const MAX_OWNER: u64 = 64;
    let path = dir.join(OWNER_FILE);
    let io = |e: std::io::Error| CniError::new(cni_types::error::IO_FAILURE, format!("{}: {e}", path.display()));
    let read = || read_regular(&path, MAX_OWNER, Links::Refuse).map(|b| String::from_utf8_lossy(&b).into_owned());
    let owner = match read() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path);
            match created {
                Ok(mut f) => {
                    f.write_all(plugin.as_bytes()).map_err(io)?;
                    return Ok(None);
                }
                // Claimed at the same moment by someone else: read whom.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read().map_err(io)?,
                Err(e) => return Err(io(e)),
            }
        }
        Err(e) => return Err(io(e)),
    };
    Ok(foreign(dir, &owner, plugin))
}

/// The refusal of a `stateDir` whose owner file names another plugin kind.
fn foreign(dir: &std::path::Path, owner: &str, plugin: &str) -> Option<CniError> {
    let owner = owner.trim();
    if owner == plugin || owner.is_empty() {
        return None;
    }
    Some(CniError::new(
        cni_types::error::INVALID_NETWORK_CONFIG,
        format!(
            "stateDir {} holds the {owner}'s state: give the {plugin} a stateDir of its own (they key state alike and would overwrite each other)",
            dir.display()
        ),
    ))
}

/// Whether `dir` belongs to another braid plugin kind, read without claiming it (STATUS).
pub fn foreign_owner(dir: &std::path::Path, plugin: &str) -> Option<CniError> {
    let owner = std::fs::read_to_string(dir.join(OWNER_FILE)).ok()?;
    foreign(dir, &owner, plugin)
}

fn attacher<'a>(exec: &'a RawExec, paths: &[PathBuf], store: &StateStore, parallel: bool) -> Attacher<'a> {
    Attacher { exec, paths: paths.to_vec(), store: store.clone(), parallel, deadline: Deadline::none() }
}

/// [`attacher`], every wait of it drawing on the command's `deadline`.
fn bounded<'a>(
    exec: &'a RawExec,
    paths: &[PathBuf],
    store: &StateStore,
    parallel: bool,
    deadline: Deadline,
) -> Attacher<'a> {
    Attacher { deadline, ..attacher(exec, paths, store, parallel) }
}
