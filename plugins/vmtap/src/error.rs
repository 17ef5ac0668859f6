//! vmtap's failures, worded for the operator reading a kubelet event, and their CNI codes.

use crate::tap::TapError;
use cni_netlink::NetlinkError;
use cni_skel::cni_types::error::{INTERNAL, INVALID_NETWORK_CONFIG, IO_FAILURE};
use cni_skel::cni_types::CniError;
use cni_skel::netns::NetnsError;

/// CHECK found a tap, qdisc or filter missing or different from the result (plugin codes
/// start at 100; the verifier uses 120–121, the sysctl example 110).
pub const MISMATCH: u32 = 130;

/// Why a vmtap command failed.
#[derive(Debug, thiserror::Error)]
pub enum VmtapError {
    /// The pod namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// A netlink request failed.
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    /// A tap could not be made.
    #[error(transparent)]
    Tap(#[from] TapError),
    /// `prevResult` and the keys cannot be planned against the taps found (a name refused).
    #[error(transparent)]
    Plan(CniError),
    /// `prevResult` names a pod interface the namespace does not have.
    #[error("interface {iface} of prevResult is not in the pod namespace {netns}")]
    PodMissing {
        /// The interface.
        iface: String,
        /// `CNI_NETNS`.
        netns: String,
    },
    /// The tap's name is taken by a link of the pod namespace.
    #[error("cannot create tap {tap} for {pod}: the pod namespace has a link of that name already (set tapNames)")]
    TapTaken {
        /// The tap name.
        tap: String,
        /// The pod interface it was for.
        pod: String,
    },
    /// The kernel made the tap but does not list it.
    #[error("tap {0} was created but the pod namespace does not list it")]
    TapNotListed(String),
    /// The mark would not fit in the tap's alias.
    #[error(
        "cannot mark tap {tap} for {pod}: the container ID and interface names make a mark of {len} bytes, \
         and a link's alias holds at most {max}",
        max = crate::mark::MAX_ALIAS
    )]
    MarkTooLong {
        /// The tap.
        tap: String,
        /// The pod interface it was for.
        pod: String,
        /// The mark's length.
        len: usize,
    },
    /// The DAN file could not be written or removed.
    #[error("{op} Kata DAN file {path}: {source}")]
    Dan {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// CHECK found differences; each is one entry.
    #[error("{} difference(s) between the result and the pod namespace {netns}", .problems.len())]
    Mismatch {
        /// `CNI_NETNS`.
        netns: String,
        /// What differs, one entry each.
        problems: Vec<String>,
    },
}

impl From<VmtapError> for CniError {
    /// Namespace and netlink failures keep their own codes (4 or 999); a tap the kernel would
    /// not make is 999; an inconsistent `prevResult` or a taken name 7; the DAN file 5; CHECK's
    /// differences [`MISMATCH`], one per entry in `details`.
    fn from(e: VmtapError) -> CniError {
        let code = match &e {
            VmtapError::Plan(_) => None,
            VmtapError::Netns(_) | VmtapError::Netlink(_) => None,
            VmtapError::Tap(_) | VmtapError::TapNotListed(_) => Some(INTERNAL),
            VmtapError::PodMissing { .. } | VmtapError::TapTaken { .. } | VmtapError::MarkTooLong { .. } => {
                Some(INVALID_NETWORK_CONFIG)
            }
            VmtapError::Dan { .. } => Some(IO_FAILURE),
            VmtapError::Mismatch { problems, .. } => {
                return CniError::with_details(MISMATCH, e.to_string(), problems.join("; "));
            }
        };
        match (code, e) {
            (Some(code), e) => CniError::new(code, e.to_string()),
            (None, VmtapError::Netns(n)) => n.into(),
            (None, VmtapError::Netlink(n)) => n.into(),
            (None, VmtapError::Plan(e)) => e,
            (None, e) => CniError::new(INTERNAL, e.to_string()),
        }
    }
}
