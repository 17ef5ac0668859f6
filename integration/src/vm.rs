//! A real VM in a test: QEMU booted inside a pod's network namespace, one virtio NIC per tap, and
//! probes run by the guest itself (so "the VM reaches its network" is checked where it matters,
//! in the guest's kernel).
//!
//! - [`VmImage::prepare`] names the kernel with `apt-cache depends linux-image-cloud-amd64`,
//!   fetches that package once with `apt-get download` into `target/vm/` (the cache survives
//!   runs; the package is unpacked with `dpkg-deb -x`, never installed), and packs a small
//!   initramfs on the spot: static busybox, the virtio-net modules of that kernel, and
//!   `src/vm/init.sh` as `/init`. Done once per process ([`OnceLock`]); two processes preparing
//!   at once each unpack into their own staging directory and `rename` it into place.
//! - [`Guest`] describes the NICs (tap, MAC, addresses, gateways, routes) and the probes. It
//!   reaches the guest as `/braid/guest.sh`, an extra newc archive appended to the image's
//!   initramfs for this boot (the kernel unpacks concatenated archives in order), so there is no
//!   kernel command-line length limit. The file is a list of calls to the functions of `init.sh`,
//!   every argument validated here and single-quoted.
//! - [`Vm::boot`] runs `qemu-system-x86_64` with the network namespace of the calling thread set
//!   to the pod's (the child inherits it: no `nsenter`, no `ip netns exec`), captures the serial
//!   console, and returns once the guest printed `BRAID-DONE` and powered off, or QEMU exited,
//!   or the hang guard ([`Guest::timeout`]) ran out. QEMU is killed by PID on every other path
//!   (drop included).
//!
//! Always TCG (`-accel tcg`): on these machines `/dev/kvm` exists but a KVM boot hung after the
//! kernel loaded, and `-cpu host` failed on an MSR; TCG boots the cloud kernel to `/init` in a few
//! seconds, which is all a test needs. The machine and devices are minimal: `-nodefaults` (no
//! VGA, IDE, default NIC or monitor), `-serial stdio`, `-m 256 -smp 1`, and `romfile=` on each
//! `virtio-net-pci` to skip loading the iPXE ROM. The initramfs is an uncompressed newc archive:
//! the kernel takes it as is, and the guest does not spend emulated CPU time inflating it.
//!
//! The technique is the one of firecracker-containerd's and Kata's tc-redirect-tap (a tap per pod
//! interface, `tc ... action mirred egress redirect` both ways); [`wire_tap`] does that with
//! iproute2 for tests that play the runtime.

use crate::runtime::{run_ok, BUSYBOX};
use crate::{build_dir, TempDir};
use cni_types::CniResult;
use std::fmt;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The QEMU binary (Debian's `qemu-system-x86`).
pub const QEMU: &str = "qemu-system-x86_64";

/// The metapackage whose dependency names the kernel (a cloud kernel: small, virtio built as
/// modules).
pub const KERNEL_METAPACKAGE: &str = "linux-image-cloud-amd64";

/// The modules virtio-net needs, in load order (each after those it depends on; busybox
/// `insmod` resolves nothing). A name the kernel builds in or lacks is skipped; `virtio_net` must
/// be there one way or the other.
pub const VIRTIO_NET_MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
];

/// The kernel command line: the serial console, `panic=-1` (with `-no-reboot`, a guest whose
/// `/init` dies ends QEMU at once instead of hanging).
pub const KERNEL_CMDLINE: &str = "console=ttyS0 panic=-1 quiet";

/// The hang guard of a boot unless [`Guest::timeout`] says otherwise: a boot takes seconds under
/// TCG; this only bounds a guest that never finishes (a failure, not a timing assertion).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How long QEMU gets to exit after the guest printed `BRAID-DONE` (it then runs `poweroff -f`).
const POWEROFF_GRACE: Duration = Duration::from_secs(30);

/// The init script packed as the guest's `/init`.
const INIT: &str = include_str!("vm/init.sh");

/// The cache directory for the kernel: `$BRAID_VM_CACHE`, else `vm/` in cargo's target directory
/// (beside the build directory, so `cargo clean` removes it and a clean clone downloads once).
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BRAID_VM_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let build = build_dir();
    build.parent().map(|target| target.join("vm")).unwrap_or_else(|| build.join("vm"))
}

/// A bootable guest: a kernel and the initramfs bytes every boot starts from.
pub struct VmImage {
    /// `boot/vmlinuz-<release>` of the unpacked package.
    pub kernel: PathBuf,
    /// The kernel release (`uname -r` in the guest).
    pub release: String,
    /// The modules packed and loaded by `/init`, in order.
    pub modules: Vec<String>,
    /// The names of [`VIRTIO_NET_MODULES`] this kernel builds in.
    pub builtin: Vec<String>,
    initramfs: Vec<u8>,
}

impl fmt::Debug for VmImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VmImage")
            .field("kernel", &self.kernel)
            .field("release", &self.release)
            .field("modules", &self.modules)
            .field("builtin", &self.builtin)
            .field("initramfs_bytes", &self.initramfs.len())
            .finish()
    }
}

