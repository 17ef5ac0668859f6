//! Making a tap: the tun driver's ioctls on `/dev/net/tun` (the kernel refuses to create
//! tun/tap devices over rtnetlink). As `ip tuntap add mode tap` and vishvananda/netlink's
//! `LinkAdd(&Tuntap{…})` do, which tc-redirect-tap calls (`internal/netlink.go`, `CreateTap`).
//!
//! The device is made on the calling thread's network namespace (the tun driver takes the
//! opener's), so this runs inside `cni_skel::netns::run_in`. It stays non-persistent — gone
//! when the descriptor closes, also when the process is killed — until [`NewTap::persist`].

use std::fs::File;
use std::os::fd::AsRawFd;

/// `IFF_TAP`: an Ethernet device (not IP-level `IFF_TUN`).
const IFF_TAP: i16 = 0x0002;
/// `IFF_NO_PI`: frames without the 4-byte packet-information header.
const IFF_NO_PI: i16 = 0x1000;
/// `IFF_VNET_HDR`: virtio-net headers, as QEMU and firecracker open it (tc-redirect-tap sets it too).
const IFF_VNET_HDR: i16 = 0x4000;
/// `IFF_TUN_EXCL`: fail with `EBUSY` rather than attach to an existing device of that name.
const IFF_TUN_EXCL: i16 = 0x8000_u16 as i16;

/// `struct ifreq` as `TUNSETIFF` reads it: the name, then the flags (the union is 24 bytes).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: i16,
    _pad: [u8; 22],
}

const TUN_MAGIC: u8 = b'T';
nix::ioctl_write_ptr_bad!(
    /// `TUNSETIFF`: create (or, without `IFF_TUN_EXCL`, attach to) the device named in the request.
    tunsetiff,
    nix::request_code_write!(TUN_MAGIC, 202, size_of::<nix::libc::c_int>()),
    IfReq
);
nix::ioctl_write_int_bad!(
    /// `TUNSETPERSIST`: keep the device when its last descriptor closes.
    tunsetpersist,
    nix::request_code_write!(TUN_MAGIC, 203, size_of::<nix::libc::c_int>())
);
nix::ioctl_write_int_bad!(
    /// `TUNSETOWNER`: the user who may attach without `CAP_NET_ADMIN`.
    tunsetowner,
    nix::request_code_write!(TUN_MAGIC, 204, size_of::<nix::libc::c_int>())
);
nix::ioctl_write_int_bad!(
    /// `TUNSETGROUP`: the group whose members may attach.
    tunsetgroup,
    nix::request_code_write!(TUN_MAGIC, 206, size_of::<nix::libc::c_int>())
);

/// Why a tap could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// `/dev/net/tun` could not be opened (no tun module, no device node, no permission).
    #[error("cannot open /dev/net/tun to create tap {0}: {1}")]
    Open(String, #[source] std::io::Error),
    /// An ioctl failed.
    #[error("{op} on tap {name}: {errno}")]
    Ioctl {
        /// The ioctl.
        op: &'static str,
        /// The tap.
        name: String,
        /// The kernel's answer.
        #[source]
        errno: nix::Error,
    },
}

/// A tap that exists while this value (its descriptor) lives.
#[derive(Debug)]
pub struct NewTap {
    file: File,
    name: String,
}

impl NewTap {
    /// The tap's name, as the kernel named it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates the tap `name`; fails with `EBUSY` when a device of that name exists.
    pub fn create(name: &str) -> Result<NewTap, TapError> {
        let file = File::options()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .map_err(|e| TapError::Open(name.to_string(), e))?;
        let mut req = IfReq { name: [0; 16], flags: IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_TUN_EXCL, _pad: [0; 22] };
        // Names are checked to be at most 15 bytes (cni_types::validate::interface_name): the
        // 16th byte stays the terminating NUL.
        let bytes = name.as_bytes();
        let n = bytes.len().min(15);
        req.name[..n].copy_from_slice(&bytes[..n]);
        // SAFETY: `file` is an open /dev/net/tun descriptor and `req` a live, initialised
        // `struct ifreq`-shaped value the kernel reads (and may write the name back into).
        unsafe { tunsetiff(file.as_raw_fd(), &req) }.map_err(|errno| ioctl("TUNSETIFF", name, errno))?;
        Ok(NewTap { file, name: name.to_string() })
    }

    /// Lets user `uid` and/or group `gid` open the tap (an unprivileged VMM).
    pub fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> Result<(), TapError> {
        if let Some(uid) = uid {
            // SAFETY: an integer argument on an open tun descriptor; no memory is passed.
            unsafe { tunsetowner(self.file.as_raw_fd(), uid as _) }
                .map_err(|errno| ioctl("TUNSETOWNER", &self.name, errno))?;
        }
        if let Some(gid) = gid {
            // SAFETY: as above.
            unsafe { tunsetgroup(self.file.as_raw_fd(), gid as _) }
                .map_err(|errno| ioctl("TUNSETGROUP", &self.name, errno))?;
        }
        Ok(())
    }

    /// Makes the tap outlive its descriptor (`TUNSETPERSIST`), then closes it so that a VMM
    /// can attach.
    pub fn persist(self) -> Result<(), TapError> {
        // SAFETY: an integer argument on an open tun descriptor; no memory is passed.
        unsafe { tunsetpersist(self.file.as_raw_fd(), 1) }
            .map_err(|errno| ioctl("TUNSETPERSIST", &self.name, errno))?;
        Ok(())
    }
}

fn ioctl(op: &'static str, name: &str, errno: nix::Error) -> TapError {
    TapError::Ioctl { op, name: name.to_string(), errno }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_skel::testing::{require_root, TempNetns};

    /// `TUNSETIFF` is read and written by the kernel: it writes the device's name back into the
    /// request (`tun_set_iff`, then `copy_to_user` in `__tun_chr_ioctl`), which a name template
    /// makes visible — `bt%d` becomes `bt0`. The request must be passed as the kernel uses it.
    #[test]
    fn the_kernel_writes_the_name_back_into_the_request() {
        if !require_root("the_kernel_writes_the_name_back_into_the_request") {
            return;
        }
        let ns = TempNetns::new("vmtap-tap");
        let named = cni_skel::netns::run_in(&ns.path(), || {
            let tap = NewTap::create("bt%d")?;
            Ok::<_, TapError>(tap.name().to_string())
        });
        assert_eq!(named.unwrap().unwrap(), "bt0");
    }
}
