//! The dispatcher against outside input: random and mutated configurations (with `prevResult`,
//! `runtimeConfig`, GC's attachments), `CNI_ARGS`, interface names, container IDs and commands.
//! Whatever comes, the plugin answers — a result, or an error object whose code is one of the
//! spec's — and never panics or hangs. Cases are few and small: bounded time in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_skel::{run, CmdArgs, Plugin, TestEnv};
use cni_types::error::{
    DECODING_FAILURE, INCOMPATIBLE_CNI_VERSION, INVALID_ENVIRONMENT_VARIABLES, INVALID_NETWORK_CONFIG,
    UNKNOWN_CONTAINER,
};
use cni_types::{CniError, CniResult};
use proptest::prelude::*;

#[path = "common/inputs.rs"]
mod inputs;

/// A plugin that reads everything a plugin reads from its input.
struct Probe;

impl Probe {
    fn read(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        let conf = args.conf()?;
        let prev = conf.prev_result().map_err(CniError::from)?;
        conf.runtime_config().map_err(CniError::from)?;
        cni_types::args::split_pairs(&args.args).map_err(CniError::from)?;
        let mut r = prev.map(|p| p.to_latest()).unwrap_or_default();
        r.cni_version = conf.version().to_string();
        Ok(r)
    }
}

impl Plugin for Probe {
    fn add(&self, args: &CmdArgs) -> Result<CniResult, CniError> {
        self.read(args)
    }
    fn del(&self, args: &CmdArgs) -> Result<(), CniError> {
        self.read(args).map(|_| ())
    }
    fn check(&self, args: &CmdArgs) -> Result<(), CniError> {
        self.read(args).map(|_| ())
    }
    fn gc(&self, args: &CmdArgs) -> Result<(), CniError> {
        args.conf()?.valid_attachments().map_err(CniError::from).map(|_| ())
    }
}

/// The codes input alone can cause (spec §"Error": 1 incompatible version, 3 unknown container,
/// 4 bad environment, 6 decoding failure, 7 invalid configuration; 999 where Go's library
/// returns a plain error, e.g. a result not expressible in the configuration's version).
const INPUT_CODES: &[u32] = &[
    INCOMPATIBLE_CNI_VERSION,
    UNKNOWN_CONTAINER,
    INVALID_ENVIRONMENT_VARIABLES,
    DECODING_FAILURE,
    INVALID_NETWORK_CONFIG,
    999,
];

fn call(command: &str, container: &str, ifname: &str, args: &str, stdin: &[u8]) -> (i32, TestEnv) {
    let vars = [
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", container),
        ("CNI_NETNS", "/run/netns/braid-properties-absent"),
        ("CNI_IFNAME", ifname),
        ("CNI_ARGS", args),
        ("CNI_PATH", "/opt/cni/bin"),
    ];
    let mut env = TestEnv::new(vars, stdin);
    let code = run(&Probe, &mut env);
    (code, env)
}

fn check_answer(code: i32, env: &TestEnv) -> Result<(), TestCaseError> {
    let out = env.stdout_text();
    prop_assert!(code == 0 || code == 1, "exit {code}");
    if code == 1 {
        let e = CniError::decode(&env.stdout).map_err(|e| TestCaseError::fail(format!("{e}: {out}")))?;
        prop_assert!(INPUT_CODES.contains(&e.code), "code {} for input: {out}", e.code);
        prop_assert!(!e.msg.contains("panicked"), "{out}");
    } else if !out.is_empty() {
        prop_assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok(), "{out}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_command_answers_mutated_configurations_with_a_result_or_a_coded_error(
        command in prop::sample::select(vec!["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "", "add", "BOGUS"]),
        stdin in inputs::mutated(inputs::plugin_conf()),
        args in inputs::cni_args(),
    ) {
        let (code, env) = call(command, "ctr-1", "eth0", &args, &stdin);
        check_answer(code, &env)?;
    }

    #[test]
    fn hostile_environments_are_refused_with_code_4_or_3(
        container in prop_oneof![Just(String::new()), "[ -~é]{0,12}"],
        ifname in prop_oneof![Just(String::new()), "[ -~é\u{a0}]{0,20}"],
        args in inputs::cni_args(),
    ) {
        let stdin = br#"{"cniVersion":"1.0.0","name":"net","type":"probe"}"#;
        let (code, env) = call("ADD", &container, &ifname, &args, stdin);
        check_answer(code, &env)?;
        if code == 1 {
            let e = CniError::decode(&env.stdout).unwrap();
            prop_assert!([UNKNOWN_CONTAINER, INVALID_ENVIRONMENT_VARIABLES].contains(&e.code), "{e:?}");
        }
    }

    #[test]
    fn mutated_conflists_never_panic_the_parsers(bytes in inputs::mutated(inputs::conflist())) {
        if let Err(e) = cni_types::NetConfList::parse(&bytes) {
            prop_assert_eq!(CniError::from(e).code, INVALID_NETWORK_CONFIG);
        }
        let _ = cni_types::gojson::parse(&bytes);
    }
}
