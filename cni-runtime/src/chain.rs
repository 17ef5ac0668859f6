//! Running a conflist the way libcni does (`libcni/api.go`: `AddNetworkList`, `CheckNetworkList`, `DelNetworkList`, `GCNetworkList`): ADD in order passing each
//! plugin's result on as `prevResult`, CHECK with the cached result, DEL in reverse, GC of stale
//! cached attachments then GC to every plugin, STATUS; per-plugin requests built as libcni
//! builds them; the `cniCacheV1` result cache. Delegates that are conflists run through this,
//! and the integration tests use it as their runtime.

use crate::files::Links;
use crate::invoke::{self, Exec, InvokeError};
use cni_types::config::{GcAttachment, GC_ATTACHMENTS_LEGACY, GC_VALID_ATTACHMENTS};
use cni_types::result::AnyResult;
use cni_types::runtime_config::runtime_config_for;
use cni_types::version::{self, Command};
use cni_types::{gojson, CniError, Invocation, NetConf, NetConfList};
use serde_json::{Map, Value};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// What the runtime knows about one attachment (libcni's `RuntimeConf`): the parameters of
/// every call made for it, and the capability arguments (`runtimeConfig`) on offer. Each call
/// is the [`Invocation`] this makes with a command and a `CNI_PATH`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeConf {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_ARGS`, as sent (libcni joins its pairs with `;`; the cache records them split).
    pub args: String,
    /// Capability arguments offered to plugins that declare them.
    pub capability_args: Map<String, Value>,
}

impl RuntimeConf {
    /// The call of `command` for this attachment, with plugins found in `path`.
    pub fn invocation(&self, command: Command, path: &str) -> Invocation {
        Invocation {
            command,
            container_id: self.container_id.clone(),
            netns: self.netns.clone(),
            ifname: self.ifname.clone(),
            args: self.args.clone(),
            path: path.to_string(),
        }
    }

    /// The same attachment seen from a call (what a meta-plugin offers its delegates).
    pub fn from_invocation(inv: &Invocation, capability_args: Map<String, Value>) -> RuntimeConf {
        RuntimeConf {
            container_id: inv.container_id.clone(),
            netns: inv.netns.clone(),
            ifname: inv.ifname.clone(),
            args: inv.args.clone(),
            capability_args,
        }
    }
}

