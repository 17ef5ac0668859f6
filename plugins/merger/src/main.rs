//! `merger`: a chained plugin that attaches its own delegates (net1, net2, …) and merges their
//! results with `prevResult` into one result. See README.md for every key and the algorithm.

use braid_attach::{MetaCommand, PluginRules, SharedConfig};
use cni_skel::prelude::*;
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::merge::{check_expressible, merge, Attachment};

struct Merger;

/// The shared keys as the merger reads them: `delegates` may be absent, and they get the first
/// free `net<N>` (prevResult already owns `CNI_IFNAME`).
const RULES: PluginRules<'static> =
    PluginRules { plugin: "merger", delegates_optional: true, fixed_ifname: &|_, _| None };

/// The configuration, with the merger's own rule: no delegate may take the chain's interface.
fn parse(args: &CmdArgs) -> Result<SharedConfig, CniError> {
    let cfg = SharedConfig::parse(args, &RULES)?;
    if let Some((i, d)) = cfg.delegates.iter().enumerate().find(|(_, d)| !d.auto_ifname && d.ifname == args.ifname) {
        return Err(CniError::new(
            INVALID_NETWORK_CONFIG,
            format!(
                "delegates[{i}] ({}): interface {} belongs to the chain's own attachment (CNI_IFNAME)",
                d.name(),
                d.ifname
            ),
        ));
    }
    Ok(cfg)
}

impl Plugin for Merger {
    fn about(&self) -> Option<String> {
        Some("braid merger: attaches extra networks and merges every result into prevResult".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        let cfg = parse(args)?;
        let prev = cfg.conf.prev_result()?.ok_or_else(missing_prev)?;
        check_expressible(cfg.conf.version(), 1 + cfg.delegates.len())?;
        let mut m = MetaCommand::new(cfg, args, &RULES)?;
        let results = if m.config.delegates.is_empty() { Vec::new() } else { m.add()? };
        let mut atts = vec![Attachment { result: &prev, ifname: &args.ifname, sandbox: &args.netns }];
        atts.extend(results.iter().zip(&m.config.delegates).map(|(r, d)| Attachment {
            result: r,
            ifname: &d.ifname,
            sandbox: &args.netns,
        }));
        let mut merged = merge(&atts);
        for w in &merged.warnings {
            m.log.warn(format_args!("merge: {w}"));
        }
        let with_mtu = cni_types::version::Version::V1_1_0.reached_by(m.config.conf.version());
        m.fill_links(&mut merged.result, with_mtu)?;
        Ok(merged.result)
    }

    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = parse(args)?;
        if cfg.delegates.is_empty() {
            return Ok(());
        }
        MetaCommand::new(cfg, args, &RULES)?.del()
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        let cfg = parse(args)?;
        if cfg.conf.prev_result_raw().is_none() {
            return Err(missing_prev());
        }
        if cfg.delegates.is_empty() {
            return Ok(());
        }
        MetaCommand::new(cfg, args, &RULES)?.check()
    }

    fn gc(&self, args: &CmdArgs) -> Result<(), CniError> {
        MetaCommand::new(parse(args)?, args, &RULES)?.gc()
    }

    /// Ready when every delegate can run (`braid_attach::status`); without delegates, always.
    fn status(&self, args: &CmdArgs) -> Result<(), CniError> {
        braid_attach::status::status(args, &RULES)
    }
}

fn missing_prev() -> CniError {
    CniError::new(INVALID_NETWORK_CONFIG, "merger must be called as a chained plugin: prevResult is missing")
}

/// Plugins live for milliseconds and ship as static musl binaries, whose allocator hands every
/// freed block back to the kernel: keep small blocks instead (glibc's allocator keeps them
/// itself, so elsewhere the system's is used).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    std::process::exit(cni_skel::main(&Merger));
}
