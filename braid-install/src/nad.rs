//! A NetworkAttachmentDefinition (NAD) turned into the definition file the delegator reads,
//! with Multus's semantics (network-attachment-definition-client `GetCNIConfig`):
//!
//! - `spec.config` holds a CNI configuration: a conflist (it has `plugins`) or a single plugin;
//!   a missing or empty `name` becomes the NAD's name (`GetCNIConfigFromSpec`); a present one is
//!   kept, since it is the network name plugins key their state by (host-local's
//!   `/var/lib/cni/networks/<name>`), and a cluster moving from Multus must keep it;
//! - an empty (or absent) `spec.config` means the first `.conf`, `.json` or `.conflist` file,
//!   in lexical order, of the NAD conf dir (`--nad-conf-dir`) whose network `name` is the NAD's
//!   name (`GetCNIConfigFromFile`; Multus looks in its `confDir`, `/etc/cni/multus/net.d`, and
//!   nowhere else). Never the node's CNI conf dir: a NAD is any namespace's to create, and one
//!   named after the node's primary network (or `braid`) would otherwise hand that namespace
//!   the node's own conflist — a second address from the cluster pool under the pod's identity;
//! - the NAD's `k8s.v1.cni.cncf.io/resourceName` annotation (the SR-IOV device plugin's
//!   resource, which Multus turns into a `deviceID`) is kept in the file.
//!
//! The file is always a conflist (`<namespace>/<name>.conflist`, a single plugin wrapped as
//! libcni's `ConfListFromConf` wraps it), so that a NAD and a ConfigMap key of the same name
//! write the same file, never a `.conf` that a `.conflist` would hide. Its top-level
//! [`SOURCE_KEY`] names the NAD it came from: the delegator accepts a definition whose `name`
//! differs from the selected name only when that key says it is the NAD of that name.

use cni_types::validate::is_dns_label;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The NAD annotation naming a device-plugin resource (Multus and SR-IOV's convention, not NPWG's).
pub const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";

/// The definition's top-level key recording its NAD (namespace, name, uid, resourceVersion and,
/// when annotated, [`RESOURCE_NAME`]). libcni and the delegator pass no top-level key of a
/// conflist but `cniVersion` and `name` on to plugins, so plugins never see it.
pub const SOURCE_KEY: &str = "braid.io/networkAttachmentDefinition";

/// Which NAD a definition came from: what the mirror keys its files and Events by, and — the
/// same fields, serialized — the record a definition carries under [`SOURCE_KEY`], so that
/// the delegator and an operator reading the file see the object and version it was made from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// `metadata.namespace`: with the name, how a pod selects the network (`<namespace>/<name>`).
    pub namespace: String,
    /// `metadata.name`, the network's name unless its config names itself.
    pub name: String,
    /// `metadata.uid`: the object an Event is about (a NAD deleted and created again under its
    /// name has a new one).
    pub uid: String,
    /// `metadata.resourceVersion`: the version the file was made from, the version an Event
    /// and a log line speak of.
    pub resource_version: String,
    /// The [`RESOURCE_NAME`] annotation, kept for the device plugin's consumers as Multus keeps it.
    #[serde(rename = "k8s.v1.cni.cncf.io/resourceName", skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

/// What the mirror needs of a NAD: where it came from and its `spec.config`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nad {
    /// Its identity (metadata).
    pub source: Source,
    /// `spec.config`; `None` when absent.
    pub config: Option<String>,
}

impl Nad {
    /// `<namespace>/<name>`, as a selection and the network-status name it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.source.namespace, self.source.name)
    }

    /// The mirror's file for it, relative to networksDir.
    pub fn rel_path(&self) -> String {
        format!("{}/{}.conflist", self.source.namespace, self.source.name)
    }

    /// Reads a NAD from its JSON object (as the API serves it).
    pub fn from_object(o: &Value) -> Nad {
        let meta = &o["metadata"];
        let s = |v: &Value| v.as_str().map(str::to_string);
        let source = Source {
            namespace: s(&meta["namespace"]).unwrap_or_default(),
            name: s(&meta["name"]).unwrap_or_default(),
            uid: s(&meta["uid"]).unwrap_or_default(),
            resource_version: s(&meta["resourceVersion"]).unwrap_or_default(),
            resource_name: s(&meta["annotations"][RESOURCE_NAME]),
        };
        Nad { source, config: s(&o["spec"]["config"]) }
    }
}

/// Why a NAD is not mirrored: the text of its Event and log line, and whether another node may
/// judge it otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What is wrong, for the operator.
    pub why: String,
    /// The refusal rests on this node's files (an empty `spec.config`: the file of that name in
    /// `--nad-conf-dir`, missing or bad here), so another node may mirror the same version; a
    /// refusal of `spec.config` itself or of the NAD's name is the same on every node.
    pub on_node: bool,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// The definition file's bytes for `nad`; `nad_conf_dir` (as the agent reaches it) is searched
