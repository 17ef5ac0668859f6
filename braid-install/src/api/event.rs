//! Events on NetworkAttachmentDefinitions the agent cannot mirror: what `kubectl describe
//! net-attach-def` shows the operator. Created (core/v1, the only verb the agent's RBAC has on
//! events), once per NAD resourceVersion and node; never updated, never retried: an Event is a
//! courtesy, the log line beside it is the record.

use crate::nad::Nad;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};

/// The Event's `reason`.
pub const REASON: &str = "InvalidConfig";
/// The Event's reporting component.
pub const COMPONENT: &str = "braid-install";

/// Creates a Warning Event on `nad` saying why it is not mirrored on `node`.
pub async fn invalid_nad(client: &kube::Client, node: &str, nad: &Nad, why: &str) {
    let now = k8s_openapi::jiff::Timestamp::now();
    let ev = Event {
        metadata: ObjectMeta {
            // As kubectl's and client-go's recorders name them: object, a dot, a unique suffix.
            name: Some(format!("{}.{:x}", nad.source.name, now.as_nanosecond())),
            namespace: Some(nad.source.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("k8s.cni.cncf.io/v1".into()),
            kind: Some("NetworkAttachmentDefinition".into()),
            namespace: Some(nad.source.namespace.clone()),
            name: Some(nad.source.name.clone()),
            uid: Some(nad.source.uid.clone()).filter(|u| !u.is_empty()),
            resource_version: Some(nad.source.resource_version.clone()).filter(|r| !r.is_empty()),
            ..ObjectReference::default()
        },
        reason: Some(REASON.into()),
        message: Some(format!("braid on node {node} does not mirror this network: {why}")),
        type_: Some("Warning".into()),
        source: Some(EventSource { component: Some(COMPONENT.into()), host: Some(node.into()) }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.into()),
        action: Some("Mirror".into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        ..Event::default()
    };
    let api: Api<Event> = Api::namespaced(client.clone(), &nad.source.namespace);
    if let Err(e) = api.create(&PostParams::default(), &ev).await {
        crate::log(&format!("NetworkAttachmentDefinition {}: cannot create its Event: {e}", nad.key()));
    }
}
