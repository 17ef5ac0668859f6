//! The stand-in's answers to requests kube-rs would not send or would hide: validation
//! errors, refused verbs and media types, status codes and `Status` bodies, selectors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use kube_standin::StandIn;
use serde_json::{json, Value};

const NADS: &str = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions";

fn get(api: &StandIn, path: &str) -> (u16, Value) {
    common::raw(api, "GET", path, Some(api.token()), &[], "")
}

fn send(api: &StandIn, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    common::raw(api, method, path, Some(api.token()), &[("Content-Type", content_type)], body)
}

/// (code, reason) of a Status, checking it is one.
fn status(answer: (u16, Value)) -> (u16, String) {
    let (code, body) = answer;
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    (code, body["reason"].as_str().unwrap().to_string())
}

#[test]
fn unserved_paths_and_verbs() {
    let api = StandIn::start().unwrap();
    api.create_nad("red", "a", None, &[]);
    assert_eq!(status(get(&api, "/api/v1/configmaps")), (404, "NotFound".into()));
    assert_eq!(status(get(&api, "/api/v1/namespaces/red/pods/p/status")), (404, "NotFound".into()));
    let nad = "/apis/k8s.cni.cncf.io/v1/namespaces/red/network-attachment-definitions/a";
    assert_eq!(
        status(send(&api, "PATCH", nad, "application/merge-patch+json", "{}")),
        (405, "MethodNotAllowed".into())
    );
    assert_eq!(status(send(&api, "DELETE", nad, "application/json", "")), (405, "MethodNotAllowed".into()));
    let (code, body) = get(&api, "/apis/k8s.cni.cncf.io/v1/namespaces/red/network-attachment-definitions/zz");
    assert_eq!(code, 404);
    assert_eq!(body["message"], "network-attachment-definitions.k8s.cni.cncf.io \"zz\" not found");
    assert_eq!(
        body["details"],
        json!({"name": "zz", "group": "k8s.cni.cncf.io", "kind": "network-attachment-definitions"})
    );
    let (code, one) = get(&api, nad);
    assert_eq!(code, 200);
    assert_eq!(
        (one["kind"].as_str(), one["metadata"]["generation"].as_u64()),
        (Some("NetworkAttachmentDefinition"), Some(1))
    );
}

