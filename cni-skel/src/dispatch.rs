//! The dispatcher: environment and stdin in, one command run, result or error out.
//!
//! It reproduces the Go skeleton (`pkg/skel/skel.go`, `dispatcher.pluginMain`) check for check
//! and message for message — the required-variable table, the order of checks, the version
//! gates of CHECK/GC/STATUS, VERSION without reading stdin, the about text. Where it
//! deliberately differs is listed once, in the crate README ("Where braid differs from Go").

use crate::env::Environment;
use cni_types::error::{
    DECODING_FAILURE, INCOMPATIBLE_CNI_VERSION, INTERNAL, INVALID_ENVIRONMENT_VARIABLES, INVALID_NETNS, IO_FAILURE,
};
use cni_types::version::{self, Command, Version};
use cni_types::{CniError, Invocation, NetConf};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The largest configuration accepted on stdin. Real configurations are a few KiB; anything near
/// this is a runtime bug, and reading it unbounded would let one bad call exhaust memory.
pub const MAX_STDIN: u64 = 16 * 1024 * 1024;

/// What a command's callback receives (Go's `skel.CmdArgs`): the call's parameters as a
/// runtime passes them to any plugin (an [`Invocation`]: `args.container_id`, `args.netns`, …
/// read through it), what only the called plugin sees (`CNI_NETNS_OVERRIDE`, stdin), and the
/// configuration parsed once ([`CmdArgs::conf`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmdArgs {
    /// `CNI_COMMAND`, `CNI_CONTAINERID` (empty for GC and STATUS), `CNI_NETNS` (may be empty
    /// for DEL, GC, STATUS), `CNI_IFNAME`, `CNI_ARGS` unparsed (see
    /// [`cni_types::args::load_args`]), `CNI_PATH` unsplit (see [`Invocation::path_list`]).
    pub invocation: Invocation,
    /// `CNI_NETNS_OVERRIDE`.
    pub netns_override: String,
    /// stdin, unmodified.
    pub stdin_data: Vec<u8>,
    /// `stdin_data` parsed, at most once per call (see [`CmdArgs::conf`]). The dispatcher
    /// fills it from the parse its own checks made; a `CmdArgs` built by hand (tests) leaves
    /// it `Default` and it is parsed on first use. Set `stdin_data` before the first
    /// [`CmdArgs::conf`]: the parse is not redone after it changes.
    pub parsed: ParsedConf,
}

/// The configuration of one call, parsed once and shared by everything that reads it (the
/// plugin, its logger, the engine): one ADD used to parse stdin three times.
#[derive(Debug, Clone, Default)]
pub struct ParsedConf(std::sync::OnceLock<Result<Arc<NetConf>, cni_types::DecodeError>>);

impl ParsedConf {
    /// A parse already made.
    pub fn from_result(parsed: Result<NetConf, cni_types::DecodeError>) -> ParsedConf {
        ParsedConf(std::sync::OnceLock::from(parsed.map(Arc::new)))
    }
}

/// A cache of `stdin_data`, not part of a call's identity: two calls with the same values are
/// equal whether or not either was parsed yet.
impl PartialEq for ParsedConf {
    fn eq(&self, _: &ParsedConf) -> bool {
        true
    }
}

impl Eq for ParsedConf {}

impl CmdArgs {
    /// The configuration on stdin, typed; decode failures are code 6. Parsed once per call,
    /// however often it is asked for.
    pub fn conf(&self) -> Result<&NetConf, CniError> {
        self.parsed().map(|c| &**c)
    }

    /// [`CmdArgs::conf`], shared: for what keeps the configuration beyond a borrow of the
    /// arguments (braid's engine), without a deep copy of it.
    pub fn shared_conf(&self) -> Result<Arc<NetConf>, CniError> {
        self.parsed().cloned()
    }

    fn parsed(&self) -> Result<&Arc<NetConf>, CniError> {
        self.parsed
            .0
            .get_or_init(|| NetConf::parse(&self.stdin_data).map(Arc::new))
            .as_ref()
            .map_err(|e| CniError::new(DECODING_FAILURE, format!("failed to parse network configuration: {e}")))
    }
}

