//! The installer's main loop: binaries once, then the ConfigMap mirror and braid's conflist on
//! every tick (`--interval`) until SIGTERM/SIGINT, or once with `--once`.

use crate::error::InstallError;
use crate::metrics::Metrics;
use crate::mirror::Mirror;
use crate::options::Options;
use crate::owners::Owners;
use crate::{api, binaries, config, fsutil, log, log_changed, mirror, nad_mirror, primary, serve};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use std::os::fd::AsFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often a wait for the primary network is logged.
const WAIT_LOG_EVERY: Duration = Duration::from_secs(10);

/// SIGTERM and SIGINT, blocked and read from a signalfd: the installer is PID 1 of its
/// container, where signals with the default action are dropped, and it must stop at once
/// (leaving braid's conflist in place) when the kubelet stops it.
struct Signals(SignalFd);

impl Signals {
    fn new() -> Result<Signals, InstallError> {
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGTERM);
        mask.add(Signal::SIGINT);
        mask.thread_block().map_err(InstallError::Signals)?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(InstallError::Signals)?;
        Ok(Signals(fd))
    }

    /// Sleeps up to `d`; the signal's name when one arrived.
    fn wait(&self, d: Duration) -> Result<Option<&'static str>, InstallError> {
        let ms = i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(InstallError::Signals(e)),
        }
        match self.0.read_signal() {
            Ok(Some(info)) => Ok(Some(if info.ssi_signo == Signal::SIGINT as u32 { "SIGINT" } else { "SIGTERM" })),
            Ok(None) => Ok(None),
            Err(e) => Err(InstallError::Signals(e)),
        }
    }
}

