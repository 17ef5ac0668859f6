//! The CNI commands of the delegator, on top of the shared attach engine.

use crate::config::{result_mode, ResultMode, SPEC};
use braid_attach::{Meta, MetaConfig};
use cni_skel::{CmdArgs, Plugin};
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::merge::{merge, Attachment};
use cni_types::{CniError, CniResult};

/// The plugin.
pub struct Delegator;

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

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        let config = MetaConfig::parse(args, &SPEC)?;
        let mode = result_mode(&config.conf, config.delegates.len())?;
        let present = existing_links(&args.netns);
        if let Some((i, d)) = config.delegates.iter().enumerate().find(|(_, d)| present.contains(&d.ifname)) {
            return Err(CniError::new(
                INVALID_NETWORK_CONFIG,
                format!("delegates[{i}] ({}): interface {} already exists in {}", d.name(), d.ifname, args.netns),
            ));
        }
        let mut m = Meta::new(config, args, &SPEC)?;
        let results = m.add()?;
        match mode {
            ResultMode::Primary => Ok(results[0].to_latest()),
            ResultMode::Merged => {
                let atts: Vec<Attachment> = results
                    .iter()
                    .zip(&m.config.delegates)
                    .map(|(r, d)| Attachment { result: r, ifname: &d.ifname, sandbox: &args.netns })
                    .collect();
                let merged = merge(&atts);
                for w in &merged.warnings {
                    m.log.warn(format_args!("merge: {w}"));
                }
                Ok(merged.result)
            }
        }
    }

    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        Meta::open(args, &SPEC)?.del()
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        Meta::open(args, &SPEC)?.check()
    }

    fn gc(&self, args: &CmdArgs) -> Result<(), CniError> {
        Meta::open(args, &SPEC)?.gc()
    }

    fn status(&self, args: &CmdArgs) -> Result<(), CniError> {
        Meta::open(args, &SPEC)?.status()
    }
}
