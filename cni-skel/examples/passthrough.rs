//! The smallest useful chained plugin, and a plugin author's starting point: it requires a
//! `prevResult`, passes it on unchanged (converted to the configuration's version by the skel),
//! and has nothing to undo on DEL.
//!
//! Try it: `CNI_COMMAND=VERSION cargo run -q -p cni-skel --example passthrough`

use cni_skel::{CmdArgs, Plugin};
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::CniError;

struct Passthrough;

impl Plugin for Passthrough {
    fn about(&self) -> Option<String> {
        Some("braid example passthrough plugin".into())
    }

    fn add(&self, args: &CmdArgs) -> Result<cni_types::CniResult, CniError> {
        let conf = args.conf()?;
        let prev = conf
            .prev_result()
            .map_err(|e| CniError::new(cni_types::error::DECODING_FAILURE, e.to_string()))?
            .ok_or_else(|| CniError::new(INVALID_NETWORK_CONFIG, "passthrough must be called as a chained plugin"))?;
        Ok(prev.to_latest())
    }

    fn del(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }
}

fn main() {
    std::process::exit(cni_skel::main(&Passthrough));
}