impl VmImage {
    /// The image of this process, prepared on first use (downloading the kernel package into
    /// [`cache_dir`] if it is not there yet). Panics with the failing command's output.
    pub fn prepare() -> &'static VmImage {
        static IMAGE: OnceLock<VmImage> = OnceLock::new();
        IMAGE.get_or_init(|| VmImage::build(&cache_dir()))
    }

    fn build(cache: &Path) -> VmImage {
        std::fs::create_dir_all(cache).unwrap_or_else(|e| panic!("{}: {e}", cache.display()));
        remove_stale_stages(cache);
        let tree = kernel_tree(cache);
        let release = only_subdir(&tree.join("lib/modules"));
        let kernel = tree.join("boot").join(format!("vmlinuz-{release}"));
        assert!(kernel.is_file(), "{} missing in the unpacked kernel package", kernel.display());
        let moddir = tree.join("lib/modules").join(&release);
        let builtin_list = std::fs::read_to_string(moddir.join("modules.builtin")).unwrap_or_default();
        let found = find_modules(&moddir.join("kernel"));

        let stage = Stage::new(cache, "initramfs");
        let root = stage.path().join("root");
        let mods = root.join("lib/modules");
        for d in [root.join("bin"), root.join("braid"), mods.clone()] {
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        let (mut modules, mut builtin) = (Vec::new(), Vec::new());
        for name in VIRTIO_NET_MODULES {
            if let Some(ko) = found.iter().find(|(n, _)| n == name).map(|(_, p)| p) {
                let to = mods.join(format!("{name}.ko"));
                std::fs::copy(ko, &to).unwrap_or_else(|e| panic!("{} -> {}: {e}", ko.display(), to.display()));
                modules.push(name.to_string());
            } else if builtin_list.lines().any(|l| module_name(l).as_deref() == Some(*name)) {
                builtin.push(name.to_string());
            }
        }
        assert!(
            modules.iter().chain(&builtin).any(|m| m == "virtio_net"),
            "kernel {release} has virtio_net neither as a module (.ko, uncompressed) nor built in"
        );
        std::fs::copy(BUSYBOX, root.join("bin/busybox"))
            .unwrap_or_else(|e| panic!("{BUSYBOX}: {e} (install busybox-static)"));
        write_file(&root.join("braid/modules"), modules.join("\n").as_bytes(), 0o644);
        write_file(&root.join("init"), INIT.as_bytes(), 0o755);
        let initramfs = newc_archive(&root);
        VmImage { kernel, release, modules, builtin, initramfs }
    }

    /// The size of the shared initramfs (without a boot's configuration).
    pub fn initramfs_len(&self) -> usize {
        self.initramfs.len()
    }
}

/// The unpacked kernel package in the cache, downloaded first if needed.
fn kernel_tree(cache: &Path) -> PathBuf {
    let named = apt_kernel_package();
    let package = match named {
        Ok(p) => p,
        Err(why) => {
            // Offline or no apt index: any kernel already in the cache does.
            if let Some(cached) = cached_kernels(cache).pop() {
                return cached;
            }
            panic!("cannot name the kernel package ({why}); scripts/test.sh runs apt-get update when needed");
        }
    };
    let tree = cache.join(&package);
    if tree.join("boot").is_dir() {
        return tree;
    }
    let stage = Stage::new(cache, "kernel");
    run_ok(Command::new("apt-get").args(["download", "-q", &package]).current_dir(stage.path()));
    let deb = std::fs::read_dir(stage.path())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .unwrap_or_else(|| panic!("apt-get download {package} left no .deb in {}", stage.path().display()));
    let unpacked = stage.path().join("tree");
    run_ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked));
    // Another process may have won the race: its tree is as good as ours.
    if std::fs::rename(&unpacked, &tree).is_err() && !tree.join("boot").is_dir() {
        panic!("could not move {} to {}", unpacked.display(), tree.display());
    }
    tree
}

/// `apt-cache depends linux-image-cloud-amd64` → `linux-image-<abi>-cloud-amd64`.
fn apt_kernel_package() -> Result<String, String> {
    let out = Command::new("apt-cache")
        .args(["depends", KERNEL_METAPACKAGE])
        .output()
        .map_err(|e| format!("apt-cache: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && p.chars().all(|c| c.is_ascii_alphanumeric() || "-.+".contains(c)))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "apt-cache depends {KERNEL_METAPACKAGE} ({}) named no linux-image package: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

fn cached_kernels(cache: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("linux-image-")))
        .filter(|p| p.join("boot").is_dir())
        .collect();
    out.sort();
    out
}

fn only_subdir(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    match names.as_slice() {
        [one] => one.clone(),
        _ => panic!("expected one kernel release in {}, found {names:?}", dir.display()),
    }
}

/// The uncompressed `.ko` files below `dir`, by module name.
fn find_modules(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if let Some(name) = p.file_name().and_then(|n| n.to_str()).and_then(module_name) {
                if p.extension().is_some_and(|x| x == "ko") {
                    out.push((name, p));
                }
            }
        }
    }
    out
}

