//! The guest's kernel: Debian's cloud kernel package, named by `apt-cache`, downloaded once into
//! a cache and unpacked there (never installed on the machine).

use crate::build_dir;
use crate::runtime::run_ok;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The metapackage whose dependency names the kernel (a cloud kernel: small, virtio built as
/// modules).
pub const KERNEL_METAPACKAGE: &str = "linux-image-cloud-amd64";

/// The cache directory for the kernel: `$BRAID_VM_CACHE`, else `vm/` in cargo's target directory
/// (beside the build directory, so `cargo clean` removes it and a clean clone downloads once).
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BRAID_VM_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let build = build_dir();
    build.parent().map(|target| target.join("vm")).unwrap_or_else(|| build.join("vm"))
}

/// The unpacked kernel package in the cache, downloaded first if needed.
pub(super) fn kernel_tree(cache: &Path) -> PathBuf {
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

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A staging directory `<cache>/.stage-<pid>-<n>-<what>`, removed on drop: whatever is built
/// there is renamed into place whole, so a concurrent process never sees half of it.
pub(super) struct Stage(PathBuf);

impl Stage {
    pub(super) fn new(cache: &Path, what: &str) -> Stage {
        let p = cache.join(format!(".stage-{}-{}-{what}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst)));
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        Stage(p)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the staging directories of processes that no longer run (killed mid-download).
pub(super) fn remove_stale_stages(cache: &Path) {
    for e in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix(".stage-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
