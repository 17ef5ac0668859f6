//! The on-disk format of an attachment's state — braid's crash-safety contract, read back
//! after upgrades, crashes and reboots, so every field is typed and the format is versioned.
//!
//! A state file is one [`Plan`] on its first line, written durably before any delegate is sent
//! its configuration, then one [`Progress`] line appended per delegate that returned a result. A last line
//! without its newline was torn by a crash and is ignored; a progress line that does not
//! decode is skipped (the plan alone is enough for DEL: DEL of a delegate that never ran is
//! harmless). Files written before this module existed (the same keys, built with `json!`, or
//! one document with the results inline) read unchanged.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The format's version, written as `kind`. A state of another kind is not ours to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// The first and current format.
    #[serde(rename = "braidAttachV1")]
    V1,
}

/// Every delegate of one ADD, with exactly what it is (to be) sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The format.
    pub kind: Kind,
    /// `CNI_NETNS` of the ADD.
    #[serde(default)]
    pub netns: String,
    /// The delegates, in ADD order.
    pub attachments: Vec<Attachment>,
    /// Whether the delegates were started all at once (the `parallel` key): DEL and CHECK of
    /// this attachment then run them at once too. Absent (false) in sequential plans, so their
    /// state files read and are written exactly as before the key existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel: bool,
}

/// How far a delegate got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// In the plan; it may have started (and done anything) or not.
    #[default]
    Planned,
    /// Its process (recorded in `process`) was started and had not finished when this was
    /// written: if the plugin that started it was killed, it may still run.
    Running,
    /// Its ADD returned the recorded result.
    Added,
}

/// One planned delegate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// The network name, for messages.
    #[serde(default)]
    pub name: String,
    /// The plugin type (a list's first plugin's), found in `CNI_PATH` for a single plugin.
    #[serde(rename = "type", default)]
    pub plugin_type: String,
    /// Its `CNI_IFNAME`.
    #[serde(default)]
    pub ifname: String,
    /// The version it speaks (decides whether DEL/CHECK carry `prevResult`).
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    /// Whether `config` is a conflist (run with libcni semantics) or one plugin's bytes.
    #[serde(default)]
    pub list: bool,
    /// A single plugin: the exact configuration ADD sent. A list: the conflist.
    pub config: Value,
    /// The `CNI_ARGS` it was sent (absent in the oldest states: the call's are used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
    /// The capability arguments it was offered (absent in the oldest states: the call's).
    #[serde(rename = "capabilityArgs", default, skip_serializing_if = "Option::is_none")]
    pub capability_args: Option<Map<String, Value>>,
    /// Its result, once ADD returned (`null` before).
    #[serde(default)]
    pub result: Option<Value>,
    /// How far it got.
    #[serde(default)]
    pub phase: Phase,
    /// Its last started process (a conflist starts one per plugin), while `Running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    /// What the plugin selected it by ([`crate::Delegate::selector`]): absent for configured
    /// delegates and in states written before updates existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

impl Attachment {
    /// The plugin types it runs, in order: a single plugin's own, a list's from its recorded
    /// plugins (a type missing reads as empty, which no binary is found by).
    pub fn plugin_types(&self) -> Vec<&str> {
        if !self.list {
            return vec![self.plugin_type.as_str()];
        }
        let plugins = self.config.get("plugins").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        plugins.iter().map(|p| p.get("type").and_then(Value::as_str).unwrap_or_default()).collect()
    }
}

/// A delegate process: its pid (also its process group) and start time, so that DEL after a
/// crash can end exactly that process and nothing else (see `cni_runtime::procs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// The pid and process group.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start: u64,
}

/// One appended line: delegate `index` started a process, or finished its ADD with `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Its index in the plan.
    pub index: usize,
    /// [`Phase::Running`] with `process`, or [`Phase::Added`] with `result`.
    pub phase: Phase,
    /// The result it returned.
    #[serde(default)]
    pub result: Value,
    /// The process it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
}

impl Plan {
    /// The plan as its state file's first line (newline included).
    pub fn to_line(&self) -> Vec<u8> {
        line(self)
    }

    /// Reads a state file: the plan, then each complete progress line laid over it. `None`
    /// when the plan is unusable (not ours, or not a plan).
    pub fn decode(bytes: &[u8]) -> Option<Plan> {
        let mut lines = bytes.split_inclusive(|b| *b == b'\n');
        let mut plan: Plan = serde_json::from_slice(lines.next()?).ok()?;
        for l in lines.filter(|l| l.ends_with(b"\n")) {
            let Ok(p) = serde_json::from_slice::<Progress>(l) else { continue };
            if let Some(a) = plan.attachments.get_mut(p.index) {
                match p.phase {
                    Phase::Running => a.process = p.process,
                    _ => {
                        a.result = Some(p.result).filter(|r| !r.is_null());
                        a.process = None;
                    }
                }
                a.phase = p.phase;
            }
        }
        Some(plan)
    }
}

impl Progress {
    /// The record as an appended line (newline included).
    pub fn to_line(&self) -> Vec<u8> {
        line(self)
    }
}

fn line<T: Serialize>(v: &T) -> Vec<u8> {
    // Serialising these types cannot fail: every map key is a string.
    let mut out = serde_json::to_vec(v).unwrap_or_default();
    out.push(b'\n');
    out
}
