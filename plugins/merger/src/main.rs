//! `merger`: a chained plugin that attaches its own delegates (net1, net2, …) and merges their
//! results with `prevResult` into one result. See README.md for every key and the algorithm.

use braid_attach::attach::{Attacher, Call, Delegate};
use braid_attach::state::StateStore;
use cni_runtime::invoke::RawExec;
use cni_skel::log::Logger;
use cni_skel::{CmdArgs, Plugin};
use cni_types::error::{DECODING_FAILURE, INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_types::merge::{check_expressible, merge, Attachment};
use cni_types::{CniError, NetConf};
use serde_json::Value;
use std::time::Duration;

struct Merger;

/// The merger's configuration.
struct Config {
    conf: NetConf,
    delegates: Vec<Delegate>,
    store: StateStore,
    timeout: Duration,
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, msg)
}

impl Config {
    fn parse(args: &CmdArgs) -> Result<Config, CniError> {
        let conf = NetConf::parse(&args.stdin_data).map_err(|e| CniError::new(DECODING_FAILURE, e.to_string()))?;
        let delegates = match conf.get("delegates") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.is_empty() => Vec::new(),
            Some(_) => braid_attach::delegates::parse(&conf, &|i| format!("net{}", i + 1))?,
        };
        if let Some((i, d)) = delegates.iter().enumerate().find(|(_, d)| d.ifname == args.ifname) {
            return Err(invalid(format!(
                "delegates[{i}] ({}): interface {} belongs to the chain's own attachment (CNI_IFNAME)",
                d.name(),
                d.ifname
            )));
        }
        let dir = braid_attach::delegates::state_dir(&conf, "/var/lib/cni/merger")?;
        let timeout = braid_attach::delegates::timeout(&conf)?;
        let store = StateStore::open(dir).map_err(|e| CniError::new(IO_FAILURE, e.to_string()))?;
        Ok(Config { conf, delegates, store, timeout })
    }

    fn call(&self, args: &CmdArgs) -> Call {
        Call {
            container_id: args.container_id.clone(),
            netns: args.netns.clone(),
            ifname: args.ifname.clone(),
            args: args.args.clone(),
            capability_args: self.conf.runtime_config_raw().and_then(|v| v.as_object().cloned()).unwrap_or_default(),
        }
    }

    fn logger(&self, args: &CmdArgs, command: &str) -> Logger {
        let mut l = Logger::new("merger", command, &args.container_id);
        l.configure(&self.conf);
        l
    }
}

impl Plugin for Merger {
    fn about(&self) -> Option<String> {
        Some("braid merger: attaches extra networks and merges every result into prevResult".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<cni_types::CniResult, CniError> {
        let cfg = Config::parse(args)?;
        let prev = cfg
            .conf
            .prev_result()
            .map_err(|e| CniError::new(DECODING_FAILURE, e.to_string()))?
            .ok_or_else(|| invalid("merger must be called as a chained plugin: prevResult is missing"))?;
        check_expressible(cfg.conf.version(), 1 + cfg.delegates.len()).map_err(|e| invalid(e.to_string()))?;
        let mut log = cfg.logger(args, "ADD");
        let results = if cfg.delegates.is_empty() {
            Vec::new()
        } else {
            let exec = RawExec { timeout: Some(cfg.timeout) };
            let attacher = Attacher { exec: &exec, paths: args.path_list(), store: cfg.store.clone() };
            attacher.add(&cfg.call(args), &cfg.delegates).inspect_err(|e| log.error(format_args!("{e}")))?
        };
        let mut atts = vec![Attachment { result: &prev, ifname: &args.ifname, sandbox: &args.netns }];
        atts.extend(results.iter().zip(&cfg.delegates).map(|(r, d)| Attachment {
            result: r,
            ifname: &d.ifname,
            sandbox: &args.netns,
        }));
        let merged = merge(&atts);
        for w in &merged.warnings {
            log.warn(format_args!("merge: {w}"));
        }
        Ok(merged.result)
    }

    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(args)?;
        if cfg.delegates.is_empty() {
            return Ok(());
        }
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: cfg.store.clone() };
        let mut log = cfg.logger(args, "DEL");
        attacher.del(&cfg.call(args), &cfg.delegates, &mut |m| log.error(format_args!("{m}")))
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(args)?;
        if cfg.conf.prev_result_raw().is_none() {
            return Err(invalid("merger must be called as a chained plugin: prevResult is missing"));
        }
        if cfg.delegates.is_empty() {
            return Ok(());
        }
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: cfg.store.clone() };
        let mut log = cfg.logger(args, "CHECK");
        attacher.check(&cfg.call(args), &mut |m| log.info(format_args!("{m}")))
    }

    fn gc(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(args)?;
        let valid = cfg.conf.valid_attachments().map_err(|e| CniError::new(DECODING_FAILURE, e.0))?;
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: cfg.store.clone() };
        attacher.gc(&cfg.delegates, &valid)
    }

    fn status(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = Config::parse(args)?;
        let exec = RawExec { timeout: Some(cfg.timeout) };
        let attacher = Attacher { exec: &exec, paths: args.path_list(), store: cfg.store.clone() };
        attacher.status(&cfg.delegates)
    }
}

/// Plugins live for milliseconds: keep small blocks instead of handing them back to the kernel.
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    std::process::exit(cni_skel::main(&Merger));
}
