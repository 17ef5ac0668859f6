//! `delegator`: attaches several networks in one ADD (the Multus job), crash-safely, and
//! returns the first delegate's result or all of them merged. See README.md for every key.

mod config;
mod kubernetes;
mod plugin;
mod update;

/// Plugins live for milliseconds and ship as static musl binaries, whose allocator hands every
/// freed block back to the kernel: keep small blocks instead (glibc's allocator keeps them
/// itself, so elsewhere the system's is used).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: braid_alloc::PluginAlloc = braid_alloc::PluginAlloc::new();

fn main() {
    let mut args = std::env::args_os().skip(1);
    let code = match args.next() {
        // braid's own mode for the node agent (src/update.rs); a runtime passes no argument.
        Some(a) if a == "update" => update::main(args),
        _ => cni_skel::main(&plugin::Delegator),
    };
    std::process::exit(code);
}
