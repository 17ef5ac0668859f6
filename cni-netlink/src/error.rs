//! Why a netlink exchange failed, and its CNI code.

/// Why a netlink exchange failed. Each names the operation (`what`) it was part of.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// The socket could not be opened, bound or connected.
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The kernel refused the request (its errno), or the socket failed mid-exchange.
    #[error("{0}: {1}")]
    Kernel(String, #[source] std::io::Error),
    /// An answer did not decode.
    #[error("{0}: undecodable netlink answer: {1}")]
    Decode(String, String),
    /// Every try of a dump was interrupted by concurrent changes.
    #[error("{0}: the dump was interrupted by concurrent changes {1} times")]
    Interrupted(String, usize),
}

impl NetlinkError {
    /// The kernel's errno, when the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Kernel(_, e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// The object does not exist (`ENOENT`, `ENODEV`):
    /// what a DEL treats as already done.
    pub fn is_not_found(&self) -> bool {
        matches!(self.errno(), Some(2 /* ENOENT */ | 19 /* ENODEV */))
    }

    /// The object exists already (`EEXIST`).
    pub fn is_exists(&self) -> bool {
        self.errno() == Some(17)
    }
}

impl From<NetlinkError> for cni_types::CniError {
    /// Code 999 (`INTERNAL`), as Go plugins report netlink failures (`fmt.Errorf` wrapped into
    /// a generic error by `skel`), with the operation and the kernel's reason in the message.
    fn from(e: NetlinkError) -> cni_types::CniError {
        cni_types::CniError::new(cni_types::error::INTERNAL, e.to_string())
    }
}
