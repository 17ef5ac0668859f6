//! Making a tap: the tun driver's ioctls on `/dev/net/tun` (the kernel refuses to create
//! tun/tap devices over rtnetlink). As `ip tuntap add mode tap` and vishvananda/netlink's
//! `LinkAdd(&Tuntap{…})` do, which tc-redirect-tap calls (`internal/netlink.go`, `CreateTap`).
//!
//! The device is made on the calling thread's network namespace (the tun driver takes the
//! opener's), so this runs inside `cni_skel::netns::run_in`. It stays non-persistent — gone
//! when the descriptor closes, also when the process is killed — until [`NewTap::persist`].

use nix::libc;
use std::fs::File;
use std::os::fd::AsRawFd;

nix::ioctl_readwrite_bad!(
    /// `TUNSETIFF`: create (or, without `IFF_TUN_EXCL`, attach to) the device named in the
    /// request. The kernel reads the `struct ifreq` and writes it back with the device's name
    /// (`__tun_chr_ioctl`: `copy_to_user` after `tun_set_iff`), so it is passed writable —
    /// although `linux/if_tun.h` numbers it `_IOW` (the number is the kernel's, as is).
    tunsetiff,
    libc::TUNSETIFF,
    libc::ifreq
);
nix::ioctl_write_int_bad!(
    /// `TUNSETPERSIST`: keep the device when its last descriptor closes.
    tunsetpersist,
    libc::TUNSETPERSIST
);
nix::ioctl_write_int_bad!(
    /// `TUNSETOWNER`: the user who may attach without `CAP_NET_ADMIN`.
    tunsetowner,
    libc::TUNSETOWNER
);
nix::ioctl_write_int_bad!(
    /// `TUNSETGROUP`: the group whose members may attach.
    tunsetgroup,
    libc::TUNSETGROUP
);

/// The flags of the request: an Ethernet device (`IFF_TAP`, not IP-level `IFF_TUN`), frames
/// without the 4-byte packet-information header (`IFF_NO_PI`), with virtio-net headers as QEMU
/// and firecracker open it (`IFF_VNET_HDR`; tc-redirect-tap sets it too), and `EBUSY` rather
/// than attaching to an existing device of that name (`IFF_TUN_EXCL`). `ifr_flags` is a
/// `short`; `IFF_TUN_EXCL` (0x8000) is its sign bit.
const FLAGS: libc::c_int = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_TUN_EXCL;

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

    /// Creates the tap `name`; fails with `EBUSY` when a device of that name exists. Its name is
    /// the one the kernel writes back.
    pub fn create(name: &str) -> Result<NewTap, TapError> {
        let file = File::options()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .map_err(|e| TapError::Open(name.to_string(), e))?;
        // SAFETY: `ifreq` is plain old data (a name and a union of integers, addresses and a
        // pointer): all zeros is a valid value of it, an empty name and no flags.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        // Names are checked to be at most 15 bytes (cni_types::validate::interface_name): the
        // 16th byte stays the terminating NUL.
        for (slot, byte) in req.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
            *slot = byte as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = FLAGS as libc::c_short;
        // SAFETY: `file` is an open /dev/net/tun descriptor and `req` a live, initialised
        // `struct ifreq` the kernel reads and writes back, borrowed mutably for the call.
        unsafe { tunsetiff(file.as_raw_fd(), &mut req) }.map_err(|errno| ioctl("TUNSETIFF", name, errno))?;
        let written: Vec<u8> = req.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        Ok(NewTap { file, name: String::from_utf8_lossy(&written).into_owned() })
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
