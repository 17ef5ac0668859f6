//! The networks this node can attach, as DRA devices: one device per network definition of
//! networksDir (`<networksDir>/<namespace>/<name>.conflist`, as the agent's mirrors write them —
//! [`crate::mirror`], [`crate::nad_mirror`] — or as an operator put them there by hand, which
//! the delegator attaches alike) whose plugins are all installed on this node.
//!
//! **The bin-dir rule.** A network is offered only when every plugin `type` of its definition
//! (and every plugin's `ipam.type`) is an executable file in the node's CNI bin dir: a claim
//! allocated a network whose plugin is missing would fail at the pod's ADD, after the
//! scheduler had bound the pod to the node. So a network whose plugin only some nodes have
//! (an SR-IOV plugin, a vendor's) is on those nodes' slices only, and the scheduler places
//! pods claiming it there — what a NAD alone cannot say. A network becomes offered as soon as
//! its plugin is installed (the slice publisher watches the bin dir).
//!
//! **Names.** A device name is a DNS label (the API server's `validateDeviceName`), at most 63
//! characters; a network's `<namespace>/<name>` is not. [`device_name`] makes one that is
//! readable and stable: `<namespace>-<name>`, truncated so that `-` and the eight hex digits of
//! the FNV-1a 32 hash of `<namespace>/<name>` fit (`tenant-a-side-1a2b3c4d`). The hash keeps
//! `a-b/c` and `a/b-c` apart. Operators select networks by the devices' attributes
//! ([`super::slices`]), never by these names; Prepare maps an allocated name back with [`find`].
//!
//! The same lookup order as the delegator's (plugins/delegator `read_definition`): for one
//! name, `.conflist` before `.conf` before `.json`; symbolic links are refused as it refuses
//! them, and what it could not parse is not offered.

use super::plan::Missing;
use cni_types::validate::is_dns_label;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The extensions the delegator reads a definition from, in its order.
const EXTENSIONS: [&str; 3] = ["conflist", "conf", "json"];

/// A definition larger than this is not read (the delegator's own limit is of this order).
const MAX_DEFINITION: u64 = 1 << 20;

/// The NAD record the mirror writes into a definition ([`crate::nad::SOURCE_KEY`]).
const SOURCE_KEY: &str = crate::nad::SOURCE_KEY;
/// The device-plugin resource a network is backed by ([`crate::nad::RESOURCE_NAME`]).
const RESOURCE_NAME: &str = crate::nad::RESOURCE_NAME;

/// One network this node can attach, as a DRA device.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Device {
    /// The device's name in the slice ([`device_name`]).
    pub name: String,
    /// `<namespace>/<name>`, as a selection element names the network.
    pub network: String,
    /// The network's namespace.
    pub namespace: String,
    /// The network's name.
    pub net_name: String,
    /// The first plugin's `type` (`macvlan`, `bridge`, `host-device`…).
    pub plugin_type: String,
    /// The device-plugin resource behind the network (`k8s.v1.cni.cncf.io/resourceName`: the
    /// NAD's annotation as the mirror recorded it, or the definition's own key).
    pub resource_name: Option<String>,
}

/// What one scan found: the devices offered, and why each other definition is not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// The devices, sorted by network (`<namespace>/<name>`).
    pub devices: Vec<Device>,
    /// Networks not offered, by `<namespace>/<name>`: why (a plugin missing from the bin dir,
    /// a definition that does not parse).
    pub skipped: BTreeMap<String, String>,
}

/// FNV-1a, 32 bits (Fowler, Noll, Vo; the offset basis 2166136261 and prime 16777619 of the
/// reference, draft-eastlake-fnv): a stable hash with no dependency and no seed, so that every
/// agent, in every version, names a network's device the same.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// The device name of network `<namespace>/<name>`: `<namespace>-<name>` (lower-cased),
/// truncated to 54 characters (no `-` left at its end), then `-` and the FNV-1a 32 hash of
/// `<namespace>/<name>` in eight hex digits: a DNS label of at most 63 characters, the same on
/// every node.
pub fn device_name(namespace: &str, name: &str) -> String {
    let hash = fnv1a32(format!("{namespace}/{name}").as_bytes());
    let readable: String = format!("{namespace}-{name}")
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
        .take(63 - 9)
        .collect();
    let readable = readable.trim_matches('-');
    if readable.is_empty() {
        return format!("n-{hash:08x}");
    }
    format!("{readable}-{hash:08x}")
}

