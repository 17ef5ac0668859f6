//! What a meta-plugin passes on to its delegates beyond ADD and DEL: CHECK of every recorded
//! delegate with its own result, and GC's list of valid attachments (after the stale ones
//! were deleted, [`crate::teardown`]). STATUS is [`crate::status`].

use crate::attach::{describe, each, thread_panicked, Attacher, Order};
use crate::delegate::{ignore_unknown, Delegate, DelegateConfig};
use crate::plan::Plan;
use cni_runtime::chain::RuntimeConf;
use cni_runtime::invoke;
use cni_skel::log::Logger;
use cni_types::config::GcAttachment;
use cni_types::error::{DECODING_FAILURE, INTERNAL, UNKNOWN_CONTAINER};
use cni_types::version::Command;
use cni_types::CniError;
use serde_json::{json, Value};

impl Attacher<'_> {
    /// CHECK every recorded delegate with its own result as prevResult; delegates below 0.4.0
    /// are skipped (logged at info). Errors name the delegate.
    pub fn check(&self, call: &RuntimeConf, log: &mut Logger) -> Result<(), CniError> {
        let key = Self::key(call)?;
        let Some(bytes) = self.store.read(&key)? else {
            return Err(CniError::new(
                UNKNOWN_CONTAINER,
                format!("no attachment state for {}@{}: was ADD run?", call.container_id, call.ifname),
            ));
        };
        let state = Plan::decode(&bytes).ok_or_else(|| {
            CniError::new(
                DECODING_FAILURE,
                format!("corrupt attachment state for {}@{} ({} bytes)", call.container_id, call.ifname, bytes.len()),
            )
        })?;
        let mut indices = Vec::new();
        for (i, a) in state.attachments.iter().enumerate() {
            if Command::Check.allowed_in(&a.cni_version).unwrap_or(false) {
                indices.push(i);
            } else {
                log.info(format_args!("{} speaks {}: CHECK skipped", describe(i, a), a.cni_version));
            }
        }
        if !state.parallel {
            for &i in &indices {
                let a = &state.attachments[i];
                self.replay(Command::Check, call, a)
                    .map_err(|e| e.context(format_args!("{} CHECK failed", describe(i, a))))?;
            }
            return Ok(());
        }
        // All at once; the first failure in plan order is the answer.
        let check = |i: usize| self.replay(Command::Check, call, &state.attachments[i]);
        let outcomes = each(Order::AllAtOnce, &indices, &check, &|| Err(thread_panicked()));
        for (&i, outcome) in indices.iter().zip(outcomes) {
            outcome.map_err(|e| e.context(format_args!("{} CHECK failed", describe(i, &state.attachments[i]))))?;
        }
        Ok(())
    }

    /// GC: DEL every recorded attachment not in `valid` from its state and drop the state, then
    /// forward the valid attachments to every delegate (of 1.1.0 or later). Everything is
    /// tried; failures are reported together.
    pub fn gc(&self, delegates: &[Delegate], valid: &[GcAttachment], log: &mut Logger) -> Result<(), CniError> {
        let mut errors = Vec::new();
        for key in self.store.keys()? {
            if !valid.iter().any(|a| a.container_id == key.container_id() && a.ifname == key.ifname()) {
                if let Err(e) = self.gc_stale(&key, log) {
                    errors.push(e.msg);
                }
            }
        }
        let attachments: Value =
            valid.iter().map(|a| json!({"containerID": a.container_id, "ifname": a.ifname})).collect();
        let call = RuntimeConf::default();
        for (i, d) in delegates.iter().enumerate() {
            let result = match &d.config {
                // As libcni does for lists: GC does not exist below 1.1.0.
                DelegateConfig::Plugin(c) if !Command::Gc.allowed_in(c.version()).unwrap_or(false) => Ok(()),
                DelegateConfig::Plugin(c) => {
                    let mut conf = c.clone();
                    conf.set(cni_types::config::GC_VALID_ATTACHMENTS, attachments.clone());
                    conf.set(cni_types::config::GC_ATTACHMENTS_LEGACY, attachments.clone());
                    let inv = self.invocation(Command::Gc, &call, "", &ignore_unknown(""));
                    self.exec
                        .find(c.plugin_type(), &self.paths)
                        .and_then(|p| invoke::exec_without_result(&self.until_end(), &p, &conf.to_bytes(), &inv))
                        .map_err(|e| e.to_string())
                }
                DelegateConfig::List(l) => {
                    self.chain_with(&self.until_end()).gc(l, Some(valid)).map_err(|e| e.to_string())
                }
            };
            if let Err(e) = result {
                errors.push(format!("delegate {i} (network {:?}): {e}", d.name()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(CniError::new(INTERNAL, format!("GC failed: {}", errors.join("; "))))
        }
    }
}
