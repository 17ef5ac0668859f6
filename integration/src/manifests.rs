//! braid's Kubernetes manifests (`deploy/kubernetes/`) as a cluster would receive them: each
//! layout rendered by `kubectl kustomize` and parsed into JSON values, and the YAML files read
//! as they are. Compiled into the manifest tests only (`#[path]`): it uses their
//! dev-dependencies (a YAML parser).

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `deploy/kubernetes` of this checkout.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// Every document of a YAML stream (`---`-separated), empty documents dropped.
pub fn parse_yaml_stream(text: &str, what: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{what}: not YAML that JSON can hold: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// A YAML file below `deploy/kubernetes`, every document of it.
pub fn read_yaml(file: &str) -> Vec<Value> {
    let p = deploy_dir().join(file);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    parse_yaml_stream(&text, &p.display().to_string())
}

/// Whether this machine's `kubectl` can build the layouts (kustomize v5: kubectl 1.27 or later);
/// a loud SKIPPED line if not, a failure under `BRAID_REQUIRE_ROOT_TESTS=1` (as CI runs the
/// suite), like the runtime tests' missing commands. No Debian package provides one: Debian
/// 12's `kubernetes-client` is kubectl 1.20, whose kustomize (v2.0.3) builds neither layout.
#[allow(dead_code)] // used by tests/manifests.rs only
pub fn have_kubectl(test: &str) -> bool {
    let why = match Command::new("kubectl").args(["version", "--client", "-o", "json"]).output() {
        Err(e) => format!("needs kubectl (1.27 or later) on PATH: {e}"),
        Ok(out) => match client_minor(&out.stdout) {
            Some(m) if m >= 27 => return true,
            Some(m) => format!("needs kubectl 1.27 or later (kustomize v5), this one is 1.{m}"),
            None => format!("kubectl version --client printed no version: {}", String::from_utf8_lossy(&out.stderr)),
        },
    };
    if std::env::var("BRAID_REQUIRE_ROOT_TESTS").is_ok_and(|v| v == "1") {
        panic!("{test} {why}, and BRAID_REQUIRE_ROOT_TESTS=1 forbids skipping");
    }
    // Past libtest's capture (as braid_integration::skip_for_kernel): scripts/test.sh counts
    // the line as skipped, never as passed.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {test}: {why} ***\n");
    false
}

/// The minor version of `kubectl version --client -o json` ("32", "32+", …).
#[allow(dead_code)] // used by tests/manifests.rs only
fn client_minor(json: &[u8]) -> Option<u32> {
    let v: Value = serde_json::from_slice(json).ok()?;
    let minor = v["clientVersion"]["minor"].as_str()?;
    minor.trim_end_matches('+').parse().ok()
}

/// `kubectl kustomize deploy/kubernetes/<layout>` ("" for the API layout, "no-api"), parsed.
#[allow(dead_code)] // used by tests/manifests.rs only
pub fn kustomize(layout: &str) -> Vec<Value> {
    let dir = deploy_dir().join(layout);
    let out = braid_integration::runtime::run_ok(Command::new("kubectl").arg("kustomize").arg(&dir));
    parse_yaml_stream(&out, &format!("kubectl kustomize {}", dir.display()))
}

/// [`kustomize`] of `layout` for `test`, or `None` after [`have_kubectl`]'s SKIPPED line.
#[allow(dead_code)] // used by tests/manifests.rs only
pub fn rendered(test: &str, layout: &str) -> Option<Vec<Value>> {
    have_kubectl(test).then(|| kustomize(layout))
}

/// The one object of `kind` named `name`; panics naming what is there instead.
#[allow(dead_code)] // used by tests/manifests.rs only
pub fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind && o["metadata"]["name"] == name).collect();
    assert_eq!(found.len(), 1, "want one {kind} {name}, have: {:?}", kinds_and_names(objects));
    found[0]
}

/// `Kind/name` of every object, sorted.
#[allow(dead_code)] // used by tests/manifests.rs only
pub fn kinds_and_names(objects: &[Value]) -> Vec<String> {
    let mut all: Vec<String> = objects
        .iter()
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap_or("?"), o["metadata"]["name"].as_str().unwrap_or("?")))
        .collect();
    all.sort();
    all
}