#[test]
fn list_options_are_validated_as_the_apiserver_does() {
    let api = StandIn::start().unwrap();
    api.create_nad("red", "a", None, &[]);
    let rv = api.resource_version();
    let invalid = [
        format!("{NADS}?resourceVersionMatch=NotOlderThan"),
        format!("{NADS}?resourceVersion=0&resourceVersionMatch=Exact"),
        format!("{NADS}?resourceVersion={rv}&resourceVersionMatch=Sometimes"),
        format!("{NADS}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
        format!("{NADS}?watch=true&resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
        format!("{NADS}?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact"),
        format!("{NADS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"),
    ];
    for path in invalid {
        let (code, body) = get(&api, &path);
        assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")), "{path}: {body}");
        assert!(body["message"].as_str().unwrap().starts_with("ListOptions.meta.k8s.io \"\" is invalid: "), "{body}");
    }
    // Every violation, in the apiserver's order and words.
    let (_, body) = get(&api, &format!("{NADS}?resourceVersionMatch=Sometimes&continue=x"));
    let want = concat!(
        r#"ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, "#,
        r#"resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided, "#,
        r#"resourceVersionMatch: Unsupported value: "Sometimes": supported values: "Exact", "NotOlderThan", ""]"#
    );
    assert_eq!(body["message"], want);
    let bad = [
        format!("{NADS}?resourceVersion=abc"),
        format!("{NADS}?limit=x"),
        format!("{NADS}?watch=yes"),
        format!("{NADS}?continue=garbage"),
        format!("{NADS}?labelSelector=a%20in%20b"),
        format!("{NADS}?fieldSelector=spec.config%3Dx"),
    ];
    for path in bad {
        assert_eq!(status(get(&api, &path)), (400, "BadRequest".into()), "{path}");
    }
    let (code, body) = get(&api, &format!("{NADS}?resourceVersion={}&resourceVersionMatch=NotOlderThan", rv + 10));
    assert_eq!((code, body["reason"].as_str()), (504, Some("Timeout")));
    assert_eq!(body["message"], format!("Timeout: Too large resource version: {}, current: {rv}", rv + 10));
}

#[test]
fn list_resource_version_semantics() {
    let api = StandIn::start().unwrap();
    api.create_nad("red", "a", None, &[]);
    let first = api.resource_version();
    api.create_nad("red", "b", None, &[]);
    let names = |list: &Value| -> Vec<String> {
        list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    // Exact: the snapshot then; NotOlderThan: the newest.
    let (_, exact) = get(&api, &format!("{NADS}?resourceVersion={first}&resourceVersionMatch=Exact"));
    assert_eq!(
        (names(&exact), exact["metadata"]["resourceVersion"].clone()),
        (vec!["a".into()], json!(first.to_string()))
    );
    let (_, newest) = get(&api, &format!("{NADS}?resourceVersion={first}&resourceVersionMatch=NotOlderThan"));
    assert_eq!(names(&newest), ["a", "b"]);
    // A limit with a resourceVersion and no match: that snapshot, paged.
    let (_, paged) = get(&api, &format!("{NADS}?resourceVersion={first}&limit=5"));
    assert_eq!(names(&paged), ["a"]);
    // "0" pages nothing.
    let (_, any) = get(&api, &format!("{NADS}?resourceVersion=0&limit=1"));
    assert_eq!(names(&any), ["a", "b"]);
    assert!(any["metadata"].get("continue").is_none());
    // Gone after compaction (one write later).
    api.create_nad("red", "c", None, &[]);
    api.compact();
    let (code, body) = get(&api, &format!("{NADS}?resourceVersion={first}&resourceVersionMatch=Exact"));
    assert_eq!((code, body["message"].as_str()), (410, Some("The resourceVersion for the provided list is too old.")));
    let (code, _) = get(&api, &format!("{NADS}?resourceVersion={first}&resourceVersionMatch=NotOlderThan"));
    assert_eq!(code, 200);
}

#[test]
fn selectors_are_honoured_on_lists() {
    let api = StandIn::start().unwrap();
    for (name, tier) in [("a", "front"), ("b", "back"), ("c", "front")] {
        api.put_object(json!({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"namespace": "red", "name": name, "labels": {"tier": tier}},
            "spec": {"config": "{}"},
        }));
    }
    let names = |path: &str| -> Vec<String> {
        let (code, list) = get(&api, path);
        assert_eq!(code, 200, "{list}");
        list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&format!("{NADS}?labelSelector=tier%3Dfront")), ["a", "c"]);
    assert_eq!(names(&format!("{NADS}?labelSelector=tier%20notin%20(front)")), ["b"]);
    assert_eq!(names(&format!("{NADS}?fieldSelector=metadata.name%21%3Da")), ["b", "c"]);
    assert_eq!(names(&format!("{NADS}?labelSelector=tier%3Dfront&fieldSelector=metadata.name%3Dc")), ["c"]);
    // With a selector, no remainingItemCount.
    let (_, page) = get(&api, &format!("{NADS}?labelSelector=tier&limit=1"));
    assert!(page["metadata"]["continue"].is_string() && page["metadata"].get("remainingItemCount").is_none(), "{page}");
}

const POD: &str = "/api/v1/namespaces/red/pods/p";

#[test]
fn patches_the_stand_in_refuses() {
    let api = StandIn::start().unwrap();
    api.create_pod("red", "p", "node-a", &[("a", "1")]);
    let rv = api.resource_version();
    let cases = [
        ("text/plain", r#"{"metadata":{}}"#, 415, "UnsupportedMediaType"),
        (
            "application/json-patch+json",
            r#"[{"op":"add","path":"/metadata/labels","value":{}}]"#,
            415,
            "UnsupportedMediaType",
        ),
        ("application/strategic-merge-patch+json", r#"{"metadata":{"finalizers":["x"]}}"#, 400, "BadRequest"),
        ("application/merge-patch+json", r#"{"spec":{"nodeName":"node-b"}}"#, 422, "Invalid"),
        ("application/merge-patch+json", r#"{"metadata":{"name":"q"}}"#, 400, "BadRequest"),
        // As kube-apiserver v1.36 answers (integration/tests/kube_node.rs): uid is immutable.
        ("application/merge-patch+json", r#"{"metadata":{"uid":"other"}}"#, 422, "Invalid"),
        ("application/merge-patch+json", "not json", 400, "BadRequest"),
    ];
    for (content_type, body, code, reason) in cases {
        assert_eq!(
            status(send(&api, "PATCH", POD, content_type, body)),
            (code, reason.into()),
            "{content_type} {body}"
        );
    }
    assert_eq!(api.resource_version(), rv, "a refused patch writes nothing");
    // A patch that changes nothing writes nothing either; status and server fields stay.
    let (code, same) = send(
        &api,
        "PATCH",
        POD,
        "application/merge-patch+json",
        r#"{"metadata":{"annotations":{"a":"1"},"creationTimestamp":"1999-01-01T00:00:00Z"},"status":{"phase":"Failed"}}"#,
    );
    assert_eq!(code, 200);
    assert_eq!(same["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(same["status"]["phase"], "Running");
    assert_eq!(api.resource_version(), rv);
    // Deleting the last annotation leaves no empty map.
    let (_, patched) =
        send(&api, "PATCH", POD, "application/merge-patch+json", r#"{"metadata":{"annotations":{"a":null}}}"#);
    assert!(patched["metadata"].get("annotations").is_none(), "{patched}");
}

#[test]
fn event_creation_rules() {
    let api = StandIn::start().unwrap();
    let core = "/api/v1/namespaces/red/events";
    let v1 = "/apis/events.k8s.io/v1/namespaces/red/events";
    let json = "application/json";
    let cases = [
        (core, r#"{"metadata":{"name":"e","namespace":"blue"}}"#, 400),
        (core, r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"}}"#, 400),
        (core, r#"{"kind":"Pod","metadata":{"name":"e"}}"#, 400),
        (core, r#"{"metadata":{}}"#, 422),
    ];
    for (path, body, code) in cases {
        assert_eq!(send(&api, "POST", path, json, body).0, code, "{body}");
    }
    // The apiserver's event validation: the legacy rules for every event, the strict ones
    // through events.k8s.io/v1.
    let mismatch = r#"{"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p","namespace":"blue"}}"#;
    let (code, body) = send(&api, "POST", core, json, mismatch);
    assert_eq!(code, 422);
    let want =
        r#"Event "e" is invalid: involvedObject.namespace: Invalid value: "blue": does not match event.namespace"#;
    assert_eq!(body["message"], want);
    let bare = r#"{"metadata":{"name":"e"},"regarding":{"kind":"Pod","name":"p","namespace":"red"},"reason":"R","eventTime":"2024-01-01T00:00:00.000000Z"}"#;
    let (code, body) = send(&api, "POST", v1, json, bare);
    assert_eq!(code, 422);
    let want = concat!(
        r#"Event.events.k8s.io "e" is invalid: [reportingController: Required value, "#,
        r#"reportingController: Invalid value: "": name part must be non-empty, reportingInstance: Required value, "#,
        r#"action: Required value, type: Invalid value: "": has invalid value: ]"#
    );
    assert_eq!(body["message"], want);
    let first_cause =
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "reportingController"});
    assert_eq!(body["details"]["causes"][0], first_cause);
    let (code, made) = send(
        &api,
        "POST",
        core,
        json,
        r#"{"metadata":{"generateName":"p."},"reason":"R","message":"m","involvedObject":{"kind":"Pod","name":"p","namespace":"red"}}"#,
    );
    assert_eq!(code, 201);
    let name = made["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("p.") && name.len() == 7, "{name}");
    let (code, made) = send(
        &api,
        "POST",
        v1,
        json,
        concat!(
            r#"{"metadata":{"name":"x"},"reason":"R","note":"n","regarding":{"kind":"Pod","name":"p","namespace":"red"},"#,
            r#""eventTime":"2024-01-01T00:00:00.000000Z","reportingController":"braid-install","#,
            r#""reportingInstance":"node-1","action":"Check","type":"Warning"}"#
        ),
    );
    assert_eq!((code, made["apiVersion"].as_str(), made["note"].as_str()), (201, Some("events.k8s.io/v1"), Some("n")));
    let (_, as_core) = get(&api, &format!("{core}/x"));
    assert_eq!((as_core["apiVersion"].as_str(), as_core["message"].as_str()), (Some("v1"), Some("n")));
    let (_, list) = get(&api, "/api/v1/events");
    assert_eq!(list["kind"], "EventList");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert!(list["items"][0].get("kind").is_none(), "built-in list items carry no kind: {list}");
    assert_eq!(api.events().len(), 2);
}