/// `args.netns`, `args.container_id`, …: the call's parameters are read as fields of the
/// arguments, as in Go's `skel.CmdArgs`.
impl std::ops::Deref for CmdArgs {
    type Target = Invocation;

    fn deref(&self) -> &Invocation {
        &self.invocation
    }
}

/// A CNI plugin. Implement `add` and `del`; the rest default to success, as a nil Go callback
/// does.
pub trait Plugin {
    /// The versions the plugin accepts in configurations, in order (Go's `PluginInfo`).
    fn supported_versions(&self) -> Vec<String> {
        version::ALL.iter().map(|s| s.to_string()).collect()
    }

    /// A one-line description printed to stderr when run without `CNI_COMMAND`. With `None`,
    /// running without a command is an error, as in Go.
    fn about(&self) -> Option<String> {
        None
    }

    /// ADD: returns the result in the 1.1 model; the skel prints it in the config's version.
    fn add(&self, args: &CmdArgs) -> Result<cni_types::CniResult, CniError>;

    /// ADD, for a plugin that hands on a result made by another plugin: the result in the
    /// family it was made in, which the skel converts to the configuration's version as Go's
    /// `GetAsVersion` does — within a family without loss. (Through the 1.x model, a 0.2.0
    /// result with routes but no IPs could not come back to 0.2.0.) The default is [`Plugin::add`].
    fn add_in_family(&self, args: &CmdArgs) -> Result<cni_types::AnyResult, CniError> {
        self.add(args).map(cni_types::AnyResult::V1)
    }

    /// DEL: must succeed when what it would remove is already gone.
    fn del(&self, args: &CmdArgs) -> Result<(), CniError>;

    /// CHECK (0.4.0 and later).
    fn check(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }

    /// GC (1.1.0 and later).
    fn gc(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }

    /// STATUS (1.1.0 and later): code 50 or 51 when not ready.
    fn status(&self, _args: &CmdArgs) -> Result<(), CniError> {
        Ok(())
    }
}

/// Which variables each command requires (Go's table). VERSION needs only `CNI_COMMAND`.
struct Var {
    name: &'static str,
    required: &'static [Command],
}

const VARS: [Var; 7] = [
    Var { name: "CNI_COMMAND", required: &[] },
    Var { name: "CNI_CONTAINERID", required: &[Command::Add, Command::Check, Command::Del] },
    Var { name: "CNI_NETNS", required: &[Command::Add, Command::Check] },
    Var { name: "CNI_IFNAME", required: &[Command::Add, Command::Check, Command::Del] },
    Var { name: "CNI_ARGS", required: &[] },
    Var { name: "CNI_PATH", required: &[Command::Add, Command::Check, Command::Del, Command::Gc, Command::Status] },
    Var { name: "CNI_NETNS_OVERRIDE", required: &[] },
];

fn args_from_env(env: &dyn Environment) -> Result<(String, CmdArgs), CniError> {
    let get = |k: &str| env.getenv(k).unwrap_or_default();
    let command = get("CNI_COMMAND");
    let cmd = Command::parse(&command);
    let mut missing = Vec::new();
    let mut values: [String; 7] = Default::default();
    for (i, var) in VARS.iter().enumerate() {
        let value = get(var.name);
        let required = i == 0 || cmd.is_some_and(|c| var.required.contains(&c));
        if required && value.is_empty() {
            missing.push(var.name);
        } else if required {
            match var.name {
                "CNI_CONTAINERID" => cni_types::validate::container_id(&value)?,
                "CNI_IFNAME" => cni_types::validate::interface_name(&value)?,
                _ => {}
            }
        }
        values[i] = value;
    }
    if !missing.is_empty() {
        return Err(CniError::new(
            INVALID_ENVIRONMENT_VARIABLES,
            format!("required env variables [{}] missing", missing.join(",")),
        ));
    }
    let [_, container_id, netns, ifname, args, path, netns_override] = values;
    let command_parsed = cmd.unwrap_or_default();
    Ok((
        command,
        CmdArgs {
            invocation: Invocation { command: command_parsed, container_id, netns, ifname, args, path },
            netns_override,
            stdin_data: Vec::new(),
            parsed: ParsedConf::default(),
        },
    ))
}