/// The device of that name, if this node offers it.
pub fn find<'a>(devices: &'a [Device], name: &str) -> Option<&'a Device> {
    devices.iter().find(|d| d.name == name)
}

/// The networks this agent has offered since it started, by device name: what lets Prepare
/// name the network of a device whose definition has left the node (a device name is not
/// reversible: [`device_name`] truncates and hashes). Filled by every scan of the slice
/// publisher and of Prepare; lost with the process, when Prepare names the device alone.
#[derive(Debug, Clone, Default)]
pub struct Seen(Arc<Mutex<BTreeMap<String, String>>>);

impl Seen {
    /// Remembers the devices of a scan.
    pub fn remember(&self, devices: &[Device]) {
        let mut seen = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for d in devices {
            seen.insert(d.name.clone(), d.network.clone());
        }
    }

    /// The network the device stood for, if this agent ever offered it.
    pub fn network(&self, device: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(device).cloned()
    }
}

/// Why `device` is none of `inv`'s devices: a definition the node has but cannot attach (its
/// plugin missing: the inventory's reason), one that was offered and is gone from
/// `networks_dir`, or a device name no network of this node ever had.
pub fn missing(inv: &Inventory, seen: &Seen, networks_dir: &Path, device: &str) -> Missing {
    let skipped = inv
        .skipped
        .iter()
        .find(|(net, _)| net.split_once('/').is_some_and(|(namespace, name)| device_name(namespace, name) == device));
    if let Some((net, why)) = skipped {
        return Missing { network: Some(net.clone()), why: why.clone() };
    }
    match seen.network(device) {
        Some(net) => Missing {
            why: format!("its definition is gone from {} (its NAD deleted?)", networks_dir.display()),
            network: Some(net),
        },
        None => Missing {
            network: None,
            why: "no network definition of this node has that device name (none this agent offered since it started)"
                .into(),
        },
    }
}

/// Scans `networks_dir` and `cni_bin_dir` (both as the agent reaches them). A directory that
/// cannot be read offers nothing (an empty networks dir on a fresh node is the normal case).
pub fn inventory(networks_dir: &Path, cni_bin_dir: &Path) -> Inventory {
    let mut inv = Inventory::default();
    let mut installed = BTreeMap::<String, bool>::new();
    let mut is_installed = |t: &str| *installed.entry(t.to_string()).or_insert_with(|| executable(cni_bin_dir, t));
    for namespace in subdirectories(networks_dir) {
        let dir = networks_dir.join(&namespace);
        let mut names: Vec<String> = labels_with_extension(&dir);
        names.dedup();
        for name in names {
            let network = format!("{namespace}/{name}");
            match definition(&dir, &name) {
                Err(why) => {
                    inv.skipped.insert(network, why);
                }
                Ok(def) => {
                    if let Some(missing) = def.types.iter().find(|t| !is_installed(t)) {
                        inv.skipped.insert(
                            network,
                            format!("its plugin {missing:?} is not an executable in {}", cni_bin_dir.display()),
                        );
                        continue;
                    }
                    inv.devices.push(Device {
                        name: device_name(&namespace, &name),
                        network,
                        namespace: namespace.clone(),
                        net_name: name.clone(),
                        plugin_type: def.types[0].clone(),
                        resource_name: def.resource_name(&namespace, &name),
                    });
                }
            }
        }
    }
    inv.devices.sort_by(|a, b| (&a.namespace, &a.net_name).cmp(&(&b.namespace, &b.net_name)));
    inv
}

/// The subdirectories of `dir` named by a DNS label (namespaces), sorted; links are not followed.
pub fn subdirectories(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| is_dns_label(n))
        .collect();
    out.sort();
    out
}

/// The network names of `dir`'s definition files (`<label>.<conflist|conf|json>`), sorted.
fn labels_with_extension(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter_map(|n| {
            let (stem, ext) = n.rsplit_once('.')?;
            (EXTENSIONS.contains(&ext) && is_dns_label(stem)).then(|| stem.to_string())
        })
        .collect();
    out.sort();
    out
}

