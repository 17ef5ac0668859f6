//! The delegate model: what a meta-plugin attaches — one plugin configuration or a conflist,
//! with its interface name, its own runtime requests and `CNI_ARGS` — and the record of it
//! that a plan keeps ([`crate::plan::Attachment`]): exactly what it is sent.

use crate::plan::{Attachment, Kind, Phase, Plan};
use cni_runtime::chain::{build_one_config, RuntimeConf};
use cni_types::error::INVALID_NETWORK_CONFIG;
use cni_types::result::AnyResult;
use cni_types::{CniError, NetConf, NetConfList};
use serde_json::{Map, Value};

/// A delegate's configuration: one plugin, or a conflist run with libcni semantics.
#[derive(Debug, Clone, PartialEq)]
pub enum DelegateConfig {
    /// A single plugin configuration.
    Plugin(NetConf),
    /// A conflist.
    List(NetConfList),
}

impl Default for DelegateConfig {
    fn default() -> Self {
        DelegateConfig::Plugin(NetConf::default())
    }
}

/// One delegate to attach.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Delegate {
    /// What to run.
    pub config: DelegateConfig,
    /// The interface name it gets (`CNI_IFNAME` of its call).
    pub ifname: String,
    /// Whether the name is braid's to choose: the first `net<N>` free in the pod namespace at
    /// ADD (see [`crate::ifnames`]); `ifname` is then only the guess used by a DEL that has no
    /// state to read the chosen name from.
    pub auto_ifname: bool,
    /// This attachment's own runtime requests (`mac`, `ips`, …), laid over the call's
    /// `runtimeConfig` before filtering by the delegate's capabilities.
    pub runtime_config: Map<String, Value>,
    /// Extra `CNI_ARGS` pairs for this attachment, appended to the call's (later pairs win,
    /// as in Go's `LoadArgs`).
    pub args: Option<String>,
    /// Whether this attachment is offered only its own `runtime_config`, none of the call's
    /// `runtimeConfig`: a network a Kubernetes pod selected gets only its selection element's
    /// requests, the runtime's (portMappings, bandwidth, …) belong to the cluster network
    /// (NPWG §7.5).
    pub own_runtime_config_only: bool,
    /// What the plugin selected this delegate by, recorded in the plan as it is (braid-attach
    /// gives it no meaning): an update of a live attachment ([`crate::update`]) keeps the
    /// recorded attachments whose selector is still wanted and only those. `None` for a
    /// configured delegate, which an update never touches.
    pub selector: Option<String>,
}

impl Delegate {
    /// The `CNI_ARGS` this delegate is called with: the call's, its own pairs after them,
    /// and `IgnoreUnknown=1` first unless already set (see [`ignore_unknown`]).
    pub fn effective_args(&self, call: &RuntimeConf) -> String {
        let args = match (&self.args, call.args.is_empty()) {
            (None, _) => call.args.clone(),
            (Some(extra), true) => extra.clone(),
            (Some(extra), false) => format!("{};{extra}", call.args),
        };
        ignore_unknown(&args)
    }

    /// The runtime arguments offered to this delegate: the call's (unless
    /// [`own_runtime_config_only`](Self::own_runtime_config_only)), with its own laid over.
    pub fn effective_capability_args(&self, call: &RuntimeConf) -> Map<String, Value> {
        let mut m = if self.own_runtime_config_only { Map::new() } else { call.capability_args.clone() };
        m.extend(self.runtime_config.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    }

    /// The network name, for messages.
    pub fn name(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.name(),
            DelegateConfig::List(l) => &l.name,
        }
    }

