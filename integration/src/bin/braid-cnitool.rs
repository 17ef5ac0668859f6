//! A minimal CNI runtime (like `cnitool`) on top of `cni_runtime::chain`, for the demo and for
//! operators poking at a conflist by hand. It runs plugins in the namespace it is started in.
//!
//! ```text
//! braid-cnitool add|check|del|status|gc CONFLIST --netns PATH --ifname NAME --id CONTAINERID
//!               [--cache DIR] [--path DIR:DIR] [--args K=V;K=V] [--timeout-ms N]
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use cni_runtime::chain::{load_list, Chain, RuntimeConf};
use cni_runtime::invoke::RawExec;
use std::path::PathBuf;
use std::time::Duration;

fn usage() -> i32 {
    eprintln!(
        "usage: braid-cnitool add|check|del|status|gc CONFLIST --netns PATH --ifname NAME --id CONTAINERID \
         [--cache DIR] [--path DIRS] [--args K=V;...] [--timeout-ms N]"
    );
    2
}

fn main() {
    std::process::exit(real_main());
}

fn real_main() -> i32 {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (Some(verb), Some(file)) = (argv.first(), argv.get(1)) else {
        return usage();
    };
    let mut rt = RuntimeConf::default();
    let mut cache = PathBuf::from("/var/lib/cni");
    let mut path = std::env::var("CNI_PATH").unwrap_or_else(|_| "/usr/lib/cni".into());
    let mut timeout = Duration::from_secs(60);
    let mut it = argv[2..].iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else {
            return usage();
        };
        match flag.as_str() {
            "--netns" => rt.netns = value.clone(),
            "--ifname" => rt.ifname = value.clone(),
            "--id" => rt.container_id = value.clone(),
            "--cache" => cache = value.into(),
            "--path" => path = value.clone(),
            "--timeout-ms" => timeout = Duration::from_millis(value.parse().unwrap_or(60_000)),
            "--args" => match cni_types::args::split_pairs(value) {
                Ok(_) => rt.args = value.clone(),
                Err(e) => {
                    eprintln!("{e}");
                    return 2;
                }
            },
            _ => return usage(),
        }
    }
    let list = match load_list(std::path::Path::new(file)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let exec = RawExec { timeout: Some(timeout), ..RawExec::default() };
    let chain = Chain {
        exec: &exec,
        paths: path.split(':').filter(|p| !p.is_empty()).map(Into::into).collect(),
        cache_dir: cache,
    };
    let outcome = match verb.as_str() {
        "add" => chain.add(&list, &rt).map(|r| println!("{}", r.to_json_pretty())),
        "check" => chain.check(&list, &rt),
        "del" => chain.del(&list, &rt),
        "status" => chain.status(&list),
        "gc" => chain.gc(&list, Some(&[])),
        _ => return usage(),
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{verb} failed: {e}");
            1
        }
    }
}
