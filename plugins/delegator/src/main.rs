//! `delegator`: attaches several networks in one ADD (the Multus job), crash-safely, and
//! returns the first delegate's result or all of them merged. See README.md for every key.

mod config;
mod plugin;

fn main() {
    std::process::exit(cni_skel::main(&plugin::Delegator));
}
