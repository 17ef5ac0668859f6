//! The attach engine shared by the delegator and the merger: run a list of delegates for one
//! container, crash-safely, and undo exactly what was done.
//!
//! * The plan — every delegate with the exact bytes it will be sent — is written durably
//!   (fsynced) as the first line of the state file *before* the first delegate runs; after each
//!   delegate a line with its result is appended. A crash at any point leaves a state file that
//!   names every delegate that may have done something; DEL of a planned delegate that never
//!   ran is harmless (DEL is idempotent). Appends are neither renamed nor fsynced: a power loss
//!   falls back to the durable plan, and on a node's disk each rename or fsync added about half
//!   a millisecond to every pod start (see docs/bench). A torn last line is ignored.
//! * If delegate *i* fails, delegates *i* … 0 get DEL in reverse (the failed one too: it may
//!   have half-attached), the state is removed once that succeeded, and the error keeps the
//!   delegate's code and names it (index, network, type, interface).
//! * DEL replays the state in reverse — what ADD sent, not today's configuration — attempting
//!   every delegate and reporting all failures together. Without a state file, or with a
//!   corrupt one, the configured delegates are deleted best-effort, so IPAM is released.
//! * One lock per container serialises ADD/DEL of that container.

use crate::state::{Key, StateStore};
use cni_runtime::chain::{build_one_config, Chain, RuntimeConf};
use cni_runtime::invoke::{self, Exec, InvokeError, Request};
use cni_types::config::GcAttachment;
use cni_types::result::AnyResult;
use cni_types::version::{self, Command};
use cni_types::{CniError, NetConf, NetConfList};
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// A delegate's configuration: one plugin, or a conflist run with libcni semantics.
#[derive(Debug, Clone, PartialEq)]
pub enum DelegateConfig {
    /// A single plugin configuration.
    Plugin(NetConf),
    /// A conflist.
    List(NetConfList),
}

/// One delegate to attach.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Delegate {
    /// What to run.
    pub config: DelegateConfig,
    /// The interface name it gets (`CNI_IFNAME` of its call).
    pub ifname: String,
    /// This attachment's own runtime requests (`mac`, `ips`, …), laid over the call's
    /// `runtimeConfig` before filtering by the delegate's capabilities.
    pub runtime_config: Map<String, Value>,
    /// Extra `CNI_ARGS` pairs for this attachment, appended to the call's (later pairs win,
    /// as in Go's `LoadArgs`).
    pub args: Option<String>,
}

impl Default for DelegateConfig {
    fn default() -> Self {
        DelegateConfig::Plugin(NetConf::default())
    }
}

impl Delegate {
    /// The `CNI_ARGS` this delegate is called with.
    pub fn effective_args(&self, call: &Call) -> String {
        match (&self.args, call.args.is_empty()) {
            (None, _) => call.args.clone(),
            (Some(extra), true) => extra.clone(),
            (Some(extra), false) => format!("{};{extra}", call.args),
        }
    }

    /// The runtime arguments offered to this delegate: the call's, with its own laid over.
    pub fn effective_capability_args(&self, call: &Call) -> Map<String, Value> {
        let mut m = call.capability_args.clone();
        m.extend(self.runtime_config.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    }

    /// The network name, for messages.
    pub fn name(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => &c.name,
            DelegateConfig::List(l) => &l.name,
        }
    }

    /// The plugin type (a list names its first plugin's), for messages.
    pub fn plugin_type(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => &c.plugin_type,
            DelegateConfig::List(l) => l.plugins.first().map_or("", |p| p.plugin_type.as_str()),
        }
    }

    /// The version it speaks.
    pub fn version(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.version(),
            DelegateConfig::List(l) => &l.cni_version,
        }
    }
}

