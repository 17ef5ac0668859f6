//! `sysctl`: the example plugin's binary; the plugin itself is in the library, where its
//! tests can reach it.

fn main() {
    std::process::exit(cni_skel::main(&sysctl::Sysctl));
}
