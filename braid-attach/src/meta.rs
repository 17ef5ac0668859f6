//! The setup every braid meta-plugin runs for every command, written once: parse the shared
//! keys (`delegates`, `stateDir`, `timeout`, `confDir`), open the state store, build the
//! executor, the logger and the runtime view of the call, and hand the commands to the engine.

use crate::attach::{Attacher, Delegate};
use crate::state::StateStore;
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke::RawExec;
use cni_skel::log::Logger;
use cni_skel::CmdArgs;
use cni_types::result::AnyResult;
use cni_types::{CniError, NetConf};
use std::path::PathBuf;
use std::time::Duration;

/// The longest `timeout` accepted, in seconds (a day: anything near it is a typo).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

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
}

impl MetaConfig {
    /// Parses the call's configuration through [`CmdArgs::conf`].
    pub fn parse(args: &CmdArgs, spec: &Spec<'_>) -> Result<MetaConfig, CniError> {
        let conf = args.conf()?;
        let absent = match conf.get("delegates") {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        };
        let delegates = if absent && spec.delegates_optional {
            Vec::new()
        } else {
            // GC and STATUS carry no CNI_IFNAME; their delegates' names matter to nobody.
            let ifname = if args.ifname.is_empty() { "eth0" } else { args.ifname.as_str() };
            crate::delegates::parse(&conf, &|i| (spec.fixed_ifname)(i, ifname))?
        };
        let default_dir = format!("/var/lib/cni/{}", spec.plugin);
        let state_dir = cni_skel::keys::path(&conf, "stateDir", &default_dir)?;
        let timeout = cni_skel::keys::seconds(&conf, "timeout", Duration::from_secs(60), MAX_TIMEOUT_SECS)?;
        Ok(MetaConfig { conf, delegates, state_dir, timeout })
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
    paths: Vec<PathBuf>,
    store: StateStore,
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
        let store = StateStore::open(&config.state_dir)?;
        let capability_args = config.conf.runtime_config_raw().and_then(|v| v.as_object().cloned()).unwrap_or_default();
        let call = RuntimeConf::from_invocation(&args.invocation(), capability_args);
        let exec = RawExec { timeout: Some(config.timeout) };
        Ok(Meta { config, log, call, exec, paths: args.path_list(), store })
    }

    /// ADD every delegate (rolled back on failure); their results in order. Auto-named
    /// delegates get their `net<N>` first, under the pod namespace's lock (see
    /// [`crate::ifnames`]), held until the last delegate's ADD returned.
    pub fn add(&mut self) -> Result<Vec<AnyResult>, CniError> {
        let _names = crate::ifnames::assign(
            &self.call.netns,
            &mut self.config.delegates,
            std::path::Path::new(crate::ifnames::LOCK_DIR),
        )?;
        attacher(&self.exec, &self.paths, &self.store).add(&self.call, &self.config.delegates, &mut self.log)
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
        attacher(&self.exec, &self.paths, &self.store).del(&self.call, &self.config.delegates, &mut self.log)
    }

    /// CHECK every recorded delegate with its own result.
    pub fn check(&mut self) -> Result<(), CniError> {
        attacher(&self.exec, &self.paths, &self.store).check(&self.call, &mut self.log)
    }

    /// GC with the configuration's valid attachments.
    pub fn gc(&self) -> Result<(), CniError> {
        let valid = self.config.conf.valid_attachments()?;
        attacher(&self.exec, &self.paths, &self.store).gc(&self.config.delegates, &valid)
    }

    /// STATUS of every delegate.
    pub fn status(&self) -> Result<(), CniError> {
        attacher(&self.exec, &self.paths, &self.store).status(&self.config.delegates)
    }
}

fn attacher<'a>(exec: &'a RawExec, paths: &[PathBuf], store: &StateStore) -> Attacher<'a> {
    Attacher { exec, paths: paths.to_vec(), store: store.clone() }
}