/// when its `spec.config` is empty.
pub fn render(nad: &Nad, nad_conf_dir: &Path) -> Result<Vec<u8>, Refusal> {
    let id = &nad.source;
    if !is_dns_label(&id.namespace) || !is_dns_label(&id.name) {
        return Err(Refusal {
            why: format!(
                "{:?} cannot be selected: a pod's k8s.v1.cni.cncf.io/networks names networks by DNS-1123 label (lower-case letters, digits, '-', at most 63)",
                id.name
            ),
            on_node: false,
        });
    }
    let from_file = nad.config.as_deref().is_none_or(|c| c.trim().is_empty());
    render_checked(nad, nad_conf_dir).map_err(|why| Refusal { why, on_node: from_file })
}

/// [`render`] of a NAD whose name is a label.
fn render_checked(nad: &Nad, nad_conf_dir: &Path) -> Result<Vec<u8>, String> {
    let id = &nad.source;
    let (mut conf, origin) = match nad.config.as_deref().map(str::trim) {
        Some(c) if !c.is_empty() => (parse_object(c.as_bytes()).map_err(|e| format!("spec.config {e}"))?, None),
        _ => {
            let (path, v) = from_conf_dir(&id.name, nad_conf_dir)?;
            (v, Some(path))
        }
    };
    let from = |what: &str| match &origin {
        Some(p) => format!("{} ({what})", p.display()),
        None => format!("spec.config ({what})"),
    };
    match conf.get("name") {
        None | Some(Value::Null) => {
            conf.insert("name".into(), Value::String(id.name.clone()));
        }
        Some(Value::String(n)) if n.is_empty() => {
            conf.insert("name".into(), Value::String(id.name.clone()));
        }
        Some(Value::String(_)) => {}
        Some(other) => return Err(format!("{}: \"name\" must be a string, not {other}", from("name"))),
    }
    let mut list = if conf.contains_key("plugins") {
        conf
    } else {
        cni_types::conflist::parse_plugin(Value::Object(conf.clone()))
            .map_err(|e| format!("{} is not a valid CNI plugin configuration: {e}", from("a single plugin")))?;
        let mut l = Map::new();
        for key in ["cniVersion", "name"] {
            if let Some(v) = conf.get(key) {
                l.insert(key.into(), v.clone());
            }
        }
        l.insert("plugins".into(), Value::Array(vec![Value::Object(conf)]));
        l
    };
    let mut source = serde_json::to_value(id).unwrap_or_default();
    if let Some(p) = &origin {
        source["file"] = Value::String(p.display().to_string());
    }
    list.insert(SOURCE_KEY.into(), source);
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(list)).unwrap_or_default();
    bytes.push(b'\n');
    cni_types::NetConfList::parse(&bytes)
        .map_err(|e| format!("{} is not a valid CNI configuration list: {e}", from("a conflist")))?;
    Ok(bytes)
}

fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(other) => Err(format!("is a JSON {}, not an object", cni_types::gojson::type_name(&other))),
        Err(e) => Err(format!("is not JSON: {e}")),
    }
}

/// The first file of `dir` (in lexical order, `.conf`, `.json` or `.conflist`) whose network is
/// named `name`. Files that do not parse are passed over (Multus stops at them; one operator's
/// broken file should not hide another network).
fn from_conf_dir(name: &str, dir: &Path) -> Result<(PathBuf, Map<String, Value>), String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "conf" || e == "json" || e == "conflist")
                && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    for path in files {
        let Some(o) = read_small(&path).and_then(|b| parse_object(&b).ok()) else { continue };
        if o.get("name").and_then(Value::as_str) == Some(name) {
            return Ok((path, o));
        }
    }
    Err(format!(
        "spec.config is empty and no .conf, .json or .conflist file in {} (--nad-conf-dir) names a network {name:?}",
        dir.display()
    ))
}