/// What the inventory needs of one definition.
struct Definition {
    /// Every plugin's `type`, then every `ipam.type`, in order; never empty.
    types: Vec<String>,
    /// The top-level object (for the resource name).
    top: serde_json::Map<String, Value>,
}

impl Definition {
    /// The NAD's resource name as the mirror recorded it (only when the record is this
    /// network's: a copied file's record names another NAD), else the definition's own key —
    /// the delegator's rule.
    fn resource_name(&self, namespace: &str, name: &str) -> Option<String> {
        let from_nad = self.top.get(SOURCE_KEY).and_then(Value::as_object).filter(|src| {
            src.get("namespace").and_then(Value::as_str) == Some(namespace)
                && src.get("name").and_then(Value::as_str) == Some(name)
        });
        from_nad
            .and_then(|src| src.get(RESOURCE_NAME))
            .or_else(|| self.top.get(RESOURCE_NAME))
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// Reads `<dir>/<name>.<ext>`, the first that exists in the delegator's order.
fn definition(dir: &Path, name: &str) -> Result<Definition, String> {
    for ext in EXTENSIONS {
        let path = dir.join(format!("{name}.{ext}"));
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        if !meta.is_file() {
            return Err(format!("{} is not a regular file (the delegator refuses links)", path.display()));
        }
        if meta.len() > MAX_DEFINITION {
            return Err(format!("{} is larger than {MAX_DEFINITION} bytes", path.display()));
        }
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        return parse(&bytes).map_err(|why| format!("{}: {why}", path.display()));
    }
    Err("no definition file".into())
}

/// A definition's plugin types: a conflist's `plugins[].type`, or a single plugin's `type`,
/// each followed by its `ipam.type` when it has one.
fn parse(bytes: &[u8]) -> Result<Definition, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if !v.is_object() {
        return Err("not a JSON object".into());
    }
    let plugins: Vec<&Value> = match v.get("plugins") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(_) => return Err("plugins is not a list".into()),
        None => vec![&v],
    };
    let mut types = Vec::new();
    let mut ipam = Vec::new();
    for p in plugins {
        let t = p.get("type").and_then(Value::as_str).ok_or("a plugin without a type")?;
        types.push(plugin_name(t)?);
        if let Some(t) = p.get("ipam").and_then(|i| i.get("type")).and_then(Value::as_str) {
            ipam.push(plugin_name(t)?);
        }
    }
    if types.is_empty() {
        return Err("no plugins".into());
    }
    types.extend(ipam);
    let Value::Object(top) = v else { return Err("not a JSON object".into()) };
    Ok(Definition { types, top })
}

/// A plugin type is a file name in the bin dir, never a path (libcni's `FindInPath` joins it
/// to each directory).
fn plugin_name(t: &str) -> Result<String, String> {
    if t.is_empty() || t.contains('/') || t == "." || t == ".." {
        return Err(format!("the plugin type {t:?} is not a file name"));
    }
    Ok(t.to_string())
}