/// A chain failure, worded as libcni words it. [`ChainError::cause`] is the failing plugin's
/// own error (its code intact), when one said why.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The runtime's parameters break a rule: container ID, network name, interface name.
    #[error(transparent)]
    Invalid(CniError),
    /// A list without plugins.
    #[error("no plugins in list")]
    NoPlugins,
    /// A plugin of the list could not be found or run, or failed, in ADD, DEL or GC:
    /// `plugin type="tuning" failed (add): …`.
    #[error("plugin {plugin} failed ({verb}): {source}")]
    Plugin {
        /// `type="tuning"`, with ` name="…"` when it has one.
        plugin: String,
        /// `add`, `delete` or `gc`.
        verb: &'static str,
        /// What went wrong.
        #[source]
        source: InvokeError,
    },
    /// A plugin could not be found or run, or failed, in CHECK or STATUS (libcni does not
    /// wrap these).
    #[error(transparent)]
    Invoke(#[from] InvokeError),
    /// CHECK of a list whose version has no CHECK (below 0.4.0).
    #[error("configuration version {} does not support the CHECK command", gojson::quote(.0))]
    CheckUnsupported(String),
    /// The cached result CHECK sends could not be read.
    #[error("failed to get network {} cached result: {source}", gojson::quote(.network))]
    CachedResult {
        /// The list's name.
        network: String,
        /// Why.
        #[source]
        source: CacheError,
    },
    /// The cache file path could not be built.
    #[error(transparent)]
    CachePath(CacheError),
    /// The result could not be cached after a successful ADD.
    #[error("failed to write cached result: {0}")]
    CacheWrite(#[source] std::io::Error),
    /// The cached result could not be removed after DEL.
    #[error("failed to remove cached result: {0}")]
    CacheRemove(#[source] std::io::Error),
    /// GC's failures, every one (libcni joins them with newlines).
    #[error("{}", lines(.0))]
    Gc(Vec<ChainError>),
    /// `ValidateNetworkList`'s failures, every plugin's (`[… …]`).
    #[error("[{}]", words(.0))]
    Validate(Vec<Unvalidated>),
}

/// One plugin's failure in [`Chain::validate`].
#[derive(Debug, thiserror::Error)]
pub enum Unvalidated {
    /// Its VERSION answer does not list the list's version.
    #[error("plugin {plugin} does not support config version {}", gojson::quote(.version))]
    Version {
        /// The plugin type.
        plugin: String,
        /// The list's version.
        version: String,
    },
    /// It could not be asked.
    #[error(transparent)]
    Invoke(#[from] InvokeError),
}

/// Why a cached result could not be found or read.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A part of its path is empty (libcni's message).
    #[error(
        "cache file path requires network name ({}), container ID ({}), and interface name ({})",
        gojson::quote(.network),
        gojson::quote(.container_id),
        gojson::quote(.ifname)
    )]
    MissingKey {
        /// The network name.
        network: String,
        /// The container ID.
        container_id: String,
        /// The interface name.
        ifname: String,
    },
    /// A part of its path is not a valid name (it could name a file elsewhere).
    #[error("cache file path: {0}")]
    BadKey(#[source] CniError),
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] std::io::Error),
    /// It is not JSON as Go reads it.
    #[error(transparent)]
    Syntax(#[from] gojson::SyntaxError),
    /// Its result is not a result.
    #[error(transparent)]
    Result(#[from] cni_types::result::CreateError),
    /// Its result cannot be expressed in the list's version.
    #[error(transparent)]
    Convert(#[from] cni_types::result::ConvertError),
}

fn lines(errors: &[ChainError]) -> String {
    errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n")
}

fn words(errors: &[Unvalidated]) -> String {
    errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(" ")
}

impl ChainError {
    /// The failing plugin's own error, code intact: a plugin's error object, a passed deadline
    /// (code 11: the caller ran out of time, not the plugin), or the runtime's invalid
    /// parameters. `None` when no plugin said why.
    pub fn cause(&self) -> Option<CniError> {
        match self {
            ChainError::Invalid(e) => Some(e.clone()),
            ChainError::Plugin { source, .. } | ChainError::Invoke(source) => match source {
                InvokeError::Plugin(c) => Some(c.clone()),
                e @ InvokeError::DeadlinePassed { .. } => Some(CniError::from(e.clone())),
                _ => None,
            },
            _ => None,
        }
    }
}

impl From<ChainError> for CniError {
    /// The failing plugin's code with libcni's wrapped message (`plugin type="tuning" failed
    /// (add): …`), or 999 when no plugin said why.
    fn from(e: ChainError) -> CniError {
        match e.cause() {
            Some(c) => CniError { code: c.code, msg: e.to_string(), details: String::new() },
            None => CniError::new(cni_types::error::INTERNAL, e.to_string()),
        }
    }
}

fn describe(plugin: &NetConf) -> String {
    let mut s = format!("type={}", gojson::quote(plugin.plugin_type()));
    if !plugin.name().is_empty() {
        s.push_str(&format!(" name={}", gojson::quote(plugin.name())));
    }
    s
}

/// A plugin's failure in `verb`, wrapped as libcni wraps it.
fn wrap(plugin: &NetConf, verb: &'static str) -> impl FnOnce(InvokeError) -> ChainError {
    let plugin = describe(plugin);
    move |source| ChainError::Plugin { plugin, verb, source }
}

/// libcni's `buildOneConfig`: the plugin object with the list's `name` and `cniVersion`,
/// `prevResult` when there is one (a configured one passes through otherwise), and
/// `runtimeConfig` from declared capabilities. Compact JSON, keys sorted; `capabilities` stays.
pub fn build_one_config(
    plugin: &NetConf,
    name: &str,
    version: &str,
    prev: Option<&AnyResult>,
    capability_args: &Map<String, Value>,
) -> Vec<u8> {
    let mut conf = plugin.clone();
    conf.set("name", Value::String(name.to_string()));
    conf.set("cniVersion", Value::String(version.to_string()));
    if let Some(prev) = prev {
        conf.set("prevResult", prev.to_value());
    }
    if let Some(rc) = runtime_config_for(conf.capabilities(), capability_args) {
        conf.set("runtimeConfig", Value::Object(rc));
    }
    conf.to_bytes()
}

/// The cap on a cached result: a result is a plugin's stdout, capped at
/// [`MAX_OUTPUT`](crate::child_io::MAX_OUTPUT), plus the configuration it came from.
const MAX_CACHE_FILE: u64 = 2 * crate::child_io::MAX_OUTPUT as u64;

/// Runs conflists with one exec implementation, finding plugins in `paths`, caching results
/// under `cache_dir`.
pub struct Chain<'a> {
    /// How plugins are run.
    pub exec: &'a dyn Exec,
    /// Where plugins are found (`CNI_PATH`).
    pub paths: Vec<PathBuf>,
    /// The result cache root (libcni's default is `/var/lib/cni`).
    pub cache_dir: PathBuf,
}

impl Chain<'_> {
    fn request(&self, command: Command, rt: &RuntimeConf) -> Invocation {
        rt.invocation(command, &cni_types::invocation::join_path(&self.paths))
    }

    fn find(&self, plugin: &NetConf) -> Result<PathBuf, InvokeError> {
        self.exec.find(plugin.plugin_type(), &self.paths)
    }

    /// ADD every plugin in order; on success the final result is cached and returned.
    pub fn add(&self, list: &NetConfList, rt: &RuntimeConf) -> Result<AnyResult, ChainError> {
        let result = self.add_uncached(list, rt)?;
        self.write_cache(list, rt, &result)?;
        Ok(result)
    }

    /// [`Chain::add`] without the result cache, for a caller that keeps the result itself and
    /// hands it back to [`Chain::del_with`] and [`Chain::check_with`] (a meta-plugin's state
    /// records every delegate's result): the cache file is written durably — an fsync of the
    /// file and one of its directory, 0.5–1 ms on a disk — which such a caller pays for nothing.
    pub fn add_uncached(&self, list: &NetConfList, rt: &RuntimeConf) -> Result<AnyResult, ChainError> {
        cni_types::validate::container_id(&rt.container_id).map_err(ChainError::Invalid)?;
        cni_types::validate::network_name(&list.name).map_err(ChainError::Invalid)?;
        cni_types::validate::interface_name(&rt.ifname).map_err(ChainError::Invalid)?;
        let req = self.request(Command::Add, rt);
        let mut prev: Option<AnyResult> = None;
        for plugin in &list.plugins {
            let stdin = build_one_config(plugin, &list.name, &list.cni_version, prev.as_ref(), &rt.capability_args);
            let path = self.find(plugin).map_err(wrap(plugin, "add"))?;
            let result = invoke::add(self.exec, &path, &stdin, &req).map_err(wrap(plugin, "add"))?;
            prev = Some(result);
        }
        prev.ok_or(ChainError::NoPlugins)
    }

    /// CHECK every plugin in order with the cached result; refused below 0.4.0.
    pub fn check(&self, list: &NetConfList, rt: &RuntimeConf) -> Result<(), ChainError> {
        if !Command::Check.allowed_in(&list.cni_version).unwrap_or(false) {
            return Err(ChainError::CheckUnsupported(list.cni_version.clone()));
        }
        if list.disable_check {
            return Ok(());
        }
        let cached = self.cache_path(&list.name, rt).and_then(|p| self.cached_result(list, &p));
        let cached = cached.map_err(|source| ChainError::CachedResult { network: list.name.clone(), source })?;
        self.check_with(list, rt, cached.as_ref())
    }

    /// [`Chain::check`] with `prev` as the list's result (converted to its version), not the
    /// cache's: for a caller that keeps the result itself ([`Chain::add_uncached`]).
    pub fn check_with(&self, list: &NetConfList, rt: &RuntimeConf, prev: Option<&AnyResult>) -> Result<(), ChainError> {
        if !Command::Check.allowed_in(&list.cni_version).unwrap_or(false) {
            return Err(ChainError::CheckUnsupported(list.cni_version.clone()));
        }
        if list.disable_check {
            return Ok(());
        }
        let prev =
            converted(list, prev).map_err(|source| ChainError::CachedResult { network: list.name.clone(), source })?;
        let req = self.request(Command::Check, rt);
        for plugin in &list.plugins {
            let stdin = build_one_config(plugin, &list.name, &list.cni_version, prev.as_ref(), &rt.capability_args);
            let path = self.find(plugin)?;
            invoke::exec_without_result(self.exec, &path, &stdin, &req)?;
        }
        Ok(())
    }

    /// DEL every plugin in reverse with the cached result (if any); removes the cache. With a
    /// name no cache path can be built from (see [`Chain::cache_path`]) the plugins still get
    /// their DEL, without prevResult, and no file is touched: ADD refused such a name before
    /// running anything, so no cache of it exists.
    pub fn del(&self, list: &NetConfList, rt: &RuntimeConf) -> Result<(), ChainError> {
        let mut cached = None;
        if let (Ok(path), true) =
            (self.cache_path(&list.name, rt), version::Version::V0_4_0.reached_by(&list.cni_version))
        {
            match self.cached_result(list, &path) {
                Ok(c) => cached = c,
                Err(_) => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        self.del_with(list, rt, cached.as_ref())
    }

    /// [`Chain::del`] with `prev` as the list's result (converted to its version; sent from
    /// 0.4.0 on, as the cache's would be), not the cache's: for a caller that keeps the result
    /// itself ([`Chain::add_uncached`]). A cache file of this attachment, left by an earlier
    /// [`Chain::add`], is removed as [`Chain::del`] removes it. A `prev` that cannot be
    /// converted is left out, as [`Chain::del`] leaves out a cache it cannot read.
    pub fn del_with(&self, list: &NetConfList, rt: &RuntimeConf, prev: Option<&AnyResult>) -> Result<(), ChainError> {
        let cache = self.cache_path(&list.name, rt).ok();
        let has_prev = version::Version::V0_4_0.reached_by(&list.cni_version);
        let prev = if has_prev { converted(list, prev).ok().flatten() } else { None };
        let req = self.request(Command::Del, rt);
        for plugin in list.plugins.iter().rev() {
            let stdin = build_one_config(plugin, &list.name, &list.cni_version, prev.as_ref(), &rt.capability_args);
            let path = self.find(plugin).map_err(wrap(plugin, "delete"))?;
            invoke::exec_without_result(self.exec, &path, &stdin, &req).map_err(wrap(plugin, "delete"))?;
        }
        let Some(path) = cache else { return Ok(()) };
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ChainError::CacheRemove(e)),
        }
    }

    /// GC: DEL every cached attachment of this network that is not in `valid`, then (1.1.0
    /// and later) send GC with the valid list to every plugin. All errors are reported, joined.
    pub fn gc(&self, list: &NetConfList, valid: Option<&[GcAttachment]>) -> Result<(), ChainError> {
        if list.disable_gc {
            return Ok(());
        }
        let mut errors = Vec::new();
        let keep = valid.unwrap_or(&[]);
        for entry in self.cache_entries(&list.name) {
            let stale = !keep.iter().any(|a| a.container_id == entry.container_id && a.ifname == entry.ifname);
            if stale {
                if let Err(e) = self.del(list, &entry) {
                    errors.push(e);
                }
            }
        }
        if Command::Gc.allowed_in(&list.cni_version).unwrap_or(false) {
            let attachments: Value = match valid {
                Some(v) => Value::Array(
                    v.iter().map(|a| serde_json::json!({"containerID": a.container_id, "ifname": a.ifname})).collect(),
                ),
                None => Value::Null,
            };
            let req = self.request(Command::Gc, &RuntimeConf::default());
            for plugin in &list.plugins {
                let mut conf = plugin.clone();
                conf.set("name", Value::String(list.name.clone()));
                conf.set("cniVersion", Value::String(list.cni_version.clone()));
                if valid.is_some() {
                    conf.set(GC_VALID_ATTACHMENTS, attachments.clone());
                    conf.set(GC_ATTACHMENTS_LEGACY, attachments.clone());
                }
                let result = self
                    .find(plugin)
                    .and_then(|path| invoke::exec_without_result(self.exec, &path, &conf.to_bytes(), &req));
                if let Err(e) = result {
                    errors.push(wrap(plugin, "gc")(e));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ChainError::Gc(errors))
        }
    }

    /// STATUS to every plugin in order (1.1.0 and later); the first failure, code intact.
    pub fn status(&self, list: &NetConfList) -> Result<(), ChainError> {
        if !Command::Status.allowed_in(&list.cni_version).unwrap_or(false) {
            return Ok(());
        }
        let req = self.request(Command::Status, &RuntimeConf::default());
        for plugin in &list.plugins {
            let mut conf = plugin.clone();
            conf.set("name", Value::String(list.name.clone()));
            conf.set("cniVersion", Value::String(list.cni_version.clone()));
            let path = self.find(plugin)?;
            invoke::exec_without_result(self.exec, &path, &conf.to_bytes(), &req)?;
        }
        Ok(())
    }

    /// libcni's `ValidateNetworkList`: every plugin must list the exact list version in its
    /// VERSION answer. Returns the union of enabled capabilities.
    pub fn validate(&self, list: &NetConfList) -> Result<Vec<String>, ChainError> {
        let mut errors = Vec::new();
        let mut caps: Vec<String> = Vec::new();
        for plugin in &list.plugins {
            let supported = self
                .find(plugin)
                .and_then(|path| invoke::version_info(self.exec, &path))
                .map(|i| i.supported_versions.contains(&list.cni_version));
            match supported {
                Ok(true) => {}
                Ok(false) => errors.push(Unvalidated::Version {
                    plugin: plugin.plugin_type().to_string(),
                    version: list.cni_version.clone(),
                }),
                Err(e) => errors.push(e.into()),
            }
            for (cap, on) in plugin.capabilities() {
                if *on && !caps.contains(cap) {
                    caps.push(cap.clone());
                }
            }
        }
        if errors.is_empty() {
            caps.sort();
            Ok(caps)
        } else {
            Err(ChainError::Validate(errors))
        }
    }

    /// Why no cache path can be built (libcni's message), if so.
    pub fn cache_key_error(network: &str, rt: &RuntimeConf) -> Option<CacheError> {
        (network.is_empty() || rt.container_id.is_empty() || rt.ifname.is_empty()).then(|| CacheError::MissingKey {
            network: network.to_string(),
            container_id: rt.container_id.clone(),
            ifname: rt.ifname.clone(),
        })
    }

    /// `<cacheDir>/results/<network>-<containerID>-<ifname>`, each part validated first (the
    /// network and container ID as libcni validates them on ADD, the interface name as the
    /// spec says): DEL and CHECK build the path from a name ADD never checked (a configuration
    /// changed since, a list without state), and a `/` or `..` in it must never make braid read
    /// or remove a file elsewhere. libcni itself builds it with `filepath.Join` unchecked.
    pub fn cache_path(&self, network: &str, rt: &RuntimeConf) -> Result<PathBuf, CacheError> {
        if let Some(e) = Chain::cache_key_error(network, rt) {
            return Err(e);
        }
        cni_types::validate::network_name(network).map_err(CacheError::BadKey)?;
        cni_types::validate::container_id(&rt.container_id).map_err(CacheError::BadKey)?;
        cni_types::validate::interface_name(&rt.ifname).map_err(CacheError::BadKey)?;
        Ok(self.cache_dir.join("results").join(format!("{network}-{}-{}", rt.container_id, rt.ifname)))
    }

    fn write_cache(&self, list: &NetConfList, rt: &RuntimeConf, result: &AnyResult) -> Result<(), ChainError> {
        let path = self.cache_path(&list.name, rt).map_err(ChainError::CachePath)?;
        let dir = self.cache_dir.join("results");
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(ChainError::CacheWrite)?;
        crate::files::replace(&path, &cache_file_bytes(list, rt, result), 0o600)
            .map_err(|e| ChainError::CacheWrite(e.source))
    }

    fn cached_result(&self, list: &NetConfList, path: &Path) -> Result<Option<AnyResult>, CacheError> {
        let bytes = match crate::files::read_regular(path, MAX_CACHE_FILE, Links::Refuse) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let value: Value = gojson::parse(&bytes)?;
        let raw = match value.get("kind") {
            Some(Value::String(k)) if k == "cniCacheV1" => value.get("result").cloned().unwrap_or(Value::Null),
            _ => value,
        };
        if raw.is_null() {
            return Ok(None);
        }
        // A `Value` always serialises.
        let bytes = serde_json::to_vec(&raw).unwrap_or_default();
        Ok(Some(AnyResult::from_bytes(&bytes)?.convert_to(&list.cni_version)?))
    }

    fn cache_entries(&self, network: &str) -> Vec<RuntimeConf> {
        let Ok(dir) = std::fs::read_dir(self.cache_dir.join("results")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let Ok(bytes) = crate::files::read_regular(&entry.path(), MAX_CACHE_FILE, Links::Refuse) else { continue };
            let Ok(v) = serde_json::from_slice::<Value>(&bytes) else { continue };
            if v.get("kind").and_then(Value::as_str) != Some("cniCacheV1")
                || v.get("networkName").and_then(Value::as_str) != Some(network)
            {
                continue;
            }
            let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let args = v
                .get("cniArgs")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|p| Some(format!("{}={}", p.get(0)?.as_str()?, p.get(1)?.as_str()?)))
                        .collect::<Vec<_>>()
                        .join(";")
                })
                .unwrap_or_default();
            out.push(RuntimeConf {
                container_id: text("containerId"),
                netns: text("netns"),
                ifname: text("ifName"),
                args,
                capability_args: v.get("capabilityArgs").and_then(Value::as_object).cloned().unwrap_or_default(),
            });
        }
        out
    }
}