fn read_stdin(env: &mut dyn Environment) -> Result<Vec<u8>, CniError> {
    let mut buf = Vec::new();
    let io_err = |e: std::io::Error| CniError::new(IO_FAILURE, format!("error reading from stdin: {e}"));
    env.stdin().take(MAX_STDIN + 1).read_to_end(&mut buf).map_err(io_err)?;
    if buf.len() as u64 > MAX_STDIN {
        return Err(CniError::new(
            IO_FAILURE,
            format!("error reading from stdin: configuration larger than {MAX_STDIN} bytes"),
        ));
    }
    Ok(buf)
}

fn config_error(e: String) -> CniError {
    CniError::new(DECODING_FAILURE, format!("error unmarshall network config: {e}"))
}

/// stdin as JSON, with Go's syntax errors: the one parse of the call, from which the name is
/// checked, the version read and the configuration built.
fn parse_stdin(stdin: &[u8]) -> Result<serde_json::Value, CniError> {
    cni_types::gojson::parse(stdin).map_err(|e| config_error(e.to_string()))
}

/// The skel's network configuration check: stdin must hold `{"name": <valid name>}`.
fn validate_config(value: &serde_json::Value) -> Result<(), CniError> {
    let decode = config_error;
    let name = match value {
        serde_json::Value::Object(map) => {
            let v =
                map.get("name").or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case("name")).map(|(_, v)| v));
            match v {
                None | Some(serde_json::Value::Null) => String::new(),
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(decode(format!(
                        "json: cannot unmarshal {} into Go struct field .name of type string",
                        cni_types::gojson::type_name(other)
                    )))
                }
            }
        }
        serde_json::Value::Null => String::new(),
        other => {
            return Err(decode(format!(
                "json: cannot unmarshal {} into Go value of type struct {{ Name string \"json:\\\"name\\\"\" }}",
                cni_types::gojson::type_name(other)
            )))
        }
    };
    cni_types::validate::network_name_skel(&name)
}

fn decode_version(value: &serde_json::Value) -> Result<String, CniError> {
    Ok(cni_types::version::decode_version_of(value)?)
}

fn reconcile(config: &str, supported: &[String]) -> Result<(), CniError> {
    Ok(version::reconcile(config, supported)?)
}

/// The CHECK/GC/STATUS gate (`pkg/skel/skel.go`, `dispatcher.pluginMain`: the configuration's
/// version must allow the command, and the plugin must support that version or a later one).
fn gate(cmd: Command, value: &serde_json::Value, supported: &[String]) -> Result<(), CniError> {
    let config = decode_version(value)?;
    let parse = |v: &str| Version::parse(v).map_err(CniError::from);
    let min = parse(cmd.since())?;
    if parse(&config)? < min {
        return Err(CniError::new(INCOMPATIBLE_CNI_VERSION, format!("config version does not allow {cmd}")));
    }
    let wanted = parse(&config)?;
    for v in supported {
        if parse(v)? >= wanted {
            return reconcile(&config, supported);
        }
    }
    Err(CniError::new(INCOMPATIBLE_CNI_VERSION, format!("plugin version does not allow {cmd}")))
}

/// Go's own-namespace check: an unopenable or empty `CNI_NETNS` is fine (DEL of a vanished
/// namespace), the plugin's own namespace is code 8.
fn check_not_own_netns(args: &CmdArgs) -> Result<(), CniError> {
    let o = args.netns_override.as_str();
    if o.eq_ignore_ascii_case("true") || o == "1" || args.netns.is_empty() {
        return Ok(());
    }
    let Ok(target) = crate::netns::identity(std::path::Path::new(&args.netns)) else {
        return Ok(());
    };
    let own =
        crate::netns::current_identity().map_err(|_| CniError::new(INVALID_NETNS, "get plugin's netns failed"))?;
    if own == target {
        return Err(CniError::new(INVALID_NETNS, "plugin's netns and netns from CNI_NETNS should not be the same"));
    }
    Ok(())
}

