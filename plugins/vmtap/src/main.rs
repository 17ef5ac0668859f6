//! `vmtap`: a chained CNI plugin that hands every pod interface of `prevResult` to a VM. See
//! README.md for the keys, the result convention and how a VMM uses it.

/// Plugins live for milliseconds and ship as static musl binaries, whose allocator hands every
/// freed block back to the kernel: keep small blocks instead (glibc's allocator keeps them
/// itself, so elsewhere the system's is used).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    std::process::exit(cni_skel::main(&vmtap::Vmtap));
}
