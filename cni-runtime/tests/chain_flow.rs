//! `generated/libcni/flow/*`: a full runtime flow through `chain`, against a recording exec.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use cni_runtime::chain::{build_one_config, Chain, RuntimeConf};
use cni_runtime::testing::FakeExec;
use cni_types::config::GcAttachment;
use cni_types::{NetConf, NetConfList};
use serde_json::Value;
use std::path::PathBuf;

#[path = "../../cni-skel/tests/common/mod.rs"]
mod common;

fn load(name: &str) -> Value {
    common::vector_json(&format!("generated/libcni/flow/{name}"))
}

fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

struct Flow {
    flow: Value,
    list: NetConfList,
    rt: RuntimeConf,
    cache: PathBuf,
}

impl Flow {
    fn new(tag: &str) -> Flow {
        let flow = load("flow.json");
        let cache_file = load("cache-file.json");
        let bytes = unbase64(cache_file["config"].as_str().unwrap());
        let list = NetConfList::parse(&bytes).unwrap();
        let r = &flow["runtimeConf"];
        let rt = RuntimeConf {
            container_id: r["ContainerID"].as_str().unwrap().into(),
            netns: r["NetNS"].as_str().unwrap().into(),
            ifname: r["IfName"].as_str().unwrap().into(),
            args: r["Args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| format!("{}={}", p[0].as_str().unwrap(), p[1].as_str().unwrap()))
                .collect::<Vec<_>>()
                .join(";"),
            capability_args: r["CapabilityArgs"].as_object().unwrap().clone(),
        };
        let cache = std::env::temp_dir().join(format!("braid-chain-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        Flow { flow, list, rt, cache }
    }

    fn chain<'a>(&self, exec: &'a FakeExec) -> Chain<'a> {
        let paths =
            self.flow["cniPath"].as_array().unwrap().iter().map(|p| PathBuf::from(p.as_str().unwrap())).collect();
        Chain { exec, paths, cache_dir: self.cache.clone() }
    }

    /// Replies for an ADD: each plugin printed what the next one received as prevResult.
    fn add_replies(&self, exec: &FakeExec) {
        let calls = self.flow["ADD.calls"].as_array().unwrap();
        for next in &calls[1..] {
            exec.reply(Ok(serde_json::to_vec(&next["stdin"]["prevResult"]).unwrap()));
        }
        exec.reply(Ok(serde_json::to_vec(&self.flow["ADD.finalResult"]).unwrap()));
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cache);
    }
}

fn assert_calls(exec: &FakeExec, want: &Value, what: &str) {
    let got = exec.calls.lock().unwrap().clone();
    exec.calls.lock().unwrap().clear();
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: number of calls");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.plugin.file_name().unwrap().to_str().unwrap(), w["plugin"].as_str().unwrap(), "{what} #{i}");
        let stdin: Value = serde_json::from_slice(&g.stdin).unwrap();
        assert_eq!(stdin, w["stdin"], "{what} #{i}: stdin");
        // libcni's bytes are compact with keys sorted: ours are byte-identical.
        assert_eq!(
            String::from_utf8(g.stdin.clone()).unwrap(),
            cni_types::gojson::to_go_string(&w["stdin"]),
            "{what} #{i}"
        );
        let env: serde_json::Map<String, Value> =
            g.env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        assert_eq!(Value::Object(env), w["env"], "{what} #{i}: env");
    }
}

#[test]
fn full_flow() {
    let f = Flow::new("full");
    let exec = FakeExec::default();
    let chain = f.chain(&exec);

    f.add_replies(&exec);
    let result = chain.add(&f.list, &f.rt).unwrap();
    assert_eq!(result.to_value(), f.flow["ADD.finalResult"]);
    assert_calls(&exec, &f.flow["ADD.calls"], "ADD");
    let cache_path = chain.cache_path(&f.list.name, &f.rt).unwrap();
    assert!(cache_path.ends_with("results/dbnet-ctr-abc-eth0"));
    let cached: Value = serde_json::from_slice(&std::fs::read(&cache_path).unwrap()).unwrap();
    assert_eq!(cached, load("cache-file.json"));
    assert_eq!(cached, f.flow["cacheFile.contents"]);

    chain.check(&f.list, &f.rt).unwrap();
    assert_calls(&exec, &f.flow["CHECK.calls"], "CHECK");

    chain.status(&f.list).unwrap();
    assert_calls(&exec, &f.flow["STATUS.calls"], "STATUS");

    let gc_key = f.flow.as_object().unwrap().keys().find(|k| k.starts_with("GC.calls")).unwrap().clone();
    let valid = [GcAttachment { container_id: "other".into(), ifname: "eth0".into() }];
    chain.gc(&f.list, Some(&valid)).unwrap();
    assert_calls(&exec, &f.flow[&gc_key], "GC");
    assert!(!cache_path.exists(), "GC must remove the stale attachment's cache");

    f.add_replies(&exec);
    chain.add(&f.list, &f.rt).unwrap();
    exec.calls.lock().unwrap().clear();
    chain.del(&f.list, &f.rt).unwrap();
    assert_calls(&exec, &f.flow["DEL.calls"], "DEL");
    assert_eq!(f.flow["DEL.cacheFileRemoved"], Value::Bool(!cache_path.exists()));

    chain.del(&f.list, &f.rt).unwrap();
    assert_calls(&exec, &f.flow["DEL-again-no-cache.calls"], "DEL again");
}