/// The parameters of the call being served (ours, from the runtime).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Call {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// Our `CNI_IFNAME`: the state key.
    pub ifname: String,
    /// `CNI_ARGS`, passed to every delegate.
    pub args: String,
    /// Our `runtimeConfig`, offered to delegates by their declared capabilities.
    pub capability_args: Map<String, Value>,
}

/// Runs delegates and keeps their state.
pub struct Attacher<'a> {
    /// How delegates are executed.
    pub exec: &'a dyn Exec,
    /// `CNI_PATH`.
    pub paths: Vec<PathBuf>,
    /// Where state lives.
    pub store: StateStore,
}

const KIND: &str = "braidAttachV1";

/// A recorded attachment.
fn record(d: &Delegate, call: &Call, stdin: &Value) -> Value {
    json!({
        "args": d.effective_args(call),
        "capabilityArgs": d.effective_capability_args(call),
        "name": d.name(),
        "type": d.plugin_type(),
        "ifname": d.ifname,
        "cniVersion": d.version(),
        "list": matches!(d.config, DelegateConfig::List(_)),
        "config": stdin,
        "result": null,
        "phase": "planned",
    })
}

/// Reads a state file: the plan on the first line, then one record per finished delegate
/// (`{"index": i, "phase": "added", "result": …}`). A last line without its newline was torn
/// by a crash and is ignored; a plan that does not parse makes the whole state unusable.
pub fn decode_state(bytes: &[u8]) -> Option<Value> {
    let mut lines = bytes.split_inclusive(|b| *b == b'\n');
    let mut state: Value = serde_json::from_slice(lines.next()?).ok()?;
    if state["kind"] != KIND || !state["attachments"].is_array() {
        return None;
    }
    for line in lines.filter(|l| l.ends_with(b"\n")) {
        let Ok(record) = serde_json::from_slice::<Value>(line) else { continue };
        let Some(i) = record["index"].as_u64().and_then(|i| usize::try_from(i).ok()) else { continue };
        if let Some(a) = state["attachments"].get_mut(i) {
            a["result"] = record["result"].clone();
            a["phase"] = record["phase"].clone();
        }
    }
    Some(state)
}

fn describe(i: usize, d: &Value) -> String {
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    format!("delegate {i} (network {:?}, type {:?}, interface {})", s("name"), s("type"), s("ifname"))
}

fn cni(e: InvokeError) -> CniError {
    e.into_cni_error()
}