/// Everything after the environment: returns what to print on success.
fn dispatch(plugin: &dyn Plugin, env: &mut dyn Environment) -> Result<Option<String>, CniError> {
    let (command, mut args) = args_from_env(&*env)?;
    let supported = plugin.supported_versions();
    if command == "VERSION" {
        let info = version::VersionInfo { cni_version: version::CURRENT.to_string(), supported_versions: supported };
        return Ok(Some(format!("{}\n", info.to_json())));
    }
    args.stdin_data = read_stdin(env)?;
    let value = parse_stdin(&args.stdin_data)?;
    validate_config(&value)?;
    let Some(cmd) = Command::parse(&command) else {
        return Err(CniError::new(INVALID_ENVIRONMENT_VARIABLES, format!("unknown CNI_COMMAND: {command}")));
    };
    let version = match cmd {
        Command::Add | Command::Del => decode_version(&value).and_then(|v| reconcile(&v, &supported).map(|()| v)),
        Command::Check | Command::Gc | Command::Status => gate(cmd, &value, &supported).map(|()| String::new()),
        Command::Version => Ok(String::new()),
    }?;
    args.parsed = ParsedConf::from_result(NetConf::from_value(value));
    match cmd {
        Command::Add => {
            check_not_own_netns(&args)?;
            let result = plugin.add_in_family(&args)?;
            let config = version;
            let printed = result.into_version(&config).map(|r| r.to_json_pretty()).map_err(|e| {
                CniError::new(INTERNAL, format!("cannot express the result in cniVersion {config}: {e}"))
            })?;
            Ok(Some(printed))
        }
        Command::Del => {
            check_not_own_netns(&args)?;
            plugin.del(&args).map(|()| None)
        }
        Command::Check => plugin.check(&args).map(|()| None),
        Command::Gc => plugin.gc(&args).map(|()| None),
        Command::Status => plugin.status(&args).map(|()| None),
        Command::Version => Ok(None),
    }
}

/// Set by the process panic hook once it has printed the error object itself.
static PANIC_REPORTED: AtomicBool = AtomicBool::new(false);

/// The message a panic was raised with.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

fn panic_error(payload: &(dyn std::any::Any + Send)) -> CniError {
    CniError::new(INTERNAL, format!("plugin panicked: {}", panic_text(payload)))
}

/// Runs one command against `env` and returns the process exit code (0 or 1). Nothing here
/// exits the process; only `main` does. Write errors on stdout (a runtime that closed the pipe)
/// are ignored: there is nobody left to tell.
pub fn run(plugin: &dyn Plugin, env: &mut dyn Environment) -> i32 {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(plugin, &mut *env)));
    let outcome = match outcome {
        Ok(o) => o,
        Err(payload) => {
            if PANIC_REPORTED.load(Ordering::SeqCst) {
                return 1;
            }
            Err(panic_error(&*payload))
        }
    };
    match outcome {
        Ok(None) => 0,
        Ok(Some(text)) => {
            let _ = env.stdout().write_all(text.as_bytes());
            let _ = env.stdout().flush();
            0
        }
        Err(e) => {
            let command = env.getenv("CNI_COMMAND").unwrap_or_default();
            if command.is_empty() && e.code == INVALID_ENVIRONMENT_VARIABLES {
                if let Some(about) = plugin.about() {
                    let versions = plugin.supported_versions().join(", ");
                    let _ = write!(env.stderr(), "{about}\nCNI protocol versions supported: {versions}\n");
                    return 0;
                }
            }
            let _ = env.stdout().write_all(e.to_json_pretty().as_bytes());
            let _ = env.stdout().flush();
            1
        }
    }
}

/// The whole `main` of a plugin: `std::process::exit(cni_skel::main(&MyPlugin))`.
///
/// Installs a panic hook that prints a code-999 error object on stdout, so a panic reaches the
/// runtime as a CNI error even in release builds, where panics abort instead of unwinding.
pub fn main(plugin: &dyn Plugin) -> i32 {
    std::panic::set_hook(Box::new(|info| {
        let msg = panic_text(info.payload());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let e = CniError::new(INTERNAL, format!("plugin panicked: {msg}{at}"));
        let mut out = std::io::stdout();
        let _ = out.write_all(e.to_json_pretty().as_bytes());
        let _ = out.flush();
        PANIC_REPORTED.store(true, Ordering::SeqCst);
    }));
    run(plugin, &mut crate::env::ProcessEnv::new())
}
