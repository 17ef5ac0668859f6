//! The resources the stand-in serves and the URL paths that name them: NetworkAttachmentDefinitions
//! (`k8s.cni.cncf.io/v1`, namespaced, Multus's CRD), pods (`v1`) and events, which are one
//! resource seen through two API groups (`v1` and `events.k8s.io/v1`), as in the apiserver.

use serde_json::{Map, Value};

/// What the store keeps apart: one map of objects per kind.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(crate) enum Kind {
    Nad,
    Pod,
    Event,
}

/// A kind as one API group version serves it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum View {
    Nad,
    Pod,
    /// `v1` Event: the form events are stored in.
    CoreEvent,
    /// `events.k8s.io/v1` Event: the same objects with renamed fields.
    EventsV1,
}

/// The names an `events.k8s.io/v1` Event gives to fields of a `v1` Event
/// (kubernetes/pkg/apis/events/v1/conversion.go); the rest keep their names.
const EVENT_FIELDS: [(&str, &str); 9] = [
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("apiVersion", "apiVersion"),
    ("kind", "kind"),
];

impl View {
    pub fn kind(self) -> Kind {
        match self {
            View::Nad => Kind::Nad,
            View::Pod => Kind::Pod,
            View::CoreEvent | View::EventsV1 => Kind::Event,
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            View::Nad => "k8s.cni.cncf.io",
            View::Pod | View::CoreEvent => "",
            View::EventsV1 => "events.k8s.io",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            View::Nad => "k8s.cni.cncf.io/v1",
            View::Pod | View::CoreEvent => "v1",
            View::EventsV1 => "events.k8s.io/v1",
        }
    }

    pub fn object_kind(self) -> &'static str {
        match self {
            View::Nad => "NetworkAttachmentDefinition",
            View::Pod => "Pod",
            View::CoreEvent | View::EventsV1 => "Event",
        }
    }

    pub fn list_kind(self) -> String {
        format!("{}List", self.object_kind())
    }

    pub fn plural(self) -> &'static str {
        match self {
            View::Nad => "network-attachment-definitions",
            View::Pod => "pods",
            View::CoreEvent | View::EventsV1 => "events",
        }
    }

    /// `plural.group`, as the apiserver names a resource in messages (`pods`, `events.events.k8s.io`).
    pub fn qualified_resource(self) -> String {
        if self.group().is_empty() {
            self.plural().to_string()
        } else {
            format!("{}.{}", self.plural(), self.group())
        }
    }

    /// Built-in kinds are encoded from Go structs: the items of their lists carry no
    /// `apiVersion`/`kind`. Custom resources are unstructured: every item carries both.
    pub fn items_typed(self) -> bool {
        self != View::Nad
    }

    /// Patch bodies the endpoint takes (custom resources have no strategic merge patch).
    pub fn takes_strategic_patch(self) -> bool {
        self != View::Nad
    }

    /// The fields a `fieldSelector` may name for this resource (for custom resources only
    /// `metadata.name` and `metadata.namespace`; for pods and events their registries' lists).
    pub fn selectable_fields(self) -> &'static [&'static str] {
        match self {
            View::Nad => &["metadata.name", "metadata.namespace"],
            View::Pod => &[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            View::CoreEvent => &[
                "metadata.name",
                "metadata.namespace",
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            View::EventsV1 => &[
                "metadata.name",
                "metadata.namespace",
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
                "reason",
                "reportingController",
                "deprecatedSource",
                "type",
            ],
        }
    }

    /// A field's value as a field selector compares it: strings as they are, other scalars
    /// printed, absent fields as "" (so `spec.nodeName=` selects unscheduled pods).
    pub fn field_value(self, object: &Value, field: &str) -> String {
        let path = match field {
            "source" => "source.component",
            "deprecatedSource" => "deprecatedSource.component",
            other => other,
        };
        let mut at = object;
        for part in path.split('.') {
            match at.get(part) {
                Some(next) => at = next,
                None => return String::new(),
            }
        }
        match at {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }

    /// The stored (`v1`) form of an object as this view serves it.
    pub fn to_view(self, stored: &Value) -> Value {
        match self {
            View::EventsV1 => rename_event(stored, false),
            _ => stored.clone(),
        }
    }

    /// An object in this view's form, as it is stored.
    pub fn to_stored(self, viewed: &Value) -> Value {
        match self {
            View::EventsV1 => rename_event(viewed, true),
            _ => viewed.clone(),
        }
    }
}

/// Fields both forms of an event name alike.
const EVENT_FIELDS_ALIKE: [&str; 8] =
    ["metadata", "series", "related", "eventTime", "action", "reason", "type", "reportingInstance"];

/// Converts an event between the `v1` form and the `events.k8s.io/v1` one (`into_core`: to
/// `v1`); `apiVersion` and `kind` become the target's, and a field the target does not have is
/// dropped (as the Go conversion drops it).
fn rename_event(object: &Value, into_core: bool) -> Value {
    let Value::Object(fields) = object else { return object.clone() };
    let mut out = Map::new();
    for (key, value) in fields {
        let renamed = if EVENT_FIELDS_ALIKE.contains(&key.as_str()) {
            Some(key.as_str())
        } else if into_core {
            EVENT_FIELDS.iter().find(|(_, v1)| v1 == key).map(|(core, _)| *core)
        } else {
            EVENT_FIELDS.iter().find(|(core, _)| core == key).map(|(_, v1)| *v1)
        };
        if let Some(renamed) = renamed {
            out.insert(renamed.to_string(), value.clone());
        }
    }
    let into = if into_core { View::CoreEvent } else { View::EventsV1 };
    if fields.contains_key("apiVersion") || fields.contains_key("kind") {
        out.insert("apiVersion".into(), Value::String(into.api_version().into()));
        out.insert("kind".into(), Value::String(into.object_kind().into()));
    }
    Value::Object(out)
}

/// An object as a client asking for `as=PartialObjectMetadata` (kube's `get_metadata`,
/// `list_metadata`, `metadata_watcher`) gets it: its metadata only, as
/// `meta.k8s.io/v1` `PartialObjectMetadata` (the apiserver's `asPartialObjectMetadata`).
pub(crate) fn partial(object: &Value) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
    })
}

