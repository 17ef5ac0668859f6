//! `vmtap`: a chained CNI plugin that hands every pod interface of `prevResult` to a VM. See
//! README.md for the keys, the result convention and how a VMM uses it.

/// Plugins live for milliseconds: keep small blocks instead of handing them back to the kernel.
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    std::process::exit(cni_skel::main(&vmtap::Vmtap));
}