/// `kernel/drivers/virtio/virtio-foo.ko` → `virtio_foo` (module names use `_`, files either).
fn module_name(path: &str) -> Option<String> {
    let file = path.trim().rsplit('/').next()?;
    let stem = file.split(".ko").next().filter(|s| file.len() > s.len())?;
    Some(stem.replace('-', "_"))
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A staging directory `<cache>/.stage-<pid>-<n>-<what>`, removed on drop: whatever is built
/// there is renamed into place whole, so a concurrent process never sees half of it.
struct Stage(PathBuf);

impl Stage {
    fn new(cache: &Path, what: &str) -> Stage {
        let p = cache.join(format!(".stage-{}-{}-{what}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst)));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        Stage(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the staging directories of processes that no longer run (killed mid-download).
fn remove_stale_stages(cache: &Path) {
    for e in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix(".stage-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The tree below `root` as a newc archive (`busybox cpio -o -H newc`; there is no `cpio`
/// binary on the machine), directories before their contents.
fn newc_archive(root: &Path) -> Vec<u8> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.display().to_string());
            }
            if p.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut names = Vec::new();
    walk(root, root, &mut names);
    let list = names.join("\n") + "\n";
    let mut child = Command::new(BUSYBOX)
        .args(["cpio", "-o", "-H", "newc"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{BUSYBOX} cpio: {e} (install busybox-static)"));
    let stdin = child.stdin.take();
    let feeder = std::thread::spawn(move || {
        if let Some(mut i) = stdin {
            let _ = i.write_all(list.as_bytes());
        }
    });
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{BUSYBOX} cpio: {e}"));
    let _ = feeder.join();
    assert!(out.status.success(), "busybox cpio in {}: {}", root.display(), String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// A route of a guest NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// `a.b.c.d/len`, `x::/len` or `default`.
    pub dst: String,
    /// The gateway; `None` for a route on the link.
    pub via: Option<String>,
    /// The family of a `default` route (others take theirs from `dst`).
    pub v6: bool,
}

/// One virtio NIC of the guest, backed by a tap in the namespace QEMU runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// The tap QEMU opens (`-netdev tap,ifname=`); it must exist (QEMU runs without scripts).
    pub tap: String,
    /// The guest NIC's MAC; the guest finds its interface by it.
    pub mac: String,
    /// `address/prefix`, IPv4 or IPv6.
    pub addresses: Vec<String>,
    /// Default gateways (at most one per family makes sense).
    pub gateways: Vec<String>,
    /// Further routes.
    pub routes: Vec<Route>,
}

impl Nic {
    /// A NIC without addresses.
    pub fn new(tap: &str, mac: &str) -> Nic {
        Nic { tap: tap.into(), mac: mac.into(), addresses: Vec::new(), gateways: Vec::new(), routes: Vec::new() }
    }

    /// Adds an address (`a.b.c.d/len` or `x::y/len`).
    pub fn address(mut self, cidr: &str) -> Nic {
        self.addresses.push(cidr.into());
        self
    }

    /// Adds a default route via `gateway`.
    pub fn gateway(mut self, gateway: &str) -> Nic {
        self.gateways.push(gateway.into());
        self
    }

    /// Adds a route to `dst` (a CIDR, or `default` with a gateway) via `via`, or on the link.
    pub fn route(mut self, dst: &str, via: Option<&str>) -> Nic {
        let v6 = if dst == "default" { via.is_some_and(|v| v.contains(':')) } else { dst.contains(':') };
        self.routes.push(Route { dst: dst.into(), via: via.map(str::to_string), v6 });
        self
    }
}

/// Something the guest checks after its network is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `ping -c 1 -W 2 -I <nic's interface> <addr>`, up to `tries` times: ok at the first reply.
    Ping {
        /// Index into [`Guest::nics`].
        nic: usize,
        /// The address to ping.
        addr: String,
        /// How many pings at most.
        tries: u32,
    },
    /// A busybox `sh -c` command: ok when it exits 0. The test's own text, run as root in the
    /// guest.
    Shell(String),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::Ping { nic, addr, tries } => write!(f, "ping {addr} from nic {nic} (up to {tries} tries)"),
            Probe::Shell(cmd) => write!(f, "sh -c {cmd:?}"),
        }
    }
}

/// What the guest is given: its NICs and its probes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guest {
    /// One virtio NIC each, in order.
    pub nics: Vec<Nic>,
    /// Run in order after every NIC is configured.
    pub probes: Vec<Probe>,
    /// The hang guard ([`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
}

impl Default for Guest {
    fn default() -> Guest {
        Guest { nics: Vec::new(), probes: Vec::new(), timeout: DEFAULT_TIMEOUT }
    }
}

impl Guest {
    /// No NICs, no probes.
    pub fn new() -> Guest {
        Guest::default()
    }

    /// Adds a NIC (its index is the number of NICs before it).
    pub fn nic(mut self, nic: Nic) -> Guest {
        self.nics.push(nic);
        self
    }

    /// Adds a probe: ping `addr` from NIC `nic`, up to 5 tries (the first may go to ARP/ND).
    pub fn ping(self, nic: usize, addr: &str) -> Guest {
        self.ping_tries(nic, addr, 5)
    }

    /// Adds a ping probe with an explicit number of tries (1 for an address that must not answer).
    pub fn ping_tries(mut self, nic: usize, addr: &str, tries: u32) -> Guest {
        self.probes.push(Probe::Ping { nic, addr: addr.into(), tries });
        self
    }

    /// Adds a shell probe.
    pub fn shell(mut self, cmd: &str) -> Guest {
        self.probes.push(Probe::Shell(cmd.into()));
        self
    }

    /// `/braid/guest.sh`: calls of `init.sh`'s functions. Panics on a malformed value (a test's
    /// mistake), naming it.
    pub fn script(&self) -> String {
        let mut s = String::from("# generated by braid_integration::vm\n");
        for (i, n) in self.nics.iter().enumerate() {
            check_tap(&n.tap);
            s += &format!("nic {i} {}\n", sq(&mac(&n.mac)));
        }
        for (i, n) in self.nics.iter().enumerate() {
            for a in &n.addresses {
                cidr(a);
                s += &format!("addr {i} {}\n", sq(a));
            }
            s += &format!("up {i}\n");
        }
        for (i, n) in self.nics.iter().enumerate() {
            for r in &n.routes {
                let v6 = if r.dst == "default" { r.v6 } else { cidr(&r.dst).is_ipv6() };
                let via = r.via.as_deref().map(|v| {
                    let ip = ip(v);
                    assert_eq!(ip.is_ipv6(), v6, "route {} via {v}: families differ", r.dst);
                    format!(" {}", sq(v))
                });
                s += &format!("route {i} {} {}{}\n", fam(v6), sq(&r.dst), via.unwrap_or_default());
            }
            for g in &n.gateways {
                s += &format!("route {i} {} default {}\n", fam(ip(g).is_ipv6()), sq(g));
            }
        }
        s += "show\n";
        for (k, p) in self.probes.iter().enumerate() {
            match p {
                Probe::Ping { nic, addr, tries } => {
                    assert!(
                        *nic < self.nics.len(),
                        "probe {k} pings from nic {nic}; the guest has {}",
                        self.nics.len()
                    );
                    s +=
                        &format!("probe {k} ping {} {nic} {} {}\n", fam(ip(addr).is_ipv6()), sq(addr), (*tries).max(1));
                }
                Probe::Shell(cmd) => s += &format!("probe {k} sh {}\n", sq(cmd)),
            }
        }
        s
    }
}

fn fam(v6: bool) -> &'static str {
    if v6 {
        "6"
    } else {
        "4"
    }
}

/// Single-quoted for sh.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn check_tap(name: &str) {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name != "."
        && name != "..";
    assert!(ok, "tap name {name:?}: want 1-15 of [A-Za-z0-9._-]");
}