/// A request path taken apart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Route {
    pub view: View,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// `/api/v1/pods`, `/api/v1/namespaces/{ns}/pods[/{name}]`, `/apis/{group}/v1/...`: the
/// collection across namespaces, a namespace's collection, or one object. `None` for any
/// other path (a subresource, an unserved resource or group).
pub(crate) fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, "v1", rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, plural, name) = match rest {
        [plural] => (None, *plural, None),
        ["namespaces", ns, plural] => (Some(*ns), *plural, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
        _ => return None,
    };
    let view = match (group, plural) {
        ("k8s.cni.cncf.io", "network-attachment-definitions") => View::Nad,
        ("", "pods") => View::Pod,
        ("", "events") => View::CoreEvent,
        ("events.k8s.io", "events") => View::EventsV1,
        _ => return None,
    };
    if namespace.is_some_and(str::is_empty) || name.is_some_and(str::is_empty) {
        return None;
    }
    Some(Route { view, namespace: namespace.map(String::from), name: name.map(String::from) })
}

#[cfg(test)]
mod tests {
    use super::{route, Route, View};
    use serde_json::json;

    #[test]
    fn routes() {
        let r = |view, ns: Option<&str>, name: Option<&str>| {
            Some(Route { view, namespace: ns.map(String::from), name: name.map(String::from) })
        };
        assert_eq!(route("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions"), r(View::Nad, None, None));
        assert_eq!(
            route("/apis/k8s.cni.cncf.io/v1/namespaces/a/network-attachment-definitions/n"),
            r(View::Nad, Some("a"), Some("n"))
        );
        assert_eq!(route("/api/v1/pods"), r(View::Pod, None, None));
        assert_eq!(route("/api/v1/namespaces/a/pods/p"), r(View::Pod, Some("a"), Some("p")));
        assert_eq!(route("/apis/events.k8s.io/v1/namespaces/a/events"), r(View::EventsV1, Some("a"), None));
        assert_eq!(route("/api/v1/namespaces/a/pods/p/status"), None);
        assert_eq!(route("/api/v1/pods/p"), None);
        assert_eq!(route("/api/v1/configmaps"), None);
        assert_eq!(route("/apis/k8s.cni.cncf.io/v2/network-attachment-definitions"), None);
    }

    #[test]
    fn events_convert_both_ways() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "a"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "m", "reason": "R", "type": "Warning", "count": 2,
            "reportingComponent": "braid", "reportingInstance": "node-1",
        });
        let v1 = View::EventsV1.to_view(&core);
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["note"], "m");
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["reportingController"], "braid");
        assert_eq!(View::EventsV1.to_stored(&v1), core);
    }
}
