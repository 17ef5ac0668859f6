//! The configuration every braid meta-plugin shares, parsed once per command: the keys
//! `delegates`, `stateDir`, `timeout`, `deadline`, `parallel` and `confDir`, and what each
//! plugin decides for itself about them.

use crate::delegate::Delegate;
use cni_skel::CmdArgs;
use cni_types::version::Command;
use cni_types::{CniError, NetConf};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest `timeout` accepted, in seconds (a day: anything near it is a typo).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;

/// What a meta-plugin decides for itself about the shared keys.
pub struct PluginRules<'a> {
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
pub struct SharedConfig {
    /// The plugin's own configuration, as received.
    pub conf: std::sync::Arc<NetConf>,
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

impl SharedConfig {
    /// Parses the call's configuration through [`CmdArgs::conf`].
    pub fn parse(args: &CmdArgs, rules: &PluginRules<'_>) -> Result<SharedConfig, CniError> {
        let started = Instant::now();
        let conf = args.shared_conf()?;
        let absent = match conf.get("delegates") {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        };
        let mut delegates_error = None;
        let delegates = if absent && rules.delegates_optional {
            Vec::new()
        } else {
            // GC and STATUS carry no CNI_IFNAME; their delegates' names matter to nobody.
            let ifname = if args.ifname.is_empty() { "eth0" } else { args.ifname.as_str() };
            match crate::delegates::parse(&conf, &|i| (rules.fixed_ifname)(i, ifname)) {
                Ok(d) => d,
                Err(e) if args.command == Command::Del => {
                    delegates_error = Some(e);
                    Vec::new()
                }
                Err(e) => return Err(e),
            }
        };
        let default_dir = format!("/var/lib/cni/{}", rules.plugin);
        let state_dir = cni_skel::keys::path(&conf, "stateDir", &default_dir)?;
        let timeout = cni_skel::keys::seconds(&conf, "timeout", Duration::from_secs(60), MAX_TIMEOUT_SECS)?;
        let deadline = cni_skel::keys::seconds(&conf, "deadline", crate::deadline::DEFAULT, MAX_TIMEOUT_SECS)?;
        let parallel = cni_skel::keys::flag(&conf, "parallel", false)?;
        Ok(SharedConfig { conf, delegates, state_dir, timeout, deadline, started, parallel, delegates_error })
    }
}
