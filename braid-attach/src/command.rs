//! One command of a braid meta-plugin, set up once for every command: the parsed
//! configuration, the state store (claimed for this plugin kind), the executor, the logger and
//! the runtime view of the call — handed to the engine ([`crate::attach`]).

use crate::attach::Attacher;
use crate::config::{PluginRules, SharedConfig};
use crate::deadline::Deadline;
use crate::nesting::{HELD_ENV, PLANS_ENV};
use crate::sandbox::PodNetns;
use crate::state::StateStore;
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke::RawExec;
use cni_skel::log::Logger;
use cni_skel::CmdArgs;
use cni_types::result::AnyResult;
use cni_types::version::Command;
use cni_types::CniError;
use std::path::{Path, PathBuf};

/// One command of a meta-plugin: its configuration, logger, executor and state, ready to run.
pub struct MetaCommand {
    /// The parsed configuration.
    pub config: SharedConfig,
    /// The call's logger (`logFile`/`logLevel` applied).
    pub log: Logger,
    /// The call as a runtime sees it: what every delegate call is built from.
    pub call: RuntimeConf,
    /// The pod namespace (`CNI_NETNS`), entered at most once for the whole command.
    pub pod: PodNetns,
    exec: RawExec,
    deadline: Deadline,
    paths: Vec<PathBuf>,
    store: StateStore,
    state_unusable: Option<CniError>,
    /// Set when `stateDir` belongs to another braid plugin (see [`crate::owner`]).
    foreign: Option<CniError>,
}

impl MetaCommand {
    /// Parses the configuration and opens the state store (code 5 when it cannot be).
    pub fn open(args: &CmdArgs, rules: &PluginRules<'_>) -> Result<MetaCommand, CniError> {
        MetaCommand::new(SharedConfig::parse(args, rules)?, args, rules)
    }

    /// Opens the state store for an already parsed (and by the plugin validated) configuration.
    pub fn new(config: SharedConfig, args: &CmdArgs, rules: &PluginRules<'_>) -> Result<MetaCommand, CniError> {
        let mut log = Logger::new(rules.plugin, args.command.as_str(), &args.container_id);
        log.configure(&config.conf);
        // DEL must release the delegates even when the state directory is unusable (replaced by
        // a symlink, not ours): it then works from the configuration.
        let (store, state_unusable) = match StateStore::open(&config.state_dir) {
            Ok(s) => (s, None),
            Err(e) if args.command == Command::Del => {
                (StateStore::unchecked(&config.state_dir), Some(CniError::from(e)))
            }
            Err(e) => return Err(e.into()),
        };
        let foreign = match &state_unusable {
            None => crate::owner::claim(&config.state_dir, rules.plugin)?,
            Some(_) => None,
        };
        let capability_args = config.conf.runtime_config_raw().and_then(|v| v.as_object().cloned()).unwrap_or_default();
        let call = RuntimeConf::from_invocation(&args.invocation, capability_args);
        crate::nesting::refuse_too_deep(rules.plugin)?;
        let env = vec![crate::nesting::delegate_depth()];
        let exec = RawExec { timeout: Some(config.timeout), env };
        let deadline = Deadline::new(config.started, config.deadline);
        let pod = PodNetns::new(&args.netns);
        Ok(MetaCommand {
            config,
            log,
            call,
            pod,
            exec,
            deadline,
            paths: args.path_list(),
            store,
            state_unusable,
            foreign,
        })
    }

    /// ADD every delegate (rolled back on failure); their results in order. Auto-named
    /// delegates get their `net<N>` first, under the pod namespace's lock (see
    /// [`crate::ifnames`]), held until the last delegate's ADD returned.
    pub fn add(&mut self) -> Result<Vec<AnyResult>, CniError> {
        self.refuse_foreign()?;
        let first = self.start_first();
        let names = crate::ifnames::assign(
            &mut self.pod,
            &mut self.config.delegates,
            Path::new(crate::ifnames::LOCK_DIR),
            &self.deadline,
        )?;
        self.exec = self.holding(names.held());
        // Started with exactly this executor's variables, or not used (killed unsent).
        let first = first.filter(|f| f.started_like(&self.exec));
        engine(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline).add_with_first(
            &self.call,
            &self.config.delegates,
            &mut self.log,
            first,
        )
    }

    /// An update of this live attachment ([`crate::update`]): its selected delegates brought to
    /// `wanted`, under the pod namespace's lock (taken first, as ADD takes it) and the
    /// container's; the added ones named once the removed ones are gone. Both locks stay held
    /// until the returned [`crate::update::Held`] is dropped: the caller finishes the sandbox's
    /// update under them.
    pub fn update(&mut self, wanted: Vec<crate::Delegate>) -> Result<crate::update::Held, CniError> {
        self.refuse_foreign()?;
        let lock = crate::ifnames::lock(&mut self.pod, Path::new(crate::ifnames::LOCK_DIR), &self.deadline)?;
        self.exec = self.holding(lock.held());
        let MetaCommand { exec, paths, store, config, deadline, pod, log, call, .. } = self;
        let mut name = |ds: &mut [crate::Delegate]| crate::ifnames::name(pod, ds, &lock);
        let (updated, container) =
            engine(exec, paths, store, config.parallel, *deadline).update(call, wanted, &mut name, log)?;
        Ok(crate::update::Held::new(updated, container, Some(lock)))
    }