/// `aa:bb:cc:dd:ee:ff`, lowercase as sysfs prints it.
fn mac(text: &str) -> String {
    let parts: Vec<&str> = text.split(':').collect();
    let ok = parts.len() == 6 && parts.iter().all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(ok, "MAC {text:?}: want six hex octets separated by ':'");
    text.to_ascii_lowercase()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap_or_else(|_| panic!("{text:?} is not an IP address"))
}

fn cidr(text: &str) -> IpAddr {
    let (addr, len) = text.split_once('/').unwrap_or_else(|| panic!("{text:?}: want address/prefix"));
    let addr = ip(addr);
    let max = if addr.is_ipv6() { 128 } else { 32 };
    let ok = len.parse::<u8>().is_ok_and(|l| l <= max);
    assert!(ok, "{text:?}: prefix length must be 0..={max}");
    addr
}

/// `/run/netns/<name>` for a bare name, the path itself otherwise.
fn netns_path(netns: &Path) -> PathBuf {
    if netns.components().count() == 1 && netns.is_relative() {
        Path::new("/run/netns").join(netns)
    } else {
        netns.to_path_buf()
    }
}

enum Event {
    Done,
    Eof,
}

/// A running QEMU (killed by PID and reaped on drop) and the console it is writing.
pub struct Vm {
    child: Child,
    console: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    events: mpsc::Receiver<Event>,
    readers: Vec<JoinHandle<()>>,
    guest: Guest,
    dir: TempDir,
}

impl fmt::Debug for Vm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vm").field("pid", &self.child.id()).field("dir", &self.dir).finish()
    }
}

impl Vm {
    /// Boots `guest` on `image` inside the network namespace `netns` (a path such as
    /// `/run/netns/<name>`, or a bare name) and waits for it: see [`Vm::wait`].
    pub fn boot(netns: impl AsRef<Path>, image: &VmImage, guest: &Guest) -> VmRun {
        Vm::start(netns, image, guest).wait()
    }

