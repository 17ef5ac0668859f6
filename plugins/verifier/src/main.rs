//! `verifier`: a chained CNI plugin that proves, with netlink, that the result matches the
//! container's network namespace — and, run with arguments, an operators' diagnostic tool.
//! See README.md for every key, the checks, and the operators' mode.

mod cli;
mod config;
mod inspect;
mod kernel;
mod plugin;
mod policy;
mod verify;

/// Plugins live for milliseconds and ship as static musl binaries, whose allocator hands every
/// freed block back to the kernel: keep small blocks instead (glibc's allocator keeps them
/// itself, so elsewhere the system's is used).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    // Runtimes exec plugins without arguments; any argument selects the operators' mode.
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = if argv.is_empty() { cni_skel::main(&plugin::Verifier) } else { cli::run(&argv) };
    std::process::exit(code);
}
