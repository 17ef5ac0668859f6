//! The CNI commands of the delegator, on top of the shared attach engine.

use crate::config::{Config, ResultMode};
use braid_attach::attach::{Attacher, Call};
use braid_attach::state::StateStore;
use cni_runtime::invoke::RawExec;
use cni_skel::log::Logger;
use cni_skel::{CmdArgs, Plugin};
use cni_types::merge::{merge, Attachment};
use cni_types::CniError;

/// The plugin.
pub struct Delegator;

fn store(cfg: &Config) -> Result<StateStore, CniError> {
    StateStore::open(&cfg.state_dir).map_err(|e| CniError::new(cni_types::error::IO_FAILURE, e.to_string()))
}

fn call(args: &CmdArgs, cfg: &Config) -> Call {
    Call {
        container_id: args.container_id.clone(),
        netns: args.netns.clone(),
        ifname: args.ifname.clone(),
        args: args.args.clone(),
        capability_args: cfg.conf.runtime_config_raw().and_then(|v| v.as_object().cloned()).unwrap_or_default(),
    }
}

fn logger(args: &CmdArgs, command: &str, cfg: Option<&Config>) -> Logger {
    let mut l = Logger::new("delegator", command, &args.container_id);
    if let Some(c) = cfg {
        l.configure(&c.conf);
    }
    l
}

/// Interface names already present in the container namespace.
fn existing_links(netns: &str) -> Vec<String> {
    cni_skel::netns::run_in(std::path::Path::new(netns), || {
        std::fs::read_to_string("/proc/thread-self/net/dev")
            .unwrap_or_default()
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next().map(|s| s.trim().to_string()))
            .collect::<Vec<_>>()
    })
    .unwrap_or_default()
}

impl Plugin for Delegator {
    fn about(&self) -> Option<String> {
        Some("braid delegator: attaches many networks in one ADD".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<cni_types::CniResult, CniError> {
        let cfg = Config::parse(&args.stdin_data, &args.ifname)?;
        let present = existing_links(&args.netns);
        if let Some((i, d)) = cfg.delegates.iter().enumerate().find(|(_, d)| present.contains(&d.ifname)) {
            return Err(CniError::new(
                cni_types::error::INVALID_NETWORK_CONFIG,
                format!("delegates[{i}] ({}): interface {} already exists in {}", d.name(), d.ifname, args.netns),
            ));
        }
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: store(&cfg)? };
        let mut log = logger(args, "ADD", Some(&cfg));
        let results =
            attacher.add(&call(args, &cfg), &cfg.delegates).inspect_err(|e| log.error(format_args!("{e}")))?;
        match cfg.result {
            ResultMode::Primary => Ok(results[0].to_latest()),
            ResultMode::Merged => {
                let atts: Vec<Attachment> = results
                    .iter()
                    .zip(&cfg.delegates)
                    .map(|(r, d)| Attachment { result: r, ifname: &d.ifname, sandbox: &args.netns })
                    .collect();
                let merged = merge(&atts);
                for w in &merged.warnings {
                    log.warn(format_args!("merge: {w}"));
                }
                Ok(merged.result)
            }
        }
    }

    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(&args.stdin_data, &args.ifname)?;
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: store(&cfg)? };
        let mut log = logger(args, "DEL", Some(&cfg));
        attacher.del(&call(args, &cfg), &cfg.delegates, &mut |m| log.error(format_args!("{m}")))
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(&args.stdin_data, &args.ifname)?;
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: store(&cfg)? };
        let mut log = logger(args, "CHECK", Some(&cfg));
        attacher.check(&call(args, &cfg), &mut |m| log.info(format_args!("{m}")))
    }

    fn gc(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(&args.stdin_data, "eth0")?;
        let valid = cfg.conf.valid_attachments().map_err(|e| CniError::new(cni_types::error::DECODING_FAILURE, e.0))?;
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: store(&cfg)? };
        attacher.gc(&cfg.delegates, &valid)
    }

    fn status(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(&args.stdin_data, "eth0")?;
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: store(&cfg)? };
        attacher.status(&cfg.delegates)
    }
}