/// `prev` in the version of `list`, as a cached result is read ([`Chain::check_with`],
/// [`Chain::del_with`]).
fn converted(list: &NetConfList, prev: Option<&AnyResult>) -> Result<Option<AnyResult>, CacheError> {
    Ok(match prev {
        Some(r) => Some(r.convert_to(&list.cni_version)?),
        None => None,
    })
}

/// The cache file libcni writes, keys in libcni's order.
pub fn cache_file_bytes(list: &NetConfList, rt: &RuntimeConf, result: &AnyResult) -> Vec<u8> {
    let mut out = String::from("{\"kind\":\"cniCacheV1\"");
    let s = |v: &str| gojson::to_go_string(v);
    out.push_str(&format!(",\"containerId\":{}", s(&rt.container_id)));
    out.push_str(&format!(",\"config\":\"{}\"", base64(&list.bytes)));
    out.push_str(&format!(",\"ifName\":{}", s(&rt.ifname)));
    out.push_str(&format!(",\"networkName\":{}", s(&list.name)));
    if !rt.netns.is_empty() {
        out.push_str(&format!(",\"netns\":{}", s(&rt.netns)));
    }
    let pairs = cni_types::args::split_pairs(&rt.args).unwrap_or_default();
    if !pairs.is_empty() {
        let pairs: Vec<[&str; 2]> = pairs.iter().map(|(k, v)| [k.as_str(), v.as_str()]).collect();
        out.push_str(&format!(",\"cniArgs\":{}", gojson::to_go_string(&pairs)));
    }
    if !rt.capability_args.is_empty() {
        out.push_str(&format!(",\"capabilityArgs\":{}", gojson::to_go_string(&rt.capability_args)));
    }
    out.push_str(&format!(",\"result\":{}", result.to_json()));
    out.push('}');
    out.into_bytes()
}