    /// Starts QEMU inside `netns` and returns at once (the guest then configures its NICs, runs
    /// its probes and powers off). Each NIC's tap must exist in `netns`.
    pub fn start(netns: impl AsRef<Path>, image: &VmImage, guest: &Guest) -> Vm {
        let netns = netns_path(netns.as_ref());
        let script = guest.script();
        let dir = TempDir::new("vm");
        let cfg = dir.path().join("cfg");
        std::fs::create_dir_all(cfg.join("braid")).unwrap_or_else(|e| panic!("{}: {e}", cfg.display()));
        write_file(&cfg.join("braid/guest.sh"), script.as_bytes(), 0o644);
        let mut initrd = image.initramfs.clone();
        // Archives are concatenated on 4-byte boundaries (zeros between them are skipped).
        initrd.resize(initrd.len().next_multiple_of(4), 0);
        initrd.extend(newc_archive(&cfg));
        let initrd_path = dir.path().join("initrd");
        write_file(&initrd_path, &initrd, 0o644);

        let mut args: Vec<String> = [
            "-accel",
            "tcg",
            "-m",
            "256",
            "-smp",
            "1",
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(["-kernel".into(), image.kernel.display().to_string()]);
        args.extend(["-initrd".into(), initrd_path.display().to_string()]);
        args.extend(["-append".into(), KERNEL_CMDLINE.into()]);
        for (i, n) in guest.nics.iter().enumerate() {
            args.extend(["-netdev".into(), format!("tap,id=n{i},ifname={},script=no,downscript=no", n.tap)]);
            args.extend(["-device".into(), format!("virtio-net-pci,netdev=n{i},mac={},romfile=", mac(&n.mac))]);
        }
        let taps: Vec<String> = guest.nics.iter().map(|n| n.tap.clone()).collect();
        let spawned = cni_skel::netns::run_in(&netns, move || {
            // As root, QEMU would create a missing tap itself: a typo would boot a guest on a
            // disconnected link instead of failing here.
            for tap in &taps {
                let there = Command::new("ip").args(["link", "show", "dev", tap]).output();
                if !there.as_ref().is_ok_and(|o| o.status.success()) {
                    return Err(format!("tap {tap} does not exist: {there:?}"));
                }
            }
            Command::new(QEMU)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting {QEMU}: {e} (install qemu-system-x86)"))
        });
        let mut child = spawned
            .unwrap_or_else(|e| panic!("entering {}: {e}", netns.display()))
            .unwrap_or_else(|e| panic!("in {}: {e}", netns.display()));

        let console = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, events) = mpsc::channel();
        let mut readers = Vec::new();
        if let Some(mut out) = child.stdout.take() {
            let console = Arc::clone(&console);
            readers.push(std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut done = false;
                while let Ok(n) = out.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let Ok(mut c) = console.lock() else { break };
                    let from = c.len().saturating_sub(16);
                    c.extend_from_slice(&buf[..n]);
                    if !done && c[from..].windows(11).any(|w| w == b"BRAID-DONE\r" || w == b"BRAID-DONE\n") {
                        done = true;
                        let _ = tx.send(Event::Done);
                    }
                }
                let _ = tx.send(Event::Eof);
            }));
        }
        if let Some(mut err) = child.stderr.take() {
            let stderr = Arc::clone(&stderr);
            readers.push(std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = err.read_to_end(&mut all);
                if let Ok(mut s) = stderr.lock() {
                    *s = all;
                }
            }));
        }
        Vm { child, console, stderr, events, readers, guest: guest.clone(), dir }
    }

    /// QEMU's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The console so far (`\r` removed): to wait for a guest to reach a point while it runs.
    pub fn console(&self) -> String {
        self.console.lock().map(|v| String::from_utf8_lossy(&v).replace('\r', "")).unwrap_or_default()
    }

    /// This boot's directory (the initramfs with its configuration), removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits for `BRAID-DONE` (then for QEMU to power off), for QEMU to exit, or for the hang
    /// guard; QEMU is killed if it is still running. Parses the console.
    pub fn wait(mut self) -> VmRun {
        // The first event ends the wait: BRAID-DONE (QEMU then powers off), or the console's
        // end (QEMU exited), or nothing before the hang guard.
        let first = self.events.recv_timeout(self.guest.timeout);
        let timed_out = matches!(first, Err(mpsc::RecvTimeoutError::Timeout));
        let grace = if timed_out { Duration::ZERO } else { POWEROFF_GRACE };
        let exit = self.exit_within(grace);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let text = |b: &Arc<Mutex<Vec<u8>>>| {
            b.lock().map(|v| String::from_utf8_lossy(&v).replace('\r', "")).unwrap_or_default()
        };
        let mut run = VmRun::parse(&self.guest, &text(&self.console));
        run.stderr = text(&self.stderr);
        run.timed_out = timed_out;
        run.exit = exit;
        run.dir = self.dir.path().to_path_buf();
        run
    }

    /// The exit status if QEMU exits within `grace`; killed (by PID) and reaped otherwise.
    fn exit_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + grace;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        // std sends no signal to a child it already reaped (no PID reuse hazard).
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The probe.
    pub probe: Probe,
    /// `Some(true|false)` as the guest reported it; `None` if it never did.
    pub ok: Option<bool>,
}

/// What a boot printed and what it means.
#[derive(Debug, Clone, Default)]
pub struct VmRun {
    /// The serial console (`\r` removed).
    pub console: String,
    /// QEMU's own stderr.
    pub stderr: String,
    /// The guest printed `BRAID-DONE`.
    pub done: bool,
    /// The hang guard ran out (QEMU was killed).
    pub timed_out: bool,
    /// QEMU's exit status; `None` when it had to be killed.
    pub exit: Option<ExitStatus>,
    /// The guest's interface name per NIC (`None`: no interface with that MAC).
    pub nics: Vec<Option<String>>,
    /// Per probe, in order.
    pub probes: Vec<ProbeOutcome>,
    /// `BRAID-ERROR` lines of the guest (a failed `insmod`, `ip` command, missing NIC).
    pub errors: Vec<String>,
    /// `ip addr` and the routes as the guest printed them after configuring its NICs.
    pub network: String,
    /// The boot's directory (already removed when the run is returned).
    pub dir: PathBuf,
}

impl VmRun {
    /// Reads the `BRAID-` lines of a console. Kernel messages may share a line with them (the
    /// serial console is shared), so a marker is looked for anywhere in a line.
    pub fn parse(guest: &Guest, console: &str) -> VmRun {
        let mut run = VmRun {
            console: console.to_string(),
            nics: vec![None; guest.nics.len()],
            probes: guest.probes.iter().map(|p| ProbeOutcome { probe: p.clone(), ok: None }).collect(),
            ..VmRun::default()
        };
        let mut in_show = false;
        for line in console.lines() {
            let Some(at) = line.find("BRAID-") else {
                if in_show {
                    run.network += line;
                    run.network.push('\n');
                }
                continue;
            };
            let mut words = line[at..].split_whitespace();
            match words.next() {
                Some("BRAID-DONE") => run.done = true,
                Some("BRAID-SHOW") => in_show = words.next() == Some("begin"),
                Some("BRAID-ERROR") => run.errors.push(words.collect::<Vec<_>>().join(" ")),
                Some("BRAID-NIC") => {
                    let (i, name) = (words.next().and_then(|w| w.parse::<usize>().ok()), words.next());
                    if let (Some(slot), Some(name)) = (i.and_then(|i| run.nics.get_mut(i)), name) {
                        *slot = Some(name.to_string());
                    }
                }
                Some("BRAID-PROBE") => {
                    let (k, verdict) = (words.next().and_then(|w| w.parse::<usize>().ok()), words.next());
                    if let Some(p) = k.and_then(|k| run.probes.get_mut(k)) {
                        p.ok = match verdict {
                            Some("ok") => Some(true),
                            Some("fail") => Some(false),
                            _ => None,
                        };
                    }
                }
                _ => {}
            }
        }
        run
    }

