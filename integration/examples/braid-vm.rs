//! A tiny VM runtime for scripts/demo.sh: boots a VM on a CNI result in tc-redirect-tap's
//! convention (braid's `vmtap` at the end of the chain) the way a VM runtime does, and shows what
//! the guest sees. An example target of the integration crate, on its VM support
//! (`src/vm/`): QEMU under TCG inside the pod namespace, Debian's cloud kernel, a busybox
//! initramfs. Nothing of it goes into the plugins.
//!
//! ```text
//! braid-vm --netns PATH --container-id ID [RESULT.json | -]     (the result on stdin by default)
//! ```
//!
//! The NICs are derived from the result by `vm::vm_nics` (the VM interface is the one whose
//! `sandbox` is the container ID, its tap the interface of the same name in `PATH`; its MAC, IPs
//! and routes go to the guest NIC) and `vm::guest_for`; the guest pings every gateway of every
//! NIC from that NIC. Prints the NICs, then the guest's console (its `ip addr`, routes and
//! pings). Boot files go below `$TMPDIR` and are removed; QEMU is killed by PID on every path.
//!
//! Exit codes: 0 every NIC found and every ping answered, 1 the VM did not get its networks,
//! 2 bad command line or result.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs)]

use braid_integration::vm::{guest_for, vm_nics, Nic, Probe, Vm, VmImage, VmRun};
use cni_types::{AnyResult, CniResult};
use std::io::Read;
use std::time::Instant;

const USAGE: &str = "usage: braid-vm --netns PATH --container-id ID [RESULT.json | -]";

fn main() {
    std::process::exit(match run(std::env::args().skip(1).collect()) {
        Ok(()) => 0,
        Err((code, msg)) => {
            eprintln!("braid-vm: {msg}");
            code
        }
    });
}

struct Args {
    netns: String,
    container_id: String,
    file: Option<String>,
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let (mut netns, mut container_id, mut file) = (None, None, None);
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--netns" | "--container-id" => {
                let v = it.next().filter(|v| !v.is_empty()).ok_or_else(|| format!("{a} needs a value; {USAGE}"))?;
                *if a == "--netns" { &mut netns } else { &mut container_id } = Some(v.clone());
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            f if file.is_none() && (f == "-" || !f.starts_with('-')) => file = Some(f.to_string()),
            other => return Err(format!("unexpected argument {other:?}; {USAGE}")),
        }
    }
    Ok(Args {
        netns: netns.ok_or_else(|| format!("--netns is required; {USAGE}"))?,
        container_id: container_id.ok_or_else(|| format!("--container-id is required; {USAGE}"))?,
        file: file.filter(|f| f != "-"),
    })
}

fn read_result(file: Option<&str>) -> Result<CniResult, String> {
    let mut bytes = Vec::new();
    let from = file.unwrap_or("stdin");
    match file {
        Some(f) => bytes = std::fs::read(f).map_err(|e| format!("{f}: {e}"))?,
        None => {
            std::io::stdin().read_to_end(&mut bytes).map_err(|e| format!("stdin: {e}"))?;
        }
    }
    AnyResult::from_bytes(&bytes).map(|r| r.to_latest()).map_err(|e| format!("{from}: not a CNI result: {e}"))
}

fn describe(k: usize, n: &Nic) -> String {
    let mut s = format!("NIC {k}: tap {:<6} MAC {}  {}", n.tap, n.mac, n.addresses.join(" "));
    if !n.gateways().is_empty() {
        s += &format!("  gateway {}", n.gateways().join(" "));
    }
    for r in n.routes.iter().filter(|r| r.dst != "default") {
        s += &format!("  route {}{}", r.dst, r.via.as_deref().map(|v| format!(" via {v}")).unwrap_or_default());
    }
    s
}

fn run(argv: Vec<String>) -> Result<(), (i32, String)> {
    let args = parse_args(&argv).map_err(|e| (2, e))?;
    let result = read_result(args.file.as_deref()).map_err(|e| (2, e))?;
    let nics = vm_nics(&result, &args.container_id, &args.netns).map_err(|e| (2, e))?;
    println!("the VM's NICs, read from the result as a VM runtime reads it (VM interface: sandbox = container ID;");
    println!("its tap: the interface of the same name in the pod namespace; the VM interface's MAC, IPs and routes):");
    for (k, n) in nics.iter().enumerate() {
        println!("  {}", describe(k, n));
    }
    let mut guest = guest_for(&nics);
    for (k, n) in nics.iter().enumerate() {
        for g in n.gateways() {
            guest = guest.ping(k, g);
        }
    }
    if guest.probes.is_empty() {
        return Err((2, "no NIC of the result has a gateway: nothing to ping".to_string()));
    }

    let image = VmImage::prepare();
    println!(
        "booting QEMU (TCG, kernel {}) in {} with {} virtio NICs; the guest configures them and pings each gateway from its NIC",
        image.release,
        args.netns,
        nics.len()
    );
    let t0 = Instant::now();
    let vm = Vm::boot(&args.netns, image, &guest);
    let secs = t0.elapsed().as_secs_f64();
    print_guest(&vm);
    let failures = failures(&vm);
    if failures.is_empty() {
        println!("the VM booted, configured its NICs and got every reply in {secs:.1} s");
        return Ok(());
    }
    eprintln!("==== VM console ====\n{}\n==== QEMU stderr ====\n{}\n====", vm.console, vm.stderr.trim());
    Err((1, format!("the VM did not get its networks: {}", failures.join("; "))))
}

/// The guest's view: which interface each NIC became, `ip addr` and the routes, the pings.
fn print_guest(vm: &VmRun) {
    println!("--- the guest's console ---");
    for (k, n) in vm.nics.iter().enumerate() {
        println!("NIC {k} is the guest's {}", n.as_deref().unwrap_or("(not found)"));
    }
    print!("{}", vm.network);
    let mut in_probes = false;
    for line in vm.console.lines() {
        if line.contains("BRAID-SHOW end") {
            in_probes = true;
            continue;
        }
        if !in_probes || line.trim().is_empty() {
            continue;
        }
        if line.contains("BRAID-DONE") {
            break;
        }
        let Some(at) = line.find("BRAID-PROBE") else {
            println!("{line}");
            continue;
        };
        let k = line[at..].split_whitespace().nth(1).and_then(|k| k.parse::<usize>().ok());
        if let Some(p) = k.and_then(|k| vm.probes.get(k)) {
            let verdict = if p.ok == Some(true) { "ok" } else { "FAILED" };
            println!("=> {}: {verdict}", p.probe);
        }
    }
    println!("---");
}

fn failures(vm: &VmRun) -> Vec<String> {
    let mut why = Vec::new();
    if !vm.done {
        why.push(if vm.timed_out { "the hang guard ran out (QEMU killed)" } else { "the guest never finished" }.into());
    }
    for (k, n) in vm.nics.iter().enumerate() {
        if n.is_none() {
            why.push(format!("NIC {k} not found in the guest"));
        }
    }
    why.extend(vm.errors.iter().map(|e| format!("guest error: {e}")));
    for p in &vm.probes {
        if p.ok != Some(true) {
            let what = match &p.probe {
                Probe::Ping { nic, addr, .. } => format!("no reply from {addr} on NIC {nic}"),
                other => other.to_string(),
            };
            why.push(what);
        }
    }
    why
}