    /// Undoes what the update `held` added ([`Attacher::roll_back_added`]), its locks still held.
    pub fn roll_back_added(&mut self, held: &mut crate::update::Held) -> Result<(), CniError> {
        engine(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline).roll_back_added(
            &self.call,
            &mut held.updated,
            &mut self.log,
        )
    }

    /// The executor for delegates that run while this command holds the pod namespace's lock
    /// (`held`: [`HELD_ENV`]'s value): nested braid plugins must not wait for it, and name
    /// their interfaces around the ones this command's plan chose ([`PLANS_ENV`]).
    fn holding(&self, held: &str) -> RawExec {
        let mut exec = self.exec.clone();
        exec.env.retain(|(k, _)| k != HELD_ENV && k != PLANS_ENV);
        exec.env.push((HELD_ENV.to_string(), held.to_string()));
        if let Ok(key) = Attacher::key(&self.call) {
            exec.env.push(crate::nesting::plans_for_delegates(&self.store.path(&key)));
        }
        exec
    }

    /// The executor for DEL's delegates: the pod namespace named in [`HELD_ENV`] as ADD's
    /// delegates have it. This DEL holds the sandbox's container lock while they run, and every
    /// update of the sandbox takes that lock after the namespace's (as ADD orders them): a nested
    /// plugin that waited for the namespace's lock here — vmtap's DEL does, to come before or
    /// after an update — could wait for an update that waits for this DEL. Under the container
    /// lock no update of this sandbox can run, so the wait guards nothing. A namespace that
    /// cannot be opened (gone) is named by no one.
    fn del_exec(&mut self) -> RawExec {
        let Ok((dev, ino)) = self.pod.identity() else { return self.exec.clone() };
        let held = crate::ifnames::held_with(&std::env::var(HELD_ENV).unwrap_or_default(), dev, ino);
        let mut exec = self.exec.clone();
        exec.env.retain(|(k, _)| k != HELD_ENV);
        exec.env.push((HELD_ENV.to_string(), held));
        exec
    }

    /// The first delegate's process started ahead ([`Attacher::start_first`]), before the
    /// naming lock too, with the environment its call will have (the lock this command is
    /// about to hold named in [`HELD_ENV`]).
    fn start_first(&mut self) -> Option<cni_runtime::invoke::Started> {
        let (dev, ino) = self.pod.identity().ok()?;
        let inherited = std::env::var(HELD_ENV).unwrap_or_default();
        let runner = self.holding(&crate::ifnames::held_with(&inherited, dev, ino));
        engine(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline).start_first(
            &runner,
            &self.call,
            &self.config.delegates,
        )
    }

    /// Gives every interface of `result` that lives in the pod namespace but lacks a MAC (the
    /// ones a merge synthesises for 0.1.0/0.2.0 delegates, or a delegate left out) its real MAC
    /// from the kernel, and with `mtu` its MTU: podman ≥ 4.1 refuses a sandbox interface
    /// without one (containers/common `libnetwork/cni/run.go`, `CNIResultToStatus`).
    pub fn fill_links(&mut self, result: &mut cni_types::CniResult, mtu: bool) -> Result<(), CniError> {
        if crate::sandbox::wants_links(result, mtu) {
            crate::sandbox::fill_links(result, &self.pod.links()?, mtu);
        }
        Ok(())
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
        self.exec = self.del_exec();
        let a = engine(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline);
        let deleted = match &self.state_unusable {
            Some(why) => a.del_without_state(&self.call, &self.config.delegates, why, &mut self.log),
            None => {
                let last = a.start_last(&self.call, &self.config.delegates);
                a.del_with_last(&self.call, &self.config.delegates, last, &mut self.log)
            }
        };
        if deleted.is_ok() {
            crate::ifnames::sweep(&self.call.netns, Path::new(crate::ifnames::LOCK_DIR));
        }
        deleted
    }

    /// CHECK every recorded delegate with its own result.
    pub fn check(&mut self) -> Result<(), CniError> {
        self.refuse_foreign()?;
        engine(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline)
            .check(&self.call, &mut self.log)
    }

    /// GC with the configuration's valid attachments.
    pub fn gc(&mut self) -> Result<(), CniError> {
        self.refuse_foreign()?;
        let valid = self.config.conf.valid_attachments()?;
        engine(&self.exec, &self.paths, &self.store, self.config.parallel, self.deadline).gc(
            &self.config.delegates,
            &valid,
            &mut self.log,
        )
    }
}

impl MetaCommand {
    fn refuse_foreign(&self) -> Result<(), CniError> {
        self.foreign.clone().map_or(Ok(()), Err)
    }
}

/// The engine for one command, every wait of it drawing on the command's `deadline`.
fn engine<'a>(
    exec: &'a RawExec,
    paths: &[PathBuf],
    store: &StateStore,
    parallel: bool,
    deadline: Deadline,
) -> Attacher<'a> {
    Attacher { exec, paths: paths.to_vec(), store: store.clone(), parallel, deadline }
}
