//! From a selection element to a delegate: the definition `<networksDir>/<namespace>/<name>`
//! (`.conflist`, else `.conf`, else `.json`; NPWG §3.4.1's on-disk resolution, a
//! NetworkAttachmentDefinition's `namespace/name`), its `name` checked or injected, the
//! element's `cni-args` merged into every plugin's `args.cni` unless the definition pins a key
//! ([`PINNED_KEY`]), its requests turned into the
//! attachment's own `runtimeConfig`, each checked against the plugins' capabilities.

use super::annotation::{Element, RUNTIME_KEYS};
use super::error::Problem;
use super::names::{NAD_SOURCE, RESOURCE_NAME};
use braid_attach::{Delegate, DelegateConfig};
use cni_runtime::files::{read_regular, Links, MAX_CONFIG_FILE};
use cni_types::{NetConf, NetConfList};
use serde_json::{Map, Value};
use std::path::Path;

/// Reads the first definition that exists; `Ok(None)` when none does. A definition is an
/// operator's file, but it is still read as [`cni_runtime::files`] reads what it is handed: a
/// regular file of at most 1 MiB, never through a symlink, never blocking on a FIFO (the
/// installer mirrors definitions as regular files).
fn read_definition(dir: &Path, namespace: &str, name: &str) -> Result<Option<(String, Vec<u8>)>, Problem> {
    for ext in ["conflist", "conf", "json"] {
        let path = dir.join(namespace).join(format!("{name}.{ext}"));
        let shown = path.display().to_string();
        match read_regular(&path, MAX_CONFIG_FILE, Links::Refuse) {
            Ok(bytes) => return Ok(Some((shown, bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Problem::BadDefinition { path: shown, why: e.to_string() }),
        }
    }
    Ok(None)
}

/// The definition's own key naming the `args.cni` keys a pod's `cni-args` may not set.
pub const PINNED_KEY: &str = "pinnedCniArgs";

/// Which `args.cni` keys the operator pinned in a definition ([`PINNED_KEY`]): a list of key
/// names, or `true` for every key. Without it the NPWG default holds — a selection element's
/// `cni-args` are merged into every plugin's `args.cni`, winning over the definition's.
#[derive(Debug, Clone, PartialEq, Default)]
enum Pinned {
    /// Nothing pinned (the key absent, `null`, `false` or `[]`).
    #[default]
    None,
    /// These keys.
    Keys(Vec<String>),
    /// Every key: the network takes no `cni-args` at all.
    All,
}

impl Pinned {
    /// Reads and removes the key (it is braid's, not the plugins').
    fn take(def: &mut Map<String, Value>) -> Result<Pinned, String> {
        let want = || format!("{PINNED_KEY} must be true or a list of args.cni key names");
        match def.remove(PINNED_KEY) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(Pinned::None),
            Some(Value::Bool(true)) => Ok(Pinned::All),
            Some(Value::Array(keys)) => keys
                .iter()
                .map(|k| {
                    k.as_str()
                        .filter(|k| !k.is_empty())
                        .map(str::to_string)
                        .ok_or_else(|| format!("{}, not {k}", want()))
                })
                .collect::<Result<_, _>>()
                .map(Pinned::Keys),
            Some(other) => Err(format!("{}, not {other}", want())),
        }
    }

    fn covers(&self, key: &str) -> bool {
        match self {
            Pinned::None => false,
            Pinned::Keys(k) => k.iter().any(|k| k == key),
            Pinned::All => true,
        }
    }
}

/// The plugin objects of a definition (the object itself for a single plugin).
fn plugins_mut(def: &mut Map<String, Value>) -> Vec<&mut Map<String, Value>> {
    if def.contains_key("plugins") {
        match def.get_mut("plugins") {
            Some(Value::Array(items)) => items.iter_mut().filter_map(Value::as_object_mut).collect(),
            _ => Vec::new(),
        }
    } else {
        vec![def]
    }
}

/// The delegate for element `e` of namespace `namespace`, found under `dir`; `version` is the
/// delegator's `cniVersion` (for a definition without one), `ifname` the interface it gets
/// (`auto`: braid's `net<N>`, `ifname` then a placeholder).
pub fn delegate(
    dir: &Path,
    namespace: &str,
    e: &Element,
    version: &str,
    ifname: String,
    auto: bool,
) -> Result<(Delegate, Option<String>), Problem> {
    let Some((path, bytes)) = read_definition(dir, namespace, &e.name)? else {
        let base = dir.join(namespace).join(&e.name).display().to_string();
        return Err(Problem::UnknownNetwork { looked_for: format!("{base}.conflist, {base}.conf or {base}.json") });
    };
    let bad = |why: String| Problem::BadDefinition { path: path.clone(), why };
    let value = cni_types::gojson::parse(&bytes).map_err(|err| bad(err.to_string()))?;
    let Value::Object(mut def) = value else {
        return Err(bad(format!("a JSON {}, not an object", cni_types::gojson::type_name(&value))));
    };
    // Mirrored from a NetworkAttachmentDefinition: which one (the key is braid's, not the
    // plugins'; it goes before the definition becomes a delegate).
    let (from_nad, nad_resource) = match def.remove(NAD_SOURCE) {
        Some(Value::Object(src)) => {
            let ours = src.get("namespace").and_then(Value::as_str) == Some(namespace)
                && src.get("name").and_then(Value::as_str) == Some(e.name.as_str());
            (ours, src.get(RESOURCE_NAME).cloned().filter(|_| ours))
        }
        _ => (false, None),
    };
    // The device-plugin resource behind the network: the NAD's annotation as the agent
    // recorded it, or the definition's own key (a ConfigMap network); braid's, not the plugins'.
    let own_resource = def.remove(RESOURCE_NAME);
    let resource = match nad_resource.or(own_resource) {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) if resource_name_ok(&r) => Some(r),
        Some(other) => {
            return Err(bad(format!(
                "{RESOURCE_NAME} must be a resource name (<vendor-domain>/<name>, as in a pod's resources.limits), not {other}"
            )))
        }
    };
    match def.get("name") {
        None | Some(Value::Null) => {
            def.insert("name".into(), Value::String(e.name.clone()));
        }
        Some(Value::String(n)) if *n == e.name => {}
        Some(Value::String(_)) if from_nad => {}
        Some(other) => return Err(bad(format!("its name is {other}, not {:?}", e.name))),
    }
    if !matches!(def.get("cniVersion"), Some(Value::String(_))) {
        def.insert("cniVersion".into(), Value::String(version.to_string()));
    }
    let list = def.contains_key("plugins");
    if list && !matches!(def.get("plugins"), Some(Value::Array(_))) {
        return Err(bad("plugins must be a list of plugin configurations".into()));
    }
    let pinned = Pinned::take(&mut def).map_err(bad)?;
    if let Some(key) = e.cni_args.iter().flat_map(|a| a.keys()).find(|k| pinned.covers(k)) {
        return Err(Problem::PinnedCniArg { key: key.clone(), path: path.clone() });
    }
    if let Some(args) = &e.cni_args {
        for plugin in plugins_mut(&mut def) {
            let entry = plugin.entry("args").or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(a) = entry else {
                return Err(bad(format!("args must be an object to take the element's cni-args, not {entry}")));
            };
            let cni = a.entry("cni").or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(c) = cni else {
                return Err(bad(format!("args.cni must be an object to take the element's cni-args, not {cni}")));
            };
            c.extend(args.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let config = if list {
        let bytes = serde_json::to_vec(&def).unwrap_or_default();
        DelegateConfig::List(NetConfList::parse(&bytes).map_err(|err| bad(err.to_string()))?)
    } else {
        DelegateConfig::Plugin(
            cni_types::conflist::parse_plugin(Value::Object(def)).map_err(|err| bad(err.to_string()))?,
        )
    };
    let plugins: Vec<&NetConf> = match &config {
        DelegateConfig::Plugin(c) => vec![c],
        DelegateConfig::List(l) => l.plugins.iter().collect(),
    };
    for cap in e.runtime.keys() {
        if !plugins.iter().any(|p| p.capabilities().get(cap).copied().unwrap_or(false)) {
            let key = RUNTIME_KEYS.iter().find(|(_, c)| c == cap).map_or(cap.as_str(), |(k, _)| k);
            return Err(Problem::NoCapability { key: key.to_string(), capability: cap.clone() });
        }
    }
    let d = Delegate {
        config,
        ifname,
        auto_ifname: auto,
        runtime_config: e.runtime.clone(),
        args: None,
        own_runtime_config_only: true,
        selector: None,
    };
    Ok((d, resource))
}

/// An extended resource's name as Kubernetes takes one in `resources.limits`: a domain prefix,
/// `/`, a name of letters, digits, `-`, `_`, `.` (at most 63, alphanumeric at both ends).
fn resource_name_ok(r: &str) -> bool {
    let Some((domain, name)) = r.split_once('/') else { return false };
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !domain.is_empty()
        && domain.len() <= 253
        && domain.split('.').all(cni_types::validate::is_dns_label)
        && !name.is_empty()
        && name.len() <= 63
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