    /// Probe `k` reported ok.
    pub fn probe_ok(&self, k: usize) -> bool {
        self.probes.get(k).is_some_and(|p| p.ok == Some(true))
    }

    /// Everything went as asked: the guest finished, found every NIC, hit no error, and every
    /// probe reported ok. Otherwise prints the whole console and panics with its tail.
    pub fn assert_ok(&self) {
        let mut why = Vec::new();
        if !self.done {
            why.push(if self.timed_out {
                "hang guard ran out (QEMU killed)".into()
            } else {
                "no BRAID-DONE".to_string()
            });
        }
        for (i, n) in self.nics.iter().enumerate() {
            if n.is_none() {
                why.push(format!("nic {i} not found in the guest"));
            }
        }
        why.extend(self.errors.iter().map(|e| format!("guest error: {e}")));
        for (k, p) in self.probes.iter().enumerate() {
            if p.ok != Some(true) {
                why.push(format!("probe {k} ({}): {}", p.probe, p.ok.map_or("not reported", |_| "failed")));
            }
        }
        if !why.is_empty() {
            self.fail(&why.join("; "));
        }
    }

    /// Prints the whole console on stderr and panics with `why`, QEMU's stderr and the console's
    /// last 40 lines.
    pub fn fail(&self, why: &str) -> ! {
        eprintln!("==== VM console ====\n{}\n==== QEMU stderr ====\n{}\n====", self.console, self.stderr);
        panic!(
            "VM: {why}\nQEMU exit: {:?}; stderr: {}\nconsole tail:\n{}",
            self.exit,
            self.stderr.trim(),
            self.tail(40)
        );
    }

    /// The console's last `n` lines.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.console.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// One VM NIC as a VM runtime derives it from a CNI result in tc-redirect-tap's convention (what
/// braid's `vmtap` returns): the VM interface (`sandbox` = the container ID), its tap (the
/// interface of the same name in the pod namespace), the IPs that point at the VM interface, and
/// the routes that leave by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmNic {
    /// The tap QEMU opens, in the pod namespace (also the VM interface's name).
    pub tap: String,
    /// The VM interface's MAC: the guest NIC's (the pod interface's, which the pod network knows).
    pub mac: String,
    /// `address/prefix` of every IP whose `interface` is the VM interface.
    pub addresses: Vec<String>,
    /// The gateways of those IPs.
    pub gateways: Vec<String>,
    /// `(dst, gateway)` of the result's routes that leave by this NIC; gateway `None` for a route
    /// on the link.
    pub routes: Vec<(String, Option<String>)>,
}

/// The VM NICs of `result`, in order, as a runtime pairs them: firecracker-go-sdk's
/// `cni/internal/cniutil.go` (`VMTapPair`: the VM interface is the one whose `sandbox` is the VM's
/// ID, its tap the interface of the same name) with the tap's `sandbox` required to be `netns`,
/// and `cni/vmconf` (`StaticNetworkConfFrom`: the VM interface's MAC and IPs). A CNI result does
/// not say which interface a route leaves by; the rule is `vmtap`'s (`result::routes_of`): the
/// routes whose gateway lies in one of the NIC's subnets, and routes without a gateway on the
/// first NIC. An error names the VM interface that has no tap, or says there is no VM interface.
pub fn vm_nics(result: &CniResult, container_id: &str, netns: &str) -> Result<Vec<VmNic>, String> {
    let mut out = Vec::new();
    let vms =
        result.interfaces.iter().enumerate().filter(|(_, i)| !container_id.is_empty() && i.sandbox == container_id);
    for (k, vm) in vms {
        if !result.interfaces.iter().any(|t| t.name == vm.name && t.sandbox == netns) {
            return Err(format!(
                "VM interface {} (interfaces[{k}]) has no tap: no interface named {0} with sandbox {netns}",
                vm.name
            ));
        }
        let ips: Vec<_> = result.ips.iter().filter(|ip| ip.interface == Some(k as i64)).collect();
        let first = out.is_empty();
        let routes = result
            .routes
            .iter()
            .filter(|rt| match rt.gw {
                Some(gw) => ips.iter().any(|ip| ip.address.contains(gw)),
                None => first,
            })
            .map(|rt| (rt.dst.to_string(), rt.gw.map(|g| g.to_string())))
            .collect();
        out.push(VmNic {
            tap: vm.name.clone(),
            mac: vm.mac.clone(),
            addresses: ips.iter().map(|ip| ip.address.to_string()).collect(),
            gateways: ips.iter().filter_map(|ip| ip.gateway.map(|g| g.to_string())).collect(),
            routes,
        });
    }
    if out.is_empty() {
        return Err(format!(
            "the result has no VM interface (no interface with sandbox {container_id:?}): was vmtap in the chain?"
        ));
    }
    Ok(out)
}