/// Standard base64 with padding (how Go's JSON encodes `[]byte`).
fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(T[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Why [`inject_conf`] refused, in libcni's words.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The configuration does not parse.
    #[error("unmarshal existing network bytes: {0}")]
    Parse(#[source] cni_types::DecodeError),
    /// An empty key.
    #[error("keys cannot be empty")]
    EmptyKey,
    /// A key set to `null`.
    #[error("key '{0}' value must not be nil")]
    NullValue(String),
}

/// libcni's `InjectConf`: sets top-level keys in a configuration, returning compact JSON with
/// keys sorted.
pub fn inject_conf(orig: &[u8], inject: &Map<String, Value>) -> Result<Vec<u8>, InjectError> {
    let mut conf = NetConf::parse(orig).map_err(InjectError::Parse)?;
    for (k, v) in inject {
        if k.is_empty() {
            return Err(InjectError::EmptyKey);
        }
        if v.is_null() {
            return Err(InjectError::NullValue(k.clone()));
        }
        conf.set(k, v.clone());
    }
    Ok(conf.to_bytes())
}

/// Why [`load_list`] could not read a configuration file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not a regular file that could be read, or larger than the cap.
    #[error("{}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON as Go reads it.
    #[error("{}: {source}", .path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: gojson::SyntaxError,
    },
    /// JSON, but not a conflist or a plugin configuration (libcni's message, without the path).
    #[error(transparent)]
    Config(#[from] cni_types::conflist::ConfListError),
}

/// Reads `path`, whether a conflist or a single plugin configuration (wrapped as a list): a
/// regular file (symlinks followed, as libcni does), never a FIFO, at most
/// [`MAX_CONFIG_FILE`](crate::files::MAX_CONFIG_FILE) bytes.
pub fn load_list(path: &Path) -> Result<NetConfList, LoadError> {
    let bytes = crate::files::read_regular(path, crate::files::MAX_CONFIG_FILE, Links::Follow)
        .map_err(|source| LoadError::Read { path: path.to_path_buf(), source })?;
    let value = gojson::parse(&bytes).map_err(|source| LoadError::Syntax { path: path.to_path_buf(), source })?;
    if value.get("plugins").is_some() {
        Ok(NetConfList::parse(&bytes)?)
    } else {
        Ok(NetConfList::from_single(cni_types::conflist::parse_plugin(value)?))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc_examples() {
        for (i, o) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(super::base64(i.as_bytes()), o);
        }
    }
}
