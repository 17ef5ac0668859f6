//! A real VM in a test: QEMU booted inside a pod's network namespace, one virtio NIC per tap, and
//! probes run by the guest itself (so "the VM reaches its network" is checked where it matters,
//! in the guest's kernel). One module per job:
//!
//! - [`kernel`]: [`cache_dir`] and the kernel package, named with `apt-cache depends
//!   linux-image-cloud-amd64` and fetched once with `apt-get download` into `target/vm/` (the
//!   cache survives runs; the package is unpacked with `dpkg-deb -x`, never installed).
//! - [`image`]: [`VmImage::prepare`] packs a small initramfs around that kernel: static busybox,
//!   the virtio-net modules of that kernel, and `src/vm/init.sh` as `/init`. Done once per
//!   process; two processes preparing at once each unpack into their own staging directory and
//!   `rename` it into place.
//! - [`guest`]: [`Guest`] describes the NICs (tap, MAC, addresses, routes — a gateway is a default route) and the
//!   probes. It reaches the guest as `/braid/guest.sh`, an extra newc archive appended to the
//!   image's initramfs for this boot (the kernel unpacks concatenated archives in order), so there
//!   is no kernel command-line length limit. The file is a list of calls to the functions of
//!   `init.sh`, every argument validated here and single-quoted.
//! - [`qemu`]: [`Vm::boot`] runs `qemu-system-x86_64` with the network namespace of the calling
//!   thread set to the pod's (the child inherits it: no `nsenter`, no `ip netns exec`), captures
//!   the serial console, and returns once the guest printed `BRAID-DONE` and powered off, or QEMU
//!   exited, or the hang guard ([`Guest::timeout`]) ran out. QEMU is killed by PID on every other
//!   path (drop included). [`Vm::start`] returns at once instead, for tests that act while the
//!   guest runs: [`Vm::wait_for_console`] waits for a line of its script, [`Vm::qmp`] talks to
//!   QEMU (a NIC hot-plugged, `device_del` and its `DEVICE_DELETED`).
//! - [`console`]: [`VmRun`], what the console says — the guest's NICs, its errors, each probe's
//!   outcome.
//! - [`nics`]: what a VM runtime does with braid's result — [`vm_nics`] pairs VM interfaces with
//!   their taps, [`guest_for`] turns them into a [`Guest`], [`wire_tap`] wires a tap to a pod
//!   interface for tests that play the runtime.
//!
//! Always TCG (`-accel tcg`): on these machines `/dev/kvm` exists but a KVM boot hung after the
//! kernel loaded, and `-cpu host` failed on an MSR; TCG boots the cloud kernel to `/init` in a few
//! seconds, which is all a test needs. The machine and devices are minimal: `-nodefaults` (no
//! VGA, IDE, default NIC or monitor; a QMP socket in the boot's directory, used only by tests that
//! hot-plug NICs: [`Vm::qmp`]), `-serial stdio`, `-m 256 -smp 1`, and `romfile=` on each
//! `virtio-net-pci` to skip loading the iPXE ROM. The initramfs is an uncompressed newc archive:
//! the kernel takes it as is, and the guest does not spend emulated CPU time inflating it.
//!
//! The technique is the one of firecracker-containerd's and Kata's tc-redirect-tap (a tap per pod
//! interface, `tc ... action mirred egress redirect` both ways); [`wire_tap`] does that with
//! iproute2 for tests that play the runtime.

pub mod console;
pub mod guest;
pub mod image;
pub mod kernel;
pub mod nics;
pub mod qemu;

pub use console::{ProbeOutcome, VmRun};
pub use guest::{Guest, Nic, Probe, Route, DEFAULT_TIMEOUT};
pub use image::{VmImage, VIRTIO_NET_MODULES};
pub use kernel::{cache_dir, KERNEL_METAPACKAGE};
pub use nics::{guest_for, vm_nics, wire_tap};
pub use qemu::{Vm, KERNEL_CMDLINE, QEMU};

use std::path::{Path, PathBuf};

/// `/run/netns/<name>` for a bare name, the path itself otherwise.
fn netns_path(netns: &Path) -> PathBuf {
    if netns.components().count() == 1 && netns.is_relative() {
        Path::new("/run/netns").join(netns)
    } else {
        netns.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_netns_name_is_under_run_netns() {
        assert_eq!(netns_path(Path::new("pod1")), Path::new("/run/netns/pod1"));
        assert_eq!(netns_path(Path::new("/proc/1/ns/net")), Path::new("/proc/1/ns/net"));
    }
}