fn read_small(path: &Path) -> Option<Vec<u8>> {
    cni_runtime::files::read_regular(path, cni_runtime::files::MAX_CONFIG_FILE, cni_runtime::files::Links::Follow).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nad(config: Option<&str>) -> Nad {
        let source = Source {
            namespace: "team-a".into(),
            name: "macvlan-conf".into(),
            uid: "u-1".into(),
            resource_version: "7".into(),
            resource_name: None,
        };
        Nad { source, config: config.map(str::to_string) }
    }

    fn parsed(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn a_conflist_keeps_its_name_and_records_its_nad() {
        let c = r#"{"cniVersion":"1.0.0","name":"macvlan-network","plugins":[{"type":"macvlan","master":"eth0"}]}"#;
        let v = parsed(&render(&nad(Some(c)), Path::new("")).unwrap());
        assert_eq!(v["name"], "macvlan-network");
        assert_eq!(v["plugins"][0]["master"], "eth0");
        assert_eq!(
            v[SOURCE_KEY],
            json!({"namespace":"team-a","name":"macvlan-conf","uid":"u-1","resourceVersion":"7"})
        );
    }

    #[test]
    fn a_single_plugin_is_wrapped_and_a_missing_name_is_the_nads() {
        let mut n = nad(Some(r#"{"cniVersion":"0.3.1","type":"macvlan","master":"eth0"}"#));
        n.source.resource_name = Some("intel.com/sriov_a".into());
        let v = parsed(&render(&n, Path::new("")).unwrap());
        assert_eq!(v["name"], "macvlan-conf");
        assert_eq!(v["cniVersion"], "0.3.1");
        assert_eq!(v["plugins"][0]["type"], "macvlan");
        assert_eq!(v["plugins"][0]["name"], "macvlan-conf");
        assert_eq!(v[SOURCE_KEY][RESOURCE_NAME], "intel.com/sriov_a");
        let empty_name = parsed(&render(&nad(Some(r#"{"name":"","type":"ptp"}"#)), Path::new("")).unwrap());
        assert_eq!(empty_name["name"], "macvlan-conf");
    }

    #[test]
    fn an_empty_config_is_a_file_of_that_name_in_the_nad_conf_dir() {
        let d = std::env::temp_dir().join(format!("braid-nad-{}", std::process::id()));
        let a = d.join("multus");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join("00-broken.conf"), "{").unwrap();
        std::fs::write(a.join("10-other.conf"), r#"{"name":"other","type":"ptp"}"#).unwrap();
        std::fs::write(
            a.join("20-x.conflist"),
            r#"{"cniVersion":"1.0.0","name":"macvlan-conf","plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        for config in [None, Some(""), Some("  ")] {
            let v = parsed(&render(&nad(config), &a).unwrap());
            assert_eq!(v["plugins"][0]["type"], "bridge");
            assert_eq!(v[SOURCE_KEY]["file"], a.join("20-x.conflist").display().to_string());
        }
        // The lexically first file of that name wins.
        std::fs::write(a.join("15-y.conf"), r#"{"cniVersion":"1.0.0","name":"macvlan-conf","type":"ptp"}"#).unwrap();
        let v = parsed(&render(&nad(None), &a).unwrap());
        assert_eq!(v["plugins"][0]["type"], "ptp");
        let e = render(&nad(None), &d.join("none")).unwrap_err();
        assert!(e.on_node, "{e}");
        let e = e.why;
        assert!(
            e.contains("spec.config is empty and no .conf, .json or .conflist file in")
                && e.contains("\"macvlan-conf\""),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn what_is_refused_says_why() {
        for (config, want) in [
            ("{", "spec.config is not JSON"),
            ("[]", "spec.config is a JSON array, not an object"),
            (r#"{"name":5,"type":"ptp"}"#, "\"name\" must be a string"),
            (r#"{"cniVersion":"1.0.0","name":"x"}"#, "is not a valid CNI plugin configuration"),
            (r#"{"cniVersion":"1.0.0","name":"x","plugins":[]}"#, "is not a valid CNI configuration list"),
            (r#"{"cniVersion":"1.0.0","name":"x","plugins":"ptp"}"#, "is not a valid CNI configuration list"),
        ] {
            let e = render(&nad(Some(config)), Path::new("")).unwrap_err();
            assert!(e.why.contains(want) && !e.on_node, "{config}: {e}");
        }
        let mut dotted = nad(Some(r#"{"type":"ptp"}"#));
        dotted.source.name = "a.b".into();
        assert!(render(&dotted, Path::new("")).unwrap_err().why.contains("DNS-1123 label"));
    }

    #[test]
    fn from_the_api_object() {
        let o = json!({"apiVersion":"k8s.cni.cncf.io/v1","kind":"NetworkAttachmentDefinition",
            "metadata":{"namespace":"n","name":"x","uid":"u","resourceVersion":"9","annotations":{RESOURCE_NAME:"r/x"}},
            "spec":{"config":"{}"}});
        let n = Nad::from_object(&o);
        assert_eq!(
            (n.key(), n.rel_path(), n.config.as_deref(), n.source.resource_name.as_deref()),
            ("n/x".into(), "n/x.conflist".into(), Some("{}"), Some("r/x"))
        );
        assert_eq!(Nad::from_object(&json!({"metadata":{"name":"x"}})).config, None);
    }
}
