//! Why a netlink exchange failed, and its CNI code.

use nix::errno::Errno;

/// Why a netlink exchange failed. Each names the operation (`what`) it was part of.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// The socket could not be opened, bound or connected.
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The kernel refused the request (its errno, and its own explanation where it sent one:
    /// the extended acknowledgement's message, e.g. "Nexthop has invalid gateway"), or the
    /// socket failed mid-exchange (no explanation).
    #[error("{what}: {errno}{}", explained(ext_ack))]
    Kernel {
        /// The operation ("add route default via 198.18.0.1 on net1").
        what: String,
        /// The kernel's errno (or the socket's error).
        #[source]
        errno: std::io::Error,
        /// The kernel's `NLMSGERR_ATTR_MSG`, when it sent one.
        ext_ack: Option<String>,
    },
    /// An answer did not decode.
    #[error("{0}: undecodable netlink answer: {1}")]
    Decode(String, String),
    /// Every try of a dump was interrupted by concurrent changes.
    #[error("{0}: the dump was interrupted by concurrent changes {1} times")]
    Interrupted(String, usize),
    /// A request this crate will not send: the kernel would refuse it with a less helpful
    /// answer, or it would do harm.
    #[error("{0}: {1}")]
    Refused(String, String),
}

fn explained(ext_ack: &Option<String>) -> String {
    ext_ack.as_ref().map_or_else(String::new, |m| format!(": {m}"))
}

impl NetlinkError {
    /// The kernel's errno, when the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Kernel { errno, .. } => errno.raw_os_error(),
            _ => None,
        }
    }

    /// The kernel's explanation of a refusal (its extended acknowledgement), when it sent one.
    pub fn ext_ack(&self) -> Option<&str> {
        match self {
            NetlinkError::Kernel { ext_ack, .. } => ext_ack.as_deref(),
            _ => None,
        }
    }

    /// The object does not exist — what a DEL treats as already done: `ENOENT` (no such
    /// qdisc or filter), `ENODEV` (no such link) and `ESRCH` (no such route: the kernel's
    /// `fib_table_delete` and `ip6_route_del` answer `RTM_DELROUTE` of a missing route so).
    pub fn is_not_found(&self) -> bool {
        matches!(self.errno().map(Errno::from_raw), Some(Errno::ENOENT | Errno::ENODEV | Errno::ESRCH))
    }

    /// The object exists already (`EEXIST`).
    pub fn is_exists(&self) -> bool {
        self.errno().map(Errno::from_raw) == Some(Errno::EEXIST)
    }
}

impl From<NetlinkError> for cni_types::CniError {
    /// Code 999 (`INTERNAL`), as Go plugins report netlink failures (`fmt.Errorf` wrapped into
    /// a generic error by `skel`), with the operation and the kernel's reason in the message.
    fn from(e: NetlinkError) -> cni_types::CniError {
        cni_types::CniError::new(cni_types::error::INTERNAL, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(errno: Errno, ext_ack: Option<&str>) -> NetlinkError {
        NetlinkError::Kernel {
            what: "delete route default via 198.18.0.1 on net1".into(),
            errno: std::io::Error::from_raw_os_error(errno as i32),
            ext_ack: ext_ack.map(str::to_string),
        }
    }

    #[test]
    fn a_missing_route_link_qdisc_or_filter_is_not_found() {
        for errno in [Errno::ESRCH, Errno::ENOENT, Errno::ENODEV] {
            assert!(refused(errno, None).is_not_found(), "{errno}");
        }
        assert!(!refused(Errno::EINVAL, None).is_not_found());
        assert!(!NetlinkError::Interrupted("dump links".into(), 5).is_not_found());
        assert!(refused(Errno::EEXIST, None).is_exists() && !refused(Errno::ESRCH, None).is_exists());
    }

    #[test]
    fn the_kernels_explanation_is_in_the_message() {
        let e = refused(Errno::EINVAL, Some("Nexthop has invalid gateway"));
        assert_eq!(e.ext_ack(), Some("Nexthop has invalid gateway"));
        let text = e.to_string();
        assert!(text.starts_with("delete route default via 198.18.0.1 on net1: Invalid argument"), "{text}");
        assert!(text.ends_with(": Nexthop has invalid gateway"), "{text}");
        assert!(!refused(Errno::EINVAL, None).to_string().ends_with(": "));
    }
}