impl Attacher<'_> {
    fn path_env(&self) -> String {
        self.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")
    }

    fn chain(&self) -> Chain<'_> {
        Chain { exec: self.exec, paths: self.paths.clone(), cache_dir: self.store.dir().join("cache") }
    }

    fn runtime(&self, call: &Call, ifname: &str, args: &str, caps: Map<String, Value>) -> RuntimeConf {
        RuntimeConf {
            container_id: call.container_id.clone(),
            netns: call.netns.clone(),
            ifname: ifname.to_string(),
            args: cni_types::args::split_pairs(args).unwrap_or_default(),
            capability_args: caps,
        }
    }

    fn request(&self, command: Command, call: &Call, ifname: &str, args: &str) -> Request {
        Request {
            command,
            container_id: call.container_id.clone(),
            netns: call.netns.clone(),
            ifname: ifname.to_string(),
            args: args.to_string(),
            path: self.path_env(),
        }
    }

    /// The args and runtime arguments an attachment was recorded with.
    fn recorded(a: &Value, call: &Call) -> (String, Map<String, Value>) {
        let args = a.get("args").and_then(Value::as_str).map_or_else(|| call.args.clone(), str::to_string);
        let caps =
            a.get("capabilityArgs").and_then(Value::as_object).cloned().unwrap_or_else(|| call.capability_args.clone());
        (args, caps)
    }

    fn key(call: &Call) -> Result<Key, CniError> {
        Key::new(&call.container_id, &call.ifname)
    }

    fn state_err(e: crate::state::StateError) -> CniError {
        CniError::new(cni_types::error::IO_FAILURE, e.to_string())
    }

    /// The bytes a single-plugin delegate is sent (libcni's request building).
    fn plugin_stdin(conf: &NetConf, caps: &Map<String, Value>, prev: Option<&AnyResult>) -> Vec<u8> {
        build_one_config(conf, &conf.name, conf.version(), prev, caps)
    }

    /// The state of a plan: every delegate with the exact configuration it is (to be) sent.
    fn plan(call: &Call, delegates: &[Delegate]) -> Value {
        let attachments: Vec<Value> = delegates
            .iter()
            .map(|d| {
                let stdin = match &d.config {
                    DelegateConfig::Plugin(c) => {
                        serde_json::from_slice(&Self::plugin_stdin(c, &d.effective_capability_args(call), None))
                            .unwrap_or(Value::Null)
                    }
                    DelegateConfig::List(l) => serde_json::from_slice(&l.bytes).unwrap_or(Value::Null),
                };
                record(d, call, &stdin)
            })
            .collect();
        json!({"kind": KIND, "netns": call.netns, "attachments": attachments})
    }

    /// ADD every delegate in order; on failure everything attempted is rolled back.
    pub fn add(&self, call: &Call, delegates: &[Delegate]) -> Result<Vec<AnyResult>, CniError> {
        let key = Self::key(call)?;
        let _lock = self.store.lock(&call.container_id).map_err(Self::state_err)?;
        let mut state = Self::plan(call, delegates);
        let mut intent = serde_json::to_vec(&state).unwrap_or_default();
        intent.push(b'\n');
        self.store.create(&key, &intent).map_err(Self::state_err)?;
        let mut results = Vec::new();
        for (i, d) in delegates.iter().enumerate() {
            let outcome = match &d.config {
                DelegateConfig::Plugin(c) => {
                    let stdin = Self::plugin_stdin(c, &d.effective_capability_args(call), None);
                    let req = self.request(Command::Add, call, &d.ifname, &d.effective_args(call));
                    self.exec
                        .find(&c.plugin_type, &self.paths)
                        .and_then(|p| invoke::add(self.exec, &p, &stdin, &req))
                        .map_err(cni)
                }
                DelegateConfig::List(l) => {
                    let rt = self.runtime(call, &d.ifname, &d.effective_args(call), d.effective_capability_args(call));
                    self.chain().add(l, &rt).map_err(|e| e.to_cni_error())
                }
            };
            // A result that cannot be recorded fails like the delegate itself: DEL could not
            // replay what it does not know, so this delegate is rolled back with the others.
            let outcome = outcome.and_then(|result| {
                let value = result.to_value();
                let mut record =
                    serde_json::to_vec(&json!({"index": i, "phase": "added", "result": value})).unwrap_or_default();
                record.push(b'\n');
                self.store.append(&key, &record).map_err(|e| {
                    CniError::new(cni_types::error::IO_FAILURE, format!("its result could not be recorded: {e}"))
                })?;
                Ok((result, value))
            });
            match outcome {
                Ok((result, value)) => {
                    state["attachments"][i]["result"] = value;
                    state["attachments"][i]["phase"] = "added".into();
                    results.push(result);
                }
                Err(e) => {
                    let what = describe(i, &state["attachments"][i]);
                    let rollback = self.del_recorded(call, &state, i + 1);
                    let mut msg = format!("{what} failed: {}", e.msg);
                    if rollback.is_empty() {
                        self.store.remove(&key).map_err(Self::state_err)?;
                    } else {
                        msg.push_str(&format!("; rollback incomplete, state kept for DEL: {}", rollback.join("; ")));
                    }
                    return Err(CniError { code: e.code, msg, details: e.details });
                }
            }
        }
        Ok(results)
    }

    /// Sends DEL or CHECK to one recorded attachment: what ADD sent, with its recorded result
    /// as `prevResult` where its version has one (0.4.0 and later), with its recorded args.
    fn replay(&self, command: Command, call: &Call, a: &Value) -> Result<(), CniError> {
        let ifname = a["ifname"].as_str().unwrap_or_default();
        let (args, caps) = Self::recorded(a, call);
        if a["list"] == true {
            let bytes = serde_json::to_vec(&a["config"]).unwrap_or_default();
            let list = NetConfList::parse(&bytes)
                .map_err(|e| CniError::new(cni_types::error::DECODING_FAILURE, e.to_string()))?;
            let rt = self.runtime(call, ifname, &args, caps);
            let chain = self.chain();
            let outcome = if command == Command::Check { chain.check(&list, &rt) } else { chain.del(&list, &rt) };
            return outcome.map_err(|e| e.to_cni_error());
        }
        let mut conf = a["config"].clone();
        let has_prev =
            version::greater_than_or_equal_to(a["cniVersion"].as_str().unwrap_or(""), "0.4.0").unwrap_or(false);
        if has_prev && !a["result"].is_null() {
            conf["prevResult"] = a["result"].clone();
        }
        let stdin = serde_json::to_vec(&conf).unwrap_or_default();
        let req = self.request(command, call, ifname, &args);
        self.exec
            .find(a["type"].as_str().unwrap_or_default(), &self.paths)
            .and_then(|p| invoke::run(self.exec, &p, &stdin, &req))
            .map_err(cni)
    }

    /// DEL the first `count` attachments of a state, last first; returns the failures.
    fn del_recorded(&self, call: &Call, state: &Value, count: usize) -> Vec<String> {
        let empty = Vec::new();
        let atts = state["attachments"].as_array().unwrap_or(&empty);
        let mut errors = Vec::new();
        for i in (0..count.min(atts.len())).rev() {
            let a = &atts[i];
            let result = self.replay(Command::Del, call, a);
            if let Err(e) = result {
                errors.push(format!("{}: {}", describe(i, a), e.msg));
            }
        }
        errors
    }

    /// DEL from the state (or, without a usable one, from `configured`), every delegate tried.
    pub fn del(&self, call: &Call, configured: &[Delegate], log: &mut dyn FnMut(&str)) -> Result<(), CniError> {
        let key = Self::key(call)?;
        let _lock = self.store.lock(&call.container_id).map_err(Self::state_err)?;
        let state = match self.store.read(&key).map_err(Self::state_err)? {
            None => None,
            Some(bytes) => match decode_state(&bytes) {
                Some(v) => Some(v),
                None => {
                    log(&format!(
                        "state file for {}@{} is corrupt ({} bytes); deleting the configured delegates instead",
                        call.container_id,
                        call.ifname,
                        bytes.len()
                    ));
                    None
                }
            },
        };
        let state = match state {
            Some(s) => s,
            None => Self::plan(call, configured),
        };
        let n = state["attachments"].as_array().map_or(0, Vec::len);
        let errors = self.del_recorded(call, &state, n);
        if errors.is_empty() {
            self.store.remove(&key).map_err(Self::state_err)?;
            Ok(())
        } else {
            Err(CniError::new(
                cni_types::error::INTERNAL,
                format!("{} of {n} delegates failed DEL: {}", errors.len(), errors.join("; ")),
            ))
        }
    }

    /// CHECK every recorded delegate with its own result as prevResult; delegates below 0.4.0
    /// are skipped (reported through `log`). Errors name the delegate.
    pub fn check(&self, call: &Call, log: &mut dyn FnMut(&str)) -> Result<(), CniError> {
        let key = Self::key(call)?;
        let Some(bytes) = self.store.read(&key).map_err(Self::state_err)? else {
            return Err(CniError::new(
                cni_types::error::UNKNOWN_CONTAINER,
                format!("no attachment state for {}@{}: was ADD run?", call.container_id, call.ifname),
            ));
        };
        let state = decode_state(&bytes).ok_or_else(|| {
            CniError::new(
                cni_types::error::DECODING_FAILURE,
                format!("corrupt attachment state for {}@{} ({} bytes)", call.container_id, call.ifname, bytes.len()),
            )
        })?;
        for (i, a) in state["attachments"].as_array().into_iter().flatten().enumerate() {
            let v = a["cniVersion"].as_str().unwrap_or_default();
            if !version::greater_than_or_equal_to(v, "0.4.0").unwrap_or(false) {
                log(&format!("{} speaks {v}: CHECK skipped", describe(i, a)));
                continue;
            }
            let outcome = self.replay(Command::Check, call, a);
            outcome.map_err(|e| CniError {
                code: e.code,
                msg: format!("{} CHECK failed: {}", describe(i, a), e.msg),
                details: e.details,
            })?;
        }
        Ok(())
    }

    /// GC: forward the valid attachments to every delegate (of 1.1.0 or later), and drop our own state for
    /// attachments not in the list. Every delegate is tried; failures are reported together.
    pub fn gc(&self, delegates: &[Delegate], valid: &[GcAttachment]) -> Result<(), CniError> {
        let mut errors = Vec::new();
        for key in self.store.keys().map_err(Self::state_err)? {
            if !valid.iter().any(|a| a.container_id == key.container_id() && a.ifname == key.ifname()) {
                if let Err(e) = self.store.remove(&key) {
                    errors.push(e.to_string());
                }
            }
        }
        let attachments: Value =
            valid.iter().map(|a| json!({"containerID": a.container_id, "ifname": a.ifname})).collect();
        let call = Call::default();
        for (i, d) in delegates.iter().enumerate() {
            let result = match &d.config {
                // As libcni does for lists: GC does not exist below 1.1.0.
                DelegateConfig::Plugin(c) if !Command::Gc.allowed_in(c.version()).unwrap_or(false) => Ok(()),
                DelegateConfig::Plugin(c) => {
                    let mut conf = c.clone();
                    conf.set(cni_types::config::GC_VALID_ATTACHMENTS, attachments.clone());
                    conf.set(cni_types::config::GC_ATTACHMENTS_LEGACY, attachments.clone());
                    let req = self.request(Command::Gc, &call, "", "");
                    self.exec
                        .find(&c.plugin_type, &self.paths)
                        .and_then(|p| invoke::run(self.exec, &p, &conf.to_bytes(), &req))
                        .map_err(|e| e.to_string())
                }
                DelegateConfig::List(l) => self.chain().gc(l, Some(valid)).map_err(|e| e.msg),
            };
            if let Err(e) = result {
                errors.push(format!("delegate {i} (network {:?}): {e}", d.name()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(CniError::new(cni_types::error::INTERNAL, format!("GC failed: {}", errors.join("; "))))
        }
    }

    /// STATUS: every delegate (of 1.1.0 or later) in order; the first failure is returned with its code (50/51).
    pub fn status(&self, delegates: &[Delegate]) -> Result<(), CniError> {
        let call = Call::default();
        for (i, d) in delegates.iter().enumerate() {
            let result = match &d.config {
                // As libcni does for lists: STATUS does not exist below 1.1.0.
                DelegateConfig::Plugin(c) if !Command::Status.allowed_in(c.version()).unwrap_or(false) => Ok(()),
                DelegateConfig::Plugin(c) => {
                    let req = self.request(Command::Status, &call, "", "");
                    self.exec
                        .find(&c.plugin_type, &self.paths)
                        .and_then(|p| invoke::run(self.exec, &p, &c.to_bytes(), &req))
                        .map_err(cni)
                }
                DelegateConfig::List(l) => self.chain().status(l).map_err(|e| e.to_cni_error()),
            };
            result.map_err(|e| CniError {
                code: e.code,
                msg: format!("delegate {i} (network {:?}) STATUS: {}", d.name(), e.msg),
                details: e.details,
            })?;
        }
        Ok(())
    }
}