/// Whether `<bin_dir>/<t>` is a regular file (links followed: installers link plugins) with an
/// execute bit.
fn executable(bin_dir: &Path, t: &str) -> bool {
    std::fs::metadata(bin_dir.join(t)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::PathBuf;

    struct Dirs {
        root: PathBuf,
        nets: PathBuf,
        bin: PathBuf,
    }

    impl Dirs {
        fn new(tag: &str) -> Dirs {
            let root = std::env::temp_dir().join(format!("braid-inventory-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            let (nets, bin) = (root.join("braid.d"), root.join("bin"));
            std::fs::create_dir_all(&nets).unwrap();
            std::fs::create_dir_all(&bin).unwrap();
            Dirs { root, nets, bin }
        }
        fn plugin(&self, name: &str, mode: u32) {
            let p = self.bin.join(name);
            std::fs::write(&p, b"#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        fn net(&self, rel: &str, body: &str) {
            let p = self.nets.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
    }

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    fn list(types: &[&str]) -> String {
        let plugins: Vec<Value> = types.iter().map(|t| serde_json::json!({"type": t})).collect();
        serde_json::json!({"cniVersion": "1.0.0", "name": "x", "plugins": plugins}).to_string()
    }

    /// The reference's test vectors (draft-eastlake-fnv, FNV-1a 32).
    #[test]
    fn fnv1a32_matches_the_reference() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn device_names_are_readable_labels_that_keep_networks_apart() {
        let n = device_name("tenant-a", "side");
        assert_eq!(n, format!("tenant-a-side-{:08x}", fnv1a32(b"tenant-a/side")));
        // The readable parts agree; the hash does not.
        let (x, y) = (device_name("a-b", "c"), device_name("a", "b-c"));
        assert!(x.starts_with("a-b-c-") && y.starts_with("a-b-c-"), "{x} {y}");
        assert_ne!(x, y);
        // The longest names: truncated, no "-" before the hash's own, at most 63.
        let long = device_name(&"n".repeat(63), &"m".repeat(63));
        assert_eq!(long.len(), 63);
        assert!(is_dns_label(&long), "{long}");
        let cut = device_name(&format!("{}-x", "n".repeat(52)), "m");
        assert!(!cut.contains("--") && is_dns_label(&cut), "{cut}");
        // Stable: the same on every node and in every version.
        // (the hash computed independently: Python's FNV-1a 32 of "default/macvlan-conf").
        assert_eq!(device_name("default", "macvlan-conf"), "default-macvlan-conf-a0b61a00");
    }

    proptest! {
        /// Every pair of distinct networks of DNS labels gets distinct device names that are
        /// DNS labels of at most 63 characters.
        #[test]
        fn device_names_are_labels_and_distinct(
            a in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", b in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
            c in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", d in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
        ) {
            let (x, y) = (device_name(&a, &b), device_name(&c, &d));
            prop_assert!(x.len() <= 63 && is_dns_label(&x), "{}", x);
            prop_assert!(y.len() <= 63 && is_dns_label(&y), "{}", y);
            if (a, b) != (c, d) {
                prop_assert_ne!(x, y);
            }
        }
    }

    #[test]
    fn a_network_is_offered_only_when_every_plugin_is_an_executable_of_the_bin_dir() {
        let d = Dirs::new("bin-rule");
        d.plugin("macvlan", 0o755);
        d.plugin("tuning", 0o755);
        d.plugin("host-local", 0o755);
        d.plugin("not-exec", 0o644);
        std::fs::create_dir(d.bin.join("a-dir")).unwrap();
        std::os::unix::fs::symlink(d.bin.join("macvlan"), d.bin.join("linked")).unwrap();
        d.net("t/ok.conflist", &list(&["macvlan", "tuning"]));
        d.net(
            "t/ipam.conflist",
            r#"{"cniVersion":"1.0.0","name":"ipam","plugins":[{"type":"macvlan","ipam":{"type":"host-local"}}]}"#,
        );
        d.net(
            "t/no-ipam.conflist",
            r#"{"cniVersion":"1.0.0","name":"no-ipam","plugins":[{"type":"macvlan","ipam":{"type":"whereabouts"}}]}"#,
        );
        d.net("t/second-missing.conflist", &list(&["macvlan", "sriov"]));
        d.net("t/not-exec.conflist", &list(&["not-exec"]));
        d.net("t/a-dir.conflist", &list(&["a-dir"]));
        d.net("t/linked.conflist", &list(&["linked"]));
        d.net("t/path.conflist", &list(&["../bin/macvlan"]));
        d.net("t/single.conf", r#"{"cniVersion":"1.0.0","name":"single","type":"tuning"}"#);
        let inv = inventory(&d.nets, &d.bin);
        let offered: Vec<&str> = inv.devices.iter().map(|d| d.network.as_str()).collect();
        assert_eq!(offered, ["t/ipam", "t/linked", "t/ok", "t/single"]);
        let skipped: Vec<&str> = inv.skipped.keys().map(String::as_str).collect();
        assert_eq!(skipped, ["t/a-dir", "t/no-ipam", "t/not-exec", "t/path", "t/second-missing"]);
        assert!(inv.skipped["t/second-missing"].contains("\"sriov\""), "{:?}", inv.skipped);
        assert!(inv.skipped["t/no-ipam"].contains("whereabouts"));
        assert_eq!(inv.devices[2].plugin_type, "macvlan");
        assert_eq!(inv.devices[3].plugin_type, "tuning");
        // Why a device is not offered, as Prepare tells the kubelet: the inventory's reason,
        // a definition gone since it was offered, a name this node never offered.
        let seen = Seen::default();
        seen.remember(&inv.devices);
        let m = missing(&inv, &seen, &d.nets, &device_name("t", "second-missing"));
        assert_eq!(m.network.as_deref(), Some("t/second-missing"));
        assert!(m.why.contains("\"sriov\""), "{m:?}");
        std::fs::remove_file(d.nets.join("t/ok.conflist")).unwrap();
        let m = missing(&inventory(&d.nets, &d.bin), &seen, &d.nets, &device_name("t", "ok"));
        assert_eq!(m.network.as_deref(), Some("t/ok"));
        assert!(m.why.contains("definition is gone"), "{m:?}");
        assert_eq!(missing(&inv, &seen, &d.nets, "t-never-00000000").network, None);
        // The plugin installed later: offered at the next scan.
        d.plugin("sriov", 0o755);
        assert!(find(&inventory(&d.nets, &d.bin).devices, &device_name("t", "second-missing")).is_some());
    }

    #[test]
    fn devices_are_sorted_by_network_and_carry_their_resource_name() {
        let d = Dirs::new("sorted");
        d.plugin("macvlan", 0o755);
        let nad = |ns: &str, name: &str, res: &str| {
            format!(
                r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"macvlan"}}],"braid.io/networkAttachmentDefinition":{{"namespace":"{ns}","name":"{name}","uid":"u","resourceVersion":"1","k8s.v1.cni.cncf.io/resourceName":"{res}"}}}}"#
            )
        };
        d.net("zeta/a.conflist", &list(&["macvlan"]));
        d.net("alpha/b.conflist", &nad("alpha", "b", "intel.com/sriov_a"));
        d.net("alpha/a-b.conflist", &list(&["macvlan"]));
        // A copied file whose record names another NAD: the record's resource is not this network's.
        d.net("alpha/copy.conflist", &nad("alpha", "b", "intel.com/sriov_a"));
        // A ConfigMap network names its resource itself.
        d.net(
            "beta/own.conflist",
            r#"{"cniVersion":"1.0.0","name":"own","plugins":[{"type":"macvlan"}],"k8s.v1.cni.cncf.io/resourceName":"example.com/vf"}"#,
        );
        // What is not a network: the mirrors' records, temporary files, names that are no labels,
        // files at the top, links.
        d.net(".braid-install-nads.json", "{}");
        d.net("alpha/.b.conflist.tmp", &list(&["macvlan"]));
        d.net("alpha/Upper.conflist", &list(&["macvlan"]));
        d.net("top.conflist", &list(&["macvlan"]));
        d.net("Bad_NS/x.conflist", &list(&["macvlan"]));
        std::os::unix::fs::symlink(d.nets.join("zeta/a.conflist"), d.nets.join("zeta/link.conflist")).unwrap();
        // One name, several extensions: the delegator's order, .conflist first.
        d.net("zeta/a.json", "not json");
        d.net("zeta/b.json", &list(&["macvlan"]));
        d.net("zeta/b.conf", "not json");
        let inv = inventory(&d.nets, &d.bin);
        let got: Vec<(&str, Option<&str>)> =
            inv.devices.iter().map(|d| (d.network.as_str(), d.resource_name.as_deref())).collect();
        assert_eq!(
            got,
            [
                ("alpha/a-b", None),
                ("alpha/b", Some("intel.com/sriov_a")),
                ("alpha/copy", None),
                ("beta/own", Some("example.com/vf")),
                ("zeta/a", None),
            ]
        );
        assert!(inv.skipped["zeta/b"].contains("b.conf"), "{:?}", inv.skipped);
        assert!(inv.skipped["zeta/link"].contains("links"), "{:?}", inv.skipped);
        let b = find(&inv.devices, &device_name("alpha", "b")).unwrap();
        assert_eq!((b.namespace.as_str(), b.net_name.as_str()), ("alpha", "b"));
        assert!(find(&inv.devices, "alpha-b").is_none());
        // No networks dir yet: nothing, no error.
        assert_eq!(inventory(&d.root.join("missing"), &d.bin), Inventory::default());
    }
}