fn source_dir(o: &Options) -> Result<PathBuf, InstallError> {
    if let Some(d) = &o.source_dir {
        return Ok(d.clone());
    }
    let exe = std::env::current_exe()
        .map_err(|e| InstallError::Source { path: PathBuf::from("/proc/self/exe"), source: e })?;
    Ok(exe.parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/")))
}

/// Runs the installer.
pub fn run(o: &Options) -> Result<(), InstallError> {
    if o.uninstall {
        return uninstall(o);
    }
    let signals = Signals::new()?;
    let metrics = Metrics::new(o.kubernetes_api);
    if let Some(addr) = o.metrics_addr {
        // First, so that /readyz answers (503) while the installer waits for the primary
        // network; a port that cannot be bound is tried again and never stops the install.
        serve::start(addr, metrics.clone())?;
    }
    if o.skip_binaries {
        log("not copying plugin binaries (--skip-binaries)");
    } else {
        binaries::install(&source_dir(o)?, &o.host(&o.cni_bin_dir), &o.binaries())?;
    }
    // The delegator's own directories, so that they exist before the first pod, whatever the
    // node's umask: its state 0700 (what it attached, for DEL alone); its status documents
    // 0755, as the delegator's README promises (each is 0644: what the pod's annotation shows
    // anyone who may read the pod, so a node agent need not be root to publish it).
    for (dir, mode) in [(&o.state_dir, 0o700), (&o.status_dir, 0o755)] {
        let path = o.host(dir);
        if !path.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(&path)
                .and_then(|()| {
                    // Exactly `mode`: the umask applied to the creation only narrows it.
                    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
                })
                .map_err(|e| InstallError::Config { path: path.clone(), source: e })?;
            log(&format!("created {} ({mode:04o})", path.display()));
        }
    }
    let conf_path = o.conf_path();
    let conf_dir = o.host(&o.cni_conf_dir);
    let explicit = o.primary.as_ref().map(|p| o.host(p));
    let networks = o.host(&o.networks_dir);
    let owners = Owners::default();
    let mut stop = None;
    if o.kubernetes_api {
        // Before either mirror writes: the files the NAD mirror recorded are its own from the
        // start, so the ConfigMap mirror's first pass (below) leaves them alone even though the
        // NAD mirror, on the API thread, has not opened yet.
        nad_mirror::load_record(&networks, &owners);
        // After the signal mask is set (the API thread inherits it: SIGTERM stays the main
        // loop's) and the directories exist (the status directory is watched).
        let agent = api::Agent::new(o, std::env::var(api::NODE_NAME_ENV).ok(), metrics.clone())?;
        // The DRA driver (--dra) runs on the API side's runtime and client.
        let dra = agent.dra.clone().map(crate::dra::tasks);
        stop = Some(api::start(agent, owners.clone(), dra)?);
    }
    let mut mirror = Mirror::default();
    let (mut mirror_msg, mut primary_msg, mut skipped_msg) = (None, None, None);
    let start = Instant::now();
    let mut last_wait_log: Option<Instant> = None;
    let mut configured = false;
    loop {
        // The state files the delegator's last DELs retired (braid_attach::state::retire):
        // unlinked here, off every DEL's path, so that deleted pods leave no state behind.
        braid_attach::state::sweep_retired(&o.host(&o.state_dir));
        if let Some(cm) = &o.configmap_dir {
            match mirror.sync(cm, &networks, &owners) {
                Ok(_) => mirror_msg = None,
                Err(e) if o.once => return Err(e),
                Err(e) => log_changed(&mut mirror_msg, format!("{e}; will retry")),
            }
        }
        let mut skipped = Vec::new();
        match primary::find(explicit.as_deref(), &conf_dir, &o.conf_file, &o.name, &mut skipped) {
            Ok(p) => {
                if !skipped.is_empty() {
                    log_changed(&mut skipped_msg, format!("passed over: {}", skipped.join("; ")));
                }
                let bytes = config::render(o, &p);
                let current = fsutil::read_opt(&conf_path).is_some_and(|cur| cur == bytes);
                let caps: Vec<&str> = p.capabilities.iter().map(String::as_str).collect();
                let what = format!(
                    "delegating to network {:?} ({}), cniVersion {}, its capabilities [{}]",
                    p.name,
                    p.path.display(),
                    p.cni_version,
                    caps.join(", ")
                );
                if !current {
                    fsutil::replace(&conf_path, &bytes, 0o644)
                        .map_err(|e| InstallError::Config { path: conf_path.clone(), source: e })?;
                    log(&format!("wrote {}: {what}", conf_path.display()));
                    primary_msg = Some(format!("{} is current: {what}", conf_path.display()));
                } else {
                    log_changed(&mut primary_msg, format!("{} is current: {what}", conf_path.display()));
                }
                configured = true;
                metrics.set_installed();
                if o.once {
                    return Ok(());
                }
            }
            Err(primary::NotFound(why)) if !configured => {
                let waited = start.elapsed();
                if !o.wait.is_zero() && waited >= o.wait {
                    let dir = explicit.clone().unwrap_or_else(|| conf_dir.clone());
                    return Err(InstallError::NoPrimary { dir, waited: o.wait.as_secs(), last: why });
                }
                if last_wait_log.is_none_or(|t| t.elapsed() >= WAIT_LOG_EVERY) {
                    let extra = if skipped.is_empty() {
                        String::new()
                    } else {
                        format!("; passed over: {}", skipped.join("; "))
                    };
                    log(&format!("waiting for the primary network ({} s so far): {why}{extra}", waited.as_secs()));
                    last_wait_log = Some(Instant::now());
                }
            }
            Err(primary::NotFound(why)) => log_changed(
                &mut primary_msg,
                format!("the primary network is gone ({why}); {} stays as it is", conf_path.display()),
            ),
        }
        // Waiting for the primary in --once mode polls too; a signal stops either mode.
        if let Some(sig) = signals.wait(o.interval)? {
            log(&format!("stopping on {sig}; {} stays in place (--uninstall removes it)", conf_path.display()));
            if let Some(s) = stop.take() {
                // Running hot-plug updates finish first: killed with the agent, a delegate cut
                // mid-write could leak what it held.
                s.stop();
            }
            return Ok(());
        }
    }
}

/// Removes braid's conflist first (the runtime stops calling braid), then the mirrored network
/// definitions, then the plugin binaries.
fn uninstall(o: &Options) -> Result<(), InstallError> {
    let conf_path = o.conf_path();
    if fsutil::remove(&conf_path).map_err(|e| InstallError::Config { path: conf_path.clone(), source: e })? {
        log(&format!("removed {}", conf_path.display()));
    }
    let networks = o.host(&o.networks_dir);
    mirror::remove_all(&networks)?;
    nad_mirror::remove_all(&networks).map_err(|e| InstallError::Networks { path: networks.clone(), source: e })?;
    if !o.skip_binaries {
        binaries::remove(&o.host(&o.cni_bin_dir), &o.binaries())?;
    }
    log("uninstalled");
    Ok(())
}