    /// The plugin type (a list names its first plugin's), for messages.
    pub fn plugin_type(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.plugin_type(),
            DelegateConfig::List(l) => l.plugins.first().map_or("", |p| p.plugin_type()),
        }
    }

    /// The type of the plugin its DEL runs first: a single plugin's; a conflist's last one's
    /// (libcni deletes a list in reverse, `libcni/api.go` `DelNetworkList`).
    pub fn del_plugin_type(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.plugin_type(),
            DelegateConfig::List(l) => l.plugins.last().map_or("", |p| p.plugin_type()),
        }
    }

    /// The version it speaks.
    pub fn version(&self) -> &str {
        match &self.config {
            DelegateConfig::Plugin(c) => c.version(),
            DelegateConfig::List(l) => &l.cni_version,
        }
    }

    /// Its planned record: what it will be sent, with which args and runtime arguments; and
    /// for a single plugin the very bytes, built once — recorded here, sent by ADD.
    pub(crate) fn planned(&self, call: &RuntimeConf) -> Result<(Attachment, Option<Vec<u8>>), CniError> {
        let caps = self.effective_capability_args(call);
        let (config, stdin) = match &self.config {
            DelegateConfig::Plugin(c) => {
                let bytes = plugin_stdin(c, &caps, None);
                (serde_json::from_slice(&bytes), Some(bytes))
            }
            DelegateConfig::List(l) => (serde_json::from_slice(&l.bytes), None),
        };
        // Read back everything that is recorded: what would not decode (a configuration nested
        // deeper than the JSON reader allows) could never be replayed by DEL.
        let config: Value = config.map_err(|e| {
            CniError::new(
                INVALID_NETWORK_CONFIG,
                format!("network {:?}: its configuration cannot be recorded and read back: {e}", self.name()),
            )
        })?;
        let attachment = Attachment {
            name: self.name().to_string(),
            plugin_type: self.plugin_type().to_string(),
            ifname: self.ifname.clone(),
            cni_version: self.version().to_string(),
            list: matches!(self.config, DelegateConfig::List(_)),
            config,
            args: Some(self.effective_args(call)),
            capability_args: Some(caps),
            result: None,
            phase: Phase::Planned,
            process: None,
            selector: self.selector.clone(),
        };
        Ok((attachment, stdin))
    }
}

/// `args` with `IgnoreUnknown=1` in front unless a pair already sets it true (`1` or `true`,
/// any case, as Go's `UnmarshallableBool`). Without it, plugins built on Go's `types.LoadArgs`
/// refuse every key they do not know (`K8S_POD_NAME` from a runtime that did not add it) — and
/// a DEL replaying such args would fail forever. Multus adds it for its delegates too.
pub fn ignore_unknown(args: &str) -> String {
    let set = cni_types::args::pairs(args).any(|(k, v)| k == "IgnoreUnknown" && cni_types::args::is_true(v));
    match (set, args.is_empty()) {
        (true, _) => args.to_string(),
        (false, true) => "IgnoreUnknown=1".to_string(),
        (false, false) => format!("IgnoreUnknown=1;{args}"),
    }
}

/// What each single-plugin delegate of a plan is sent, as bytes (`None` for a conflist, whose
/// requests the chain builds plugin by plugin).
pub(crate) type Stdins = Vec<Option<Vec<u8>>>;

/// The state of a plan: every delegate with the exact configuration it is (to be) sent; and
/// the bytes of each single-plugin delegate.
pub(crate) fn plan(call: &RuntimeConf, delegates: &[Delegate], parallel: bool) -> Result<(Plan, Stdins), CniError> {
    let (attachments, stdins) = delegates.iter().map(|d| d.planned(call)).collect::<Result<(Vec<_>, Vec<_>), _>>()?;
    Ok((Plan { kind: Kind::V1, netns: call.netns.clone(), attachments, parallel }, stdins))
}

/// The bytes a single-plugin delegate is sent (libcni's request building).
pub(crate) fn plugin_stdin(conf: &NetConf, caps: &Map<String, Value>, prev: Option<&AnyResult>) -> Vec<u8> {
    build_one_config(conf, conf.name(), conf.version(), prev, caps)
}