#[test]
fn a_network_name_that_would_leave_the_cache_directory_touches_no_file() {
    let f = Flow::new("traverse");
    let exec = FakeExec::default();
    // <cache>/a/results/../../victim-<id>-<ifname> is <cache>/victim-<id>-<ifname>.
    let chain = Chain { cache_dir: f.cache.join("a"), ..f.chain(&exec) };
    let mut list = f.list.clone();
    list.name = "../../victim".into();
    let victim = f.cache.join(format!("victim-{}-{}", f.rt.container_id, f.rt.ifname));
    std::fs::create_dir_all(f.cache.join("a/results")).unwrap();
    let planted = br#"{"kind":"cniCacheV1","result":{"cniVersion":"1.0.0","dns":{"domain":"victim.example"}}}"#;
    std::fs::write(&victim, planted).unwrap();
    let e = chain.cache_path(&list.name, &f.rt).unwrap_err();
    assert!(e.to_string().starts_with("cache file path: invalid characters found in network name"), "{e}");
    // CHECK needs the cache: refused, naming why.
    let e = chain.check(&list, &f.rt).unwrap_err();
    assert!(e.to_string().contains("cached result: cache file path: invalid characters found in network name"), "{e}");
    // DEL still reaches every plugin, never with the planted file as prevResult, and removes nothing.
    chain.del(&list, &f.rt).unwrap();
    let calls = exec.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), list.plugins.len());
    for c in &calls {
        let stdin = String::from_utf8(c.stdin.clone()).unwrap();
        assert!(!stdin.contains("victim.example"), "{stdin}");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), planted);
    // ADD refuses it before running anything.
    assert!(chain.add(&list, &f.rt).is_err());
    assert_eq!(exec.calls.lock().unwrap().len(), list.plugins.len());
}

#[test]
fn add_error_is_wrapped_and_keeps_its_code() {
    let f = Flow::new("adderr");
    let exec = FakeExec::default();
    let calls = f.flow["ADD.calls"].as_array().unwrap();
    exec.reply(Ok(serde_json::to_vec(&calls[1]["stdin"]["prevResult"]).unwrap()));
    let typed = &f.flow["ADD-with-tuning-error.typedError"];
    exec.reply(Err(cni_runtime::invoke::InvokeError::Plugin(serde_json::from_value(typed.clone()).unwrap())));
    let e = f.chain(&exec).add(&f.list, &f.rt).unwrap_err();
    assert_eq!(e.to_string(), f.flow["ADD-with-tuning-error.error"].as_str().unwrap());
    assert_eq!(e.cause().unwrap().code, typed["code"].as_u64().unwrap() as u32);
    assert_eq!(exec.calls.lock().unwrap().len(), 2, "the chain stops at the failing plugin");
}

#[test]
fn check_refusals() {
    let f = Flow::new("check");
    let exec = FakeExec::default();
    let mut old = f.list.clone();
    old.cni_version = "0.3.1".into();
    assert_eq!(
        f.chain(&exec).check(&old, &f.rt).unwrap_err().to_string(),
        f.flow["CHECK-0.3.1.error"].as_str().unwrap()
    );
    let mut disabled = f.list.clone();
    disabled.disable_check = true;
    f.chain(&exec).check(&disabled, &f.rt).unwrap();
    assert_eq!(f.flow["CHECK-disableCheck.error"], "<nil>");
    assert_eq!(exec.calls.lock().unwrap().len() as u64, f.flow["CHECK-disableCheck.calls"].as_u64().unwrap());
}

