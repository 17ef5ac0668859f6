//! One verification run: read the namespaces, compare, and retry until the kernel has settled
//! or the settle time is up. Shared by the CNI commands and the operators' mode.

use crate::kernel::{self, KernelError, Snapshot};
use crate::verify::{self, Item, Options, Subject};
use cni_skel::netns::{self, NetnsError};
use std::path::Path;
use std::time::{Duration, Instant};

/// The pause between two readings while the namespace settles.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Why a namespace could not be inspected at all.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The container namespace cannot be opened or entered.
    #[error(transparent)]
    Netns(NetnsError),
    /// Netlink failed inside the container namespace.
    #[error("cannot read namespace {0}: {1}")]
    Container(String, #[source] KernelError),
    /// Netlink failed in the plugin's own namespace.
    #[error("cannot read the plugin's own namespace: {0}")]
    Host(#[source] KernelError),
}

/// What one run found.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every checked claim, with the finding of the last reading.
    pub items: Vec<Item>,
    /// How many readings were taken (1 unless the namespace was settling).
    pub readings: u32,
}

impl Report {
    /// The failing items as lines.
    pub fn mismatches(&self) -> Vec<String> {
        verify::mismatches(&self.items)
    }

    /// Items still settling when reading stopped (counted as passed).
    pub fn still_pending(&self) -> Vec<String> {
        self.items.iter().filter(|i| i.is_pending()).map(ToString::to_string).collect()
    }
}

/// How long to keep reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// Up to how long to retry.
    pub limit: Duration,
    /// Retry for pending items too (IPv6 addresses in DAD), to see DAD succeed or fail. ADD does
    /// not: a tentative address is configured, and waiting for DAD would delay the pod start.
    pub wait_for_pending: bool,
}

/// Verifies `result` against namespace `netns_path` (and the plugin's own namespace for
/// host-side interfaces), retrying while anything mismatches (or is pending, if asked), until
/// the settle limit.
pub fn inspect(
    result: &cni_types::CniResult,
    netns_path: &str,
    ifname: &str,
    options: Options,
    settle: Settle,
) -> Result<Report, InspectError> {
    let deadline = Instant::now() + settle.limit;
    let is_container = netns::sandbox_matcher(netns_path);
    let wants_host = options.check_host && result.interfaces.iter().any(|i| i.sandbox.is_empty());
    // A tap/VM-interface pair (vmtap, tc-redirect-tap) is checked through its tc redirects.
    let wants_redirects = !cni_types::result::vm_pairs(result, &is_container).is_empty();
    let mut readings = 0;
    loop {
        readings += 1;
        let container = read_container(netns_path, wants_redirects)?;
        let host: Option<Snapshot> =
            if wants_host { Some(kernel::snapshot().map_err(InspectError::Host)?) } else { None };
        let subject = Subject {
            result,
            ifname,
            netns: netns_path,
            is_container: &is_container,
            container: &container,
            host: host.as_ref(),
        };
        let items = verify::verify(&subject, options);
        let unsettled = items.iter().any(|i| i.is_mismatch() || (settle.wait_for_pending && i.is_pending()));
        let now = Instant::now();
        if !unsettled || now >= deadline {
            return Ok(Report { items, readings });
        }
        std::thread::sleep(RETRY_PAUSE.min(deadline - now));
    }
}

fn read_container(path: &str, with_redirects: bool) -> Result<Snapshot, InspectError> {
    let read = || -> Result<Snapshot, KernelError> {
        let mut snap = kernel::snapshot()?;
        if with_redirects {
            snap.redirects = kernel::redirects().map_err(KernelError::Netlink)?;
        }
        Ok(snap)
    };
    netns::run_in(Path::new(path), read)
        .map_err(InspectError::Netns)?
        .map_err(|e| InspectError::Container(path.to_string(), e))
}