/// The guest a runtime boots on `nics` (no probes yet): one virtio NIC each with its addresses
/// and its routes; the first NIC's first gateway is the default route (one default route per
/// guest, as the pod had), so default routes of the result are not repeated.
pub fn guest_for(nics: &[VmNic]) -> Guest {
    let mut guest = Guest::new();
    for (k, n) in nics.iter().enumerate() {
        let mut nic = Nic::new(&n.tap, &n.mac);
        for a in &n.addresses {
            nic = nic.address(a);
        }
        if k == 0 {
            if let Some(g) = n.gateways.first() {
                nic = nic.gateway(g);
            }
        }
        for (dst, via) in &n.routes {
            if !dst.ends_with("/0") {
                nic = nic.route(dst, via.as_deref());
            }
        }
        guest = guest.nic(nic);
    }
    guest
}

/// The tc-redirect-tap wiring a VM runtime does for a pod interface (the test playing the
/// runtime): in `netns`, creates tap `tap` (up), an ingress qdisc on it and on `ifname`, and on
/// each a match-all u32 filter redirecting every frame to the other's egress. Everything lives in
/// the test's namespace and goes with it.
pub fn wire_tap(netns: impl AsRef<Path>, ifname: &str, tap: &str) {
    let ns = format!("--net={}", netns_path(netns.as_ref()).display());
    let run = |args: &[&str]| {
        run_ok(Command::new("nsenter").arg(&ns).args(args));
    };
    run(&["ip", "tuntap", "add", "dev", tap, "mode", "tap"]);
    run(&["ip", "link", "set", tap, "up"]);
    for (from, to) in [(ifname, tap), (tap, ifname)] {
        run(&["tc", "qdisc", "add", "dev", from, "ingress"]);
        run(&[
            "tc", "filter", "add", "dev", from, "parent", "ffff:", "protocol", "all", "u32", "match", "u8", "0", "0",
            "action", "mirred", "egress", "redirect", "dev", to,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest() -> Guest {
        Guest::new()
            .nic(
                Nic::new("tap0", "0A:58:C6:12:00:02")
                    .address("198.18.1.2/24")
                    .address("2001:db8:1::2/64")
                    .gateway("198.18.1.1")
                    .route("198.19.1.0/24", Some("198.18.1.1")),
            )
            .nic(Nic::new("tap1", "0a:58:c6:12:01:02").address("198.18.2.2/24"))
            .ping(0, "198.18.1.1")
            .ping_tries(1, "2001:db8:1::1", 1)
            .shell("test -e /sys/class/net/eth1 && echo 'it''s'")
    }

    #[test]
    fn the_script_configures_nics_before_routes_and_quotes_everything() {
        let s = guest().script();
        let lines: Vec<&str> = s.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "nic 0 '0a:58:c6:12:00:02'",
                "nic 1 '0a:58:c6:12:01:02'",
                "addr 0 '198.18.1.2/24'",
                "addr 0 '2001:db8:1::2/64'",
                "up 0",
                "addr 1 '198.18.2.2/24'",
                "up 1",
                "route 0 4 '198.19.1.0/24' '198.18.1.1'",
                "route 0 4 default '198.18.1.1'",
                "show",
                "probe 0 ping 4 0 '198.18.1.1' 5",
                "probe 1 ping 6 1 '2001:db8:1::1' 1",
                r"probe 2 sh 'test -e /sys/class/net/eth1 && echo '\''it'\'''\''s'\'''",
            ]
        );
    }

    #[test]
    fn malformed_values_are_refused_by_name() {
        for (g, want) in [
            (Guest::new().nic(Nic::new("tap0", "0a:58:c6:12:00")), "MAC"),
            (Guest::new().nic(Nic::new("tap;rm", "0a:58:c6:12:00:02")), "tap name"),
            (Guest::new().nic(Nic::new("tap0", "0a:58:c6:12:00:02").address("198.18.1.2")), "address/prefix"),
            (Guest::new().nic(Nic::new("tap0", "0a:58:c6:12:00:02").address("198.18.1.2/33")), "prefix length"),
            (
                Guest::new().nic(Nic::new("t", "0a:58:c6:12:00:02").route("198.19.0.0/16", Some("2001:db8::1"))),
                "families",
            ),
            (Guest::new().ping(0, "198.18.1.1"), "the guest has 0"),
            (Guest::new().nic(Nic::new("t", "0a:58:c6:12:00:02").gateway("$(reboot)")), "not an IP address"),
        ] {
            let err = std::panic::catch_unwind(|| g.script()).unwrap_err();
            let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
        }
    }

    #[test]
    fn the_console_is_parsed_even_with_kernel_messages_on_the_same_line() {
        let console = "SeaBIOS\nBRAID-NIC 0 eth0 0a:58:c6:12:00:02\n[ 1.2] virtio_net: x BRAID-NIC 1 eth1 0a\n\
                       BRAID-SHOW begin\n1: lo: <LOOPBACK>\nBRAID-SHOW end\nBRAID-ERROR ip -6 route add x\n\
                       BRAID-PROBE 0 ok\nBRAID-PROBE 1 fail\nBRAID-DONE\n[ 2.2] reboot: Power down\n";
        let run = VmRun::parse(&guest(), console);
        assert!(run.done);
        assert_eq!(run.nics, [Some("eth0".to_string()), Some("eth1".to_string())]);
        assert_eq!(run.network, "1: lo: <LOOPBACK>\n");
        assert_eq!(run.errors, ["ip -6 route add x"]);
        assert_eq!(run.probes.iter().map(|p| p.ok).collect::<Vec<_>>(), [Some(true), Some(false), None]);
        assert!(run.probe_ok(0) && !run.probe_ok(1) && !run.probe_ok(2) && !run.probe_ok(3));
        let err = std::panic::catch_unwind(|| run.assert_ok()).unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("probe 1 (ping 2001:db8:1::1 from nic 1 (up to 1 tries)): failed"), "{msg}");
        assert!(msg.contains("probe 2") && msg.contains("not reported"), "{msg}");
        assert!(msg.contains("reboot: Power down"), "the tail is attached: {msg}");
    }

    fn vm_result(tap_sandbox: &str) -> CniResult {
        let v = serde_json::json!({
            "cniVersion": "1.1.0",
            "interfaces": [
                {"name": "eth0", "mac": "0a:58:c6:12:00:02", "sandbox": "/run/netns/pod"},
                {"name": "net1", "mac": "0a:58:c6:12:01:02", "sandbox": "/run/netns/pod"},
                {"name": "tap0", "mac": "aa:aa:aa:aa:aa:00", "sandbox": tap_sandbox},
                {"name": "tap0", "mac": "0a:58:c6:12:00:02", "sandbox": "ctr1"},
                {"name": "tap1", "mac": "aa:aa:aa:aa:aa:01", "sandbox": tap_sandbox},
                {"name": "tap1", "mac": "0a:58:c6:12:01:02", "sandbox": "ctr1"}
            ],
            "ips": [
                {"address": "198.18.1.2/24", "gateway": "198.18.1.1", "interface": 0},
                {"address": "198.18.2.2/24", "gateway": "198.18.2.1", "interface": 1},
                {"address": "198.18.1.2/24", "gateway": "198.18.1.1", "interface": 3},
                {"address": "198.18.2.2/24", "gateway": "198.18.2.1", "interface": 5}
            ],
            "routes": [
                {"dst": "0.0.0.0/0", "gw": "198.18.1.1"},
                {"dst": "198.19.2.0/24", "gw": "198.18.2.1"},
                {"dst": "198.19.9.0/24"}
            ]
        });
        cni_types::AnyResult::from_bytes(v.to_string().as_bytes()).unwrap().to_latest()
    }

    #[test]
    fn vm_nics_pair_taps_and_hand_each_nic_its_ips_and_routes() {
        let nics = vm_nics(&vm_result("/run/netns/pod"), "ctr1", "/run/netns/pod").unwrap();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(nics.len(), 2);
        assert_eq!((nics[0].tap.as_str(), nics[0].mac.as_str()), ("tap0", "0a:58:c6:12:00:02"));
        assert_eq!(nics[0].addresses, s(&["198.18.1.2/24"]));
        assert_eq!(nics[0].gateways, s(&["198.18.1.1"]));
        assert_eq!(
            nics[0].routes,
            [("0.0.0.0/0".to_string(), Some("198.18.1.1".to_string())), ("198.19.9.0/24".to_string(), None)]
        );
        assert_eq!((nics[1].tap.as_str(), nics[1].mac.as_str()), ("tap1", "0a:58:c6:12:01:02"));
        assert_eq!(nics[1].routes, [("198.19.2.0/24".to_string(), Some("198.18.2.1".to_string()))]);

        let lines: Vec<String> = guest_for(&nics).script().lines().skip(1).map(str::to_string).collect();
        assert_eq!(
            lines,
            [
                "nic 0 '0a:58:c6:12:00:02'",
                "nic 1 '0a:58:c6:12:01:02'",
                "addr 0 '198.18.1.2/24'",
                "up 0",
                "addr 1 '198.18.2.2/24'",
                "up 1",
                "route 0 4 '198.19.9.0/24'",
                "route 0 4 default '198.18.1.1'",
                "route 1 4 '198.19.2.0/24' '198.18.2.1'",
                "show",
            ]
        );
    }

    #[test]
    fn vm_nics_name_a_missing_tap_and_a_result_without_vm_interfaces() {
        let err = vm_nics(&vm_result("/run/netns/other"), "ctr1", "/run/netns/pod").unwrap_err();
        assert!(err.contains("tap0") && err.contains("/run/netns/pod"), "{err}");
        let err = vm_nics(&vm_result("/run/netns/pod"), "ctr2", "/run/netns/pod").unwrap_err();
        assert!(err.contains("no VM interface") && err.contains("ctr2"), "{err}");
        let err = vm_nics(&vm_result("/run/netns/pod"), "", "/run/netns/pod").unwrap_err();
        assert!(err.contains("no VM interface"), "{err}");
    }

    #[test]
    fn module_names_use_underscores() {
        assert_eq!(module_name("kernel/drivers/virtio/virtio_pci.ko").as_deref(), Some("virtio_pci"));
        assert_eq!(module_name("virtio-rng.ko").as_deref(), Some("virtio_rng"));
        assert_eq!(module_name("virtio_net.ko.xz").as_deref(), Some("virtio_net"));
        assert_eq!(module_name("README"), None);
    }

    #[test]
    fn a_bare_netns_name_is_under_run_netns() {
        assert_eq!(netns_path(Path::new("pod1")), Path::new("/run/netns/pod1"));
        assert_eq!(netns_path(Path::new("/proc/1/ns/net")), Path::new("/proc/1/ns/net"));
    }
}
