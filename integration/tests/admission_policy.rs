//! The ValidatingAdmissionPolicy `braid-node-agent` (deploy/kubernetes/admission-policy.yaml)
//! evaluated on sample pod updates, as the API server evaluates it: match conditions, then the
//! variables in order, then every validation, its messageExpression for the message of a denial.
//! The expressions run on cel-rust (the `cel` crate) with the strings extension, the library
//! Kubernetes also enables; they use nothing else, so what passes here is what the API server
//! computes (no API server runs here: this checks the policy's logic, not its installation).
//!
//! Shown: braid's ServiceAccount, with a token issued on node-a, may set, change or remove the
//! network-status annotation of a pod bound to node-a, and nothing else — not a label, not
//! another annotation (added, changed or removed), not a finalizer or owner reference, not the
//! spec, not a pod on another node or on none, not with a token that names no node. Other users
//! are not matched at all.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../src/manifests.rs"]
mod manifests;

use cel::{extensions, Context, Env, Program};
use serde_json::{json, Value};
use std::sync::Arc;

const AGENT: &str = "system:serviceaccount:kube-system:braid";
const STATUS: &str = "k8s.v1.cni.cncf.io/network-status";
const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";

/// What the API server decides for one request.
#[derive(Debug, PartialEq)]
enum Decision {
    /// A match condition is false: the policy does not apply.
    NotMatched,
    Admitted,
    /// The first failing validation's message.
    Denied(String),
}

/// The policy's expressions, compiled once.
struct Policy {
    env: Arc<Env>,
    match_conditions: Vec<(String, Program)>,
    variables: Vec<(String, Program)>,
    /// (expression, message, messageExpression)
    validations: Vec<(Program, String, Option<Program>)>,
}

impl Policy {
    fn load() -> Policy {
        let docs = manifests::read_yaml("admission-policy.yaml");
        let policy = docs.iter().find(|d| d["kind"] == "ValidatingAdmissionPolicy").unwrap();
        let mut env = Env::stdlib();
        env.add_extension(extensions::strings).unwrap();
        let env = Arc::new(env);
        let compile = |what: &str, src: &Value| -> Program {
            let src = src.as_str().unwrap_or_else(|| panic!("{what}: no expression"));
            env.compile(src).unwrap_or_else(|e| panic!("{what}: {src}\n{e:?}"))
        };
        let spec = &policy["spec"];
        let named = |list: &Value, what: &str| -> Vec<(String, Program)> {
            list.as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    let name = x["name"].as_str().unwrap().to_string();
                    let p = compile(&format!("{what} {name}"), &x["expression"]);
                    (name, p)
                })
                .collect()
        };
        let match_conditions = named(&spec["matchConditions"], "matchCondition");
        let variables = named(&spec["variables"], "variable");
        let validations = spec["validations"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let expr = compile(&format!("validation {i}"), &v["expression"]);
                let msg = v["message"].as_str().unwrap_or_default().to_string();
                let msg_expr = v.get("messageExpression").map(|m| compile(&format!("messageExpression {i}"), m));
                (expr, msg, msg_expr)
            })
            .collect();
        Policy { env: env.clone(), match_conditions, variables, validations }
    }

    /// An UPDATE of `old` into `new` by braid's agent, its token issued on `node`.
    fn agent(&self, node: &str, old: &Value, new: &Value) -> Decision {
        self.decide(AGENT, node_extra(node), old, new)
    }

    /// An UPDATE of `old` into `new` by `user` (whose userInfo.extra is `extra`, absent if None).
    fn decide(&self, user: &str, extra: Option<Value>, old: &Value, new: &Value) -> Decision {
        let mut user_info = json!({"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]});
        if let Some(extra) = extra {
            user_info["extra"] = extra;
        }
        let request = json!({"operation": "UPDATE", "userInfo": user_info,
                             "resource": {"group": "", "version": "v1", "resource": "pods"}});
        let mut ctx = Context::with_env(self.env.clone());
        ctx.add_variable("request", &request).unwrap();
        ctx.add_variable("object", new).unwrap();
        ctx.add_variable("oldObject", old).unwrap();
        for (name, p) in &self.match_conditions {
            if !boolean(p.execute(&ctx), name) {
                return Decision::NotMatched;
            }
        }
        // Variables in order, each seeing the ones before it.
        let mut variables = serde_json::Map::new();
        ctx.add_variable("variables", Value::Object(variables.clone())).unwrap();
        for (name, p) in &self.variables {
            let v = p.execute(&ctx).unwrap_or_else(|e| panic!("variable {name}: {e:?}"));
            variables.insert(name.clone(), v.json().unwrap_or_else(|e| panic!("variable {name}: {e:?}")));
            ctx.add_variable("variables", Value::Object(variables.clone())).unwrap();
        }
        for (i, (expr, msg, msg_expr)) in self.validations.iter().enumerate() {
            if boolean(expr.execute(&ctx), &format!("validation {i}")) {
                continue;
            }
            let message = match msg_expr {
                None => msg.clone(),
                Some(p) => match p.execute(&ctx) {
                    Ok(cel::Value::String(s)) => s.to_string(),
                    other => panic!("messageExpression {i} gave {other:?}"),
                },
            };
            assert!(!message.contains('\n'), "{message}");
            return Decision::Denied(message);
        }
        Decision::Admitted
    }
}

/// An expression's boolean; an evaluation error fails the test (the API server would deny with
/// no message of braid's: the expressions must hold on every shape of request).
fn boolean(r: cel::ResolveResult, what: &str) -> bool {
    match r {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("{what} gave {other:?}, not a boolean"),
    }
}

fn node_extra(node: &str) -> Option<Value> {
    Some(json!({
        NODE_NAME_KEY: [node],
        "authentication.kubernetes.io/node-uid": ["5f0c0d6e-3b1a-4c1e-9b0e-6c7a1d2e3f40"],
        "authentication.kubernetes.io/pod-name": ["braid-install-x7k2p"],
        "authentication.kubernetes.io/pod-uid": ["0d5b2c8e-7a41-4f0b-8d8e-2f1e5c9a7b63"],
        "authentication.kubernetes.io/credential-id": ["JTI=7e6c0f5a-1b2d-4c3e-8f9a-0b1c2d3e4f5a"]
    }))
}

/// A pod as the API server stores it, on `node` (none if empty).
fn pod(node: &str) -> Value {
    let mut p = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "db-0",
            "namespace": "team-a",
            "uid": "3c9d4a1e-8f2b-4d6a-9e0c-1b2a3c4d5e6f",
            "resourceVersion": "48213",
            "creationTimestamp": "2026-11-30T09:12:44Z",
            "generateName": "db-",
            "labels": {"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"},
            "annotations": {"k8s.v1.cni.cncf.io/networks": "default/storage"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                 "uid": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", "controller": true,
                                 "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-30T09:12:44Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
        },
        "spec": {
            "containers": [{"name": "db", "image": "postgres:17", "resources": {"requests": {"cpu": "100m"}}}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}]
        },
        "status": {"phase": "Running", "podIP": "198.18.150.7"}
    });
    if !node.is_empty() {
        p["spec"]["nodeName"] = json!(node);
    }
    p
}

