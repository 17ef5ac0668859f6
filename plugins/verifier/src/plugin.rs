//! The CNI commands: ADD and CHECK verify `prevResult`; DEL, GC and STATUS have nothing to undo.

use crate::config::{AddMode, Config};
use crate::inspect::{inspect, InspectError, Report, Settle};
use cni_skel::log::{Level, Logger};
use cni_skel::prelude::*;
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::version::Command;

/// Code of "the result and the namespace disagree" (`details` lists each mismatch).
pub const MISMATCH: u32 = 120;
/// Code of "the namespace could not be read" (missing namespace, netlink failure).
pub const CANNOT_INSPECT: u32 = 121;

/// The verifier plugin.
pub struct Verifier;

fn prev_result(cfg: &Config) -> Result<cni_types::CniResult, CniError> {
    let prev = cfg.conf.prev_result()?.ok_or_else(|| {
        CniError::new(INVALID_NETWORK_CONFIG, "verifier must be called as a chained plugin: prevResult is missing")
    })?;
    Ok(prev.to_latest())
}

impl From<InspectError> for CniError {
    /// Code 121: the namespace could not be read.
    fn from(e: InspectError) -> CniError {
        CniError::new(CANNOT_INSPECT, e.to_string())
    }
}

/// The one error for a failed verification: a summary in `msg`, each mismatch in `details`.
pub fn mismatch_error(report: &Report, netns: &str) -> Option<CniError> {
    let lines = report.mismatches();
    if lines.is_empty() {
        return None;
    }
    let n = lines.len();
    let msg = format!("{n} mismatch{} between result and namespace {netns}", if n == 1 { "" } else { "es" });
    Some(CniError::with_details(MISMATCH, msg, lines.join("; ")))
}

/// What a verification concluded.
struct Verdict {
    cfg: Config,
    result: cni_types::CniResult,
    /// A mismatch or a namespace that could not be read; already logged.
    failure: Option<CniError>,
}

/// Reads the configuration (errors here are the caller's, whatever the mode), then verifies.
fn verify(args: &CmdArgs) -> Result<Verdict, CniError> {
    let cfg = Config::of(args.shared_conf()?)?;
    let result = prev_result(&cfg)?;
    let mut log = Logger::new("verifier", args.command.as_str(), &args.container_id);
    log.configure(&cfg.conf);
    let adding = args.command == Command::Add;
    let settle = Settle { limit: cfg.settle, wait_for_pending: !adding };
    let failure = match inspect(&result, &args.netns, &args.ifname, cfg.options, settle) {
        Err(e) => Some(CniError::from(e)),
        Ok(report) => {
            for p in report.still_pending() {
                log.info(format_args!("still settling, counted as passed: {p}"));
            }
            let failure = mismatch_error(&report, &args.netns);
            if failure.is_none() {
                log.debug(format_args!("{} claims verified in {} reading(s)", report.items.len(), report.readings));
            }
            failure
        }
    };
    if let Some(e) = &failure {
        // Where ADD only warns, a failure is a warning in the log too.
        let level = if adding && cfg.add_mode == AddMode::Warn { Level::Warn } else { Level::Error };
        log.log(level, format_args!("{}{}{}", e.msg, if e.details.is_empty() { "" } else { ": " }, e.details));
    }
    Ok(Verdict { cfg, result, failure })
}

impl Plugin for Verifier {
    fn about(&self) -> Option<String> {
        Some(
            "braid verifier: proves with netlink that prevResult matches the container's namespace\n\
             operators' mode: verifier --netns PATH [--ifname NAME] < result.json"
                .into(),
        )
    }

    fn add(&self, args: &CmdArgs) -> Result<cni_types::CniResult, CniError> {
        let v = verify(args)?;
        match (v.failure, v.cfg.add_mode) {
            (Some(e), AddMode::Enforce) => Err(e),
            _ => Ok(v.result),
        }
    }

    fn del(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }

    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        match verify(args)?.failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
