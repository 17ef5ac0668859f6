//! What the engine's test files share: a state directory per test and the call they make.
// Each test file uses what it needs of this.
#![allow(dead_code, clippy::unwrap_used)]

use braid_attach::state::StateStore;
use braid_attach::{Attacher, Deadline};
use cni_runtime::chain::RuntimeConf as Call;
use cni_runtime::invoke::{Exec, InvokeError};
use serde_json::json;
use std::path::PathBuf;

/// A test's state directory, removed on drop.
pub struct World {
    pub dir: PathBuf,
}

impl World {
    /// `braid-attach-<tag>-<pid>` under the temporary directory, empty.
    pub fn new(tag: &str) -> World {
        let dir = std::env::temp_dir().join(format!("braid-attach-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        World { dir }
    }

    /// An attacher with this state, one delegate after another, no deadline.
    pub fn attacher<'a>(&self, exec: &'a (dyn Exec + Sync)) -> Attacher<'a> {
        self.attacher_with(exec, false, Deadline::none())
    }

    /// An attacher with this state, delegates `parallel` or not, within `deadline`.
    pub fn attacher_with<'a>(&self, exec: &'a (dyn Exec + Sync), parallel: bool, deadline: Deadline) -> Attacher<'a> {
        Attacher {
            exec,
            paths: vec!["/opt/cni/bin".into()],
            store: StateStore::open(&self.dir).unwrap(),
            parallel,
            deadline,
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The runtime's call: container `ctr1`, `eth0` in `/run/netns/x`.
pub fn call() -> Call {
    Call { container_id: "ctr1".into(), netns: "/run/netns/x".into(), ifname: "eth0".into(), ..Call::default() }
}

/// A delegate's successful ADD with one address.
pub fn ok_result(addr: &str) -> Result<Vec<u8>, InvokeError> {
    Ok(json!({"cniVersion": "1.0.0", "ips": [{"address": addr}]}).to_string().into_bytes())
}
