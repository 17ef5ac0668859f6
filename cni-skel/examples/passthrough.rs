//! The smallest useful chained plugin, and a plugin author's starting point: it requires a
//! `prevResult`, passes it on unchanged (converted to the configuration's version by the skel),
//! and has nothing to undo on DEL.
//!
//! Try it: `CNI_COMMAND=VERSION cargo run -q -p cni-skel --example passthrough`

use cni_skel::prelude::*;

struct Passthrough;

impl Plugin for Passthrough {
    fn about(&self) -> Option<String> {
        Some("braid example passthrough plugin".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        // Code 6 for a prevResult that does not parse, 7 for none at all.
        args.conf()?.require_prev_result()
    }

    fn del(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }
}

fn main() {
    std::process::exit(cni_skel::main(&Passthrough));
}