/// What the agent's JSON merge patch makes of `old` (managedFields gain its entry, as the API
/// server records before admission).
fn with_status(old: &Value, status: Option<&str>) -> Value {
    let mut new = old.clone();
    let meta = new["metadata"].as_object_mut().unwrap();
    let annotations = meta.entry("annotations").or_insert(json!({})).as_object_mut().unwrap();
    match status {
        Some(s) => {
            annotations.insert(STATUS.into(), json!(s));
        }
        None => {
            annotations.remove(STATUS);
        }
    }
    meta["managedFields"].as_array_mut().unwrap().push(json!({
        "manager": "braid-install", "operation": "Update", "apiVersion": "v1", "time": "2026-11-30T09:12:46Z",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:k8s.v1.cni.cncf.io/network-status": {}}}}
    }));
    new
}

const DOC: &str = r#"[{"name":"cbr0","interface":"eth0","ips":["198.18.150.7"],"default":true},{"name":"default/storage","interface":"net1","ips":["198.19.10.11"]}]"#;

/// The policy, a pod on node-a, and that pod with its network status set (the agent's patch).
fn fixture() -> (Policy, Value, Value) {
    let old = pod("node-a");
    let new = with_status(&old, Some(DOC));
    (Policy::load(), old, new)
}

fn denied(d: Decision) -> String {
    match d {
        Decision::Denied(m) => m,
        other => panic!("admitted: {other:?}"),
    }
}

#[test]
fn the_agent_may_set_change_and_remove_the_status_of_its_nodes_pods() {
    let p = Policy::load();
    let old = pod("node-a");
    let set = with_status(&old, Some(DOC));
    assert_eq!(p.agent("node-a", &old, &set), Decision::Admitted);
    let changed = with_status(&set, Some("[]"));
    assert_eq!(p.agent("node-a", &set, &changed), Decision::Admitted);
    let removed = with_status(&set, None);
    assert_eq!(p.agent("node-a", &set, &removed), Decision::Admitted);
    // A pod without any annotation gains its first.
    let mut bare = pod("node-a");
    bare["metadata"].as_object_mut().unwrap().remove("annotations");
    assert_eq!(p.agent("node-a", &bare, &with_status(&bare, Some(DOC))), Decision::Admitted);
    // A patch that changes nothing (the same document again).
    assert_eq!(p.agent("node-a", &set, &set), Decision::Admitted);
}