#[test]
fn build_one_config_bytes() {
    let key = f_key();
    let want = load("flow.json")[&key].as_str().unwrap().to_string();
    let plugin = NetConf::parse(br#"{"type":"zeta","z":1,"a":2,"capabilities":{"mac":true}}"#).unwrap();
    let caps = serde_json::json!({"mac":"aa:bb:cc:dd:ee:ff","ips":["198.18.0.1"]});
    let got = build_one_config(&plugin, "net", "1.1.0", None, caps.as_object().unwrap());
    assert_eq!(String::from_utf8(got).unwrap(), want);
}

fn f_key() -> String {
    load("flow.json").as_object().unwrap().keys().find(|k| k.starts_with("buildOneConfig")).unwrap().clone()
}

#[test]
fn cache_config_field_is_the_raw_list() {
    let flow = load("flow.json");
    let encoded = load("cache-file.json")["config"].as_str().unwrap().to_string();
    let bytes = unbase64(&encoded);
    // The note records the length of the base64 text.
    let note = flow["cacheFile.config.base64decoded"].as_str().unwrap();
    assert!(note.ends_with(&format!("len={}", encoded.len())), "{note}");
    assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), flow["conflist"]);
    assert!(flow["cacheFile.path"].as_str().unwrap().starts_with("<cacheDir>/results/dbnet-ctr-abc-eth0"));
}

#[test]
fn upstream_libcni_tests() {
    let v = common::vector_json("upstream/libcni-tests.json");
    for c in v["versionSelection"].as_array().unwrap() {
        let got = NetConfList::parse(&serde_json::to_vec(&c["conf"]).unwrap());
        match c.get("selected") {
            Some(sel) => assert_eq!(got.unwrap().cni_version, sel.as_str().unwrap()),
            None => assert!(got.is_err()),
        }
    }
    let mut prev = Vec::new();
    for c in v["InjectConf"].as_array().unwrap() {
        let orig = match c.get("orig").and_then(Value::as_str) {
            Some("(previous)") => prev.clone(),
            Some(o) => o.as_bytes().to_vec(),
            None => br#"{"name":"x","type":"y"}"#.to_vec(),
        };
        let mut got = cni_runtime::chain::inject_conf(&orig, c["inject"].as_object().unwrap());
        if let (Ok(bytes), Some(then)) = (&got, c.get("then_inject")) {
            got = cni_runtime::chain::inject_conf(bytes, then.as_object().unwrap());
        }
        match c.get("error") {
            Some(e) => assert_eq!(got.unwrap_err().to_string(), e.as_str().unwrap()),
            None => {
                let bytes = got.unwrap();
                assert_eq!(String::from_utf8(bytes.clone()).unwrap(), c["bytes"].as_str().unwrap());
                prev = bytes;
            }
        }
    }
    let caps = &v["capabilities"];
    let plugin = NetConf::from_value(caps["pluginConfig"].clone()).unwrap();
    let built = build_one_config(&plugin, "apitest", "1.1.0", None, caps["capabilityArgs"].as_object().unwrap());
    let built: Value = serde_json::from_slice(&built).unwrap();
    let keys: Vec<&String> = built["runtimeConfig"].as_object().unwrap().keys().collect();
    let want: Vec<&str> = caps["runtimeConfigKeys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(keys, want);
    let none = build_one_config(&plugin, "apitest", "1.1.0", None, &serde_json::Map::new());
    assert!(
        serde_json::from_slice::<Value>(&none).unwrap().get("runtimeConfig").is_none(),
        "{}",
        caps["noIntersection"]
    );

    let exec = FakeExec::default();
    let list = NetConfList::from_single(plugin.clone());
    exec.reply(Ok(br#"{"cniVersion":"1.1.0","supportedVersions":["1.1.0"]}"#.to_vec()));
    let chain = Chain { exec: &exec, paths: vec!["/x".into()], cache_dir: "/nonexistent".into() };
    let enabled = chain.validate(&list).unwrap();
    let want: Vec<&str> = caps["ValidateNetworkCaps"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(enabled, want);
    let mut broken = NetConfList::from_single(plugin.clone());
    broken.cni_version = "broken".into();
    broken.plugins = vec![plugin.clone(), plugin.clone(), plugin];
    for _ in 0..3 {
        exec.reply(Ok(br#"{"cniVersion":"1.1.0","supportedVersions":["1.1.0"]}"#.to_vec()));
    }
    assert_eq!(
        chain.validate(&broken).unwrap_err().to_string(),
        v["ValidateNetworkList_bad_version"].as_str().unwrap()
    );

    let rt = RuntimeConf { container_id: "some-container-id".into(), ifname: "eth0".into(), ..Default::default() };
    assert_eq!(Chain::cache_key_error("", &rt).unwrap().to_string(), v["cacheErrors"]["missingName"].as_str().unwrap());
    assert_eq!(v["cacheKind"], "cniCacheV1");
    assert!(v["CHECK_before_0.4.0_error"].as_str().unwrap().contains("does not support the CHECK command"));
    assert!(v["cacheFileName"].as_str().unwrap().starts_with("<cacheDir>/results/"));
}
