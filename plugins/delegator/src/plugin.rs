//! The CNI commands of the delegator, on top of the shared attach engine.

use crate::config::{result_mode, ResultMode, SPEC};
use braid_attach::{Meta, MetaConfig};
use cni_skel::{CmdArgs, Plugin};
use cni_types::merge::{merge, Attachment};
use cni_types::{CniError, CniResult};

/// The plugin.
pub struct Delegator;

impl Plugin for Delegator {
    fn about(&self) -> Option<String> {
        Some("braid delegator: attaches many networks in one ADD".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        let config = MetaConfig::parse(args, &SPEC)?;
        let mode = result_mode(&config.conf, config.delegates.len())?;
        let mut m = Meta::new(config, args, &SPEC)?;
        let results = m.add()?;
        let mut result = match mode {
            ResultMode::Primary => results[0].to_latest(),
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
                merged.result
            }
        };
        let with_mtu = cni_types::version::greater_than_or_equal_to(m.config.conf.version(), "1.1.0").unwrap_or(false);
        m.fill_links(&mut result, with_mtu)?;
        Ok(result)
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
