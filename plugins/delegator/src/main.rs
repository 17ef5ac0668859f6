//! `delegator`: attaches several networks in one ADD (the Multus job), crash-safely, and
//! returns the first delegate's result or all of them merged. See README.md for every key.

mod config;
mod kubernetes;
mod plugin;

/// Plugins live for milliseconds: keep small blocks instead of handing them back to the kernel.
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    std::process::exit(cni_skel::main(&plugin::Delegator));
}