#[test]
fn another_nodes_pod_or_an_unbound_one_is_refused() {
    let p = Policy::load();
    let other = pod("node-b");
    let m = denied(p.agent("node-a", &other, &with_status(&other, Some(DOC))));
    assert_eq!(
        m,
        "braid's node agent on node node-a may change only pods bound to that node; pod team-a/db-0 is on node node-b"
    );
    let pending = pod("");
    let m = denied(p.agent("node-a", &pending, &with_status(&pending, Some(DOC))));
    assert!(m.ends_with("pod team-a/db-0 is not bound to a node"), "{m}");
}

#[test]
fn a_token_that_names_no_node_is_refused() {
    let (p, old, new) = fixture();
    // No extra at all (a token from `kubectl create token braid`, or Kubernetes before the node
    // name was added), extra without the node, an empty node list.
    for extra in
        [None, Some(json!({"authentication.kubernetes.io/credential-id": ["JTI=1"]})), Some(json!({NODE_NAME_KEY: []}))]
    {
        let m = denied(p.decide(AGENT, extra.clone(), &old, &new));
        assert!(
            m.contains("names the node") && m.ends_with("this request's credentials name no node"),
            "{extra:?}: {m}"
        );
    }
    // Even for an unbound pod (both node names empty).
    let pending = pod("");
    let m = denied(p.decide(AGENT, None, &pending, &with_status(&pending, Some(DOC))));
    assert!(m.ends_with("this request's credentials name no node"), "{m}");
}

/// A change the agent's patch might make beside the status, and what the denial names.
type Case = (&'static str, fn(&mut Value));

/// Each change, applied beside the status annotation, is refused naming what it changed.
fn refused_each(cases: &[Case]) {
    let (p, old, base) = fixture();
    for (want, change) in cases {
        let mut new = base.clone();
        change(&mut new);
        let m = denied(p.agent("node-a", &old, &new));
        let prefix = "braid's node agent may change only the annotation k8s.v1.cni.cncf.io/network-status of pod team-a/db-0, not ";
        // What changed, in any order: CEL iterates a map (the metadata) in no fixed order, in
        // cel-go as here.
        let named = |list: &str| list.split(", ").map(str::to_string).collect::<std::collections::BTreeSet<_>>();
        assert_eq!(m.strip_prefix(prefix).map(named), Some(named(want)), "{m}");
    }
}

#[test]
fn labels_and_other_metadata_stay_as_they_were() {
    refused_each(&[
        ("metadata.labels", |p| p["metadata"]["labels"]["braid.io/attached"] = json!("true")),
        ("metadata.labels", |p| p["metadata"]["labels"]["app"] = json!("web")),
        ("metadata.labels", |p| _ = p["metadata"]["labels"].as_object_mut().unwrap().remove("app")),
        ("metadata.labels", |p| _ = p["metadata"].as_object_mut().unwrap().remove("labels")),
        ("metadata.finalizers", |p| p["metadata"]["finalizers"] = json!(["braid.io/keep"])),
        ("metadata.ownerReferences", |p| p["metadata"]["ownerReferences"][0]["controller"] = json!(false)),
        ("metadata.ownerReferences", |p| _ = p["metadata"].as_object_mut().unwrap().remove("ownerReferences")),
        ("metadata.generateName", |p| p["metadata"]["generateName"] = json!("web-")),
        // Two at once: both named.
        ("metadata.labels, metadata.finalizers", |p| {
            p["metadata"]["labels"]["app"] = json!("web");
            p["metadata"]["finalizers"] = json!(["braid.io/keep"]);
        }),
    ]);
}

#[test]
fn no_other_annotation_may_change() {
    refused_each(&[
        ("k8s.v1.cni.cncf.io/networks-status", |p| {
            p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks-status"] = json!(DOC)
        }),
        // The pod's network selection is the pod author's: the agent never rewrites it.
        ("k8s.v1.cni.cncf.io/networks", |p| {
            p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = json!("default/storage, kube-system/admin")
        }),
        ("k8s.v1.cni.cncf.io/networks", |p| {
            _ = p["metadata"]["annotations"].as_object_mut().unwrap().remove("k8s.v1.cni.cncf.io/networks")
        }),
    ]);
}

#[test]
fn the_spec_stays_as_it_was() {
    refused_each(&[
        ("its spec", |p| p["spec"]["containers"][0]["image"] = json!("postgres:17-evil")),
        ("its spec", |p| p["spec"]["tolerations"].as_array_mut().unwrap().push(json!({"operator": "Exists"}))),
    ]);
}

#[test]
fn other_users_are_not_matched() {
    let p = Policy::load();
    let old = pod("node-b");
    let mut new = with_status(&old, Some(DOC));
    new["metadata"]["labels"]["app"] = json!("web");
    for user in [
        "kubernetes-admin",
        "system:serviceaccount:kube-system:multus",
        "system:serviceaccount:team-a:braid",
        "system:node:node-a",
    ] {
        assert_eq!(p.decide(user, node_extra("node-a"), &old, &new), Decision::NotMatched, "{user}");
    }
}
