//! The image every boot starts from: the kernel of [`super::kernel`] and an initramfs packed on
//! the spot — static busybox, that kernel's virtio-net modules, and `init.sh` as `/init`.

use super::kernel::{cache_dir, kernel_tree, remove_stale_stages, Stage};
use crate::runtime::BUSYBOX;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

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

/// The init script packed as the guest's `/init`.
const INIT: &str = include_str!("init.sh");

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
    pub(super) initramfs: Vec<u8>,
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

pub(super) fn write_file(path: &Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The tree below `root` as a newc archive (`busybox cpio -o -H newc`; there is no `cpio`
/// binary on the machine), directories before their contents.
pub(super) fn newc_archive(root: &Path) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_use_underscores() {
        assert_eq!(module_name("kernel/drivers/virtio/virtio_pci.ko").as_deref(), Some("virtio_pci"));
        assert_eq!(module_name("virtio-rng.ko").as_deref(), Some("virtio_rng"));
        assert_eq!(module_name("virtio_net.ko.xz").as_deref(), Some("virtio_net"));
        assert_eq!(module_name("README"), None);
    }
}
