//! Events on NetworkAttachmentDefinitions the agent cannot mirror: what `kubectl describe
//! net-attach-def` shows the operator. **One Event per broken NAD version for the whole
//! cluster**: every node's agent sees the same NAD, and one Event each (again after every
//! restart) is 5,000 Events for one typo on a 5,000-node cluster. So the Event's name is derived
//! from the NAD's uid, resourceVersion and the reason ([`name`]): every node creates the same
//! name, the API server keeps the first, and the others' `409 AlreadyExists` means "already
//! reported" — not retried, no second Event. A newer version (or a NAD recreated under the name:
//! a new uid) gets its own.
//!
//! Created (core/v1, the only verb the agent's RBAC has on events), never updated, never
//! retried: an Event is a courtesy, the log line beside it is the record. A refusal that rests
//! on one node's files (an empty `spec.config`: the file of that name in `--nad-conf-dir`) says
//! which node reported it; other nodes may differ, and their logs say.

use super::call::call;
use super::Agent;
use crate::metrics::Verb;
use crate::nad::{Nad, Refusal};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};

/// The Event's `reason`.
pub const REASON: &str = "InvalidConfig";
/// The Event's reporting component.
pub const COMPONENT: &str = "braid-install";

/// What creating the Event did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reported {
    /// This agent created it.
    Created,
    /// Another agent (or this one before a restart) had: `409 AlreadyExists`.
    Already,
    /// It could not be created (the log says why); not retried.
    Failed,
}

/// The Event's name for this NAD version and reason: `<nad name>.<uid>.<resourceVersion>.<reason
/// in lower case>`, the same on every node (client-go's recorder names Events `<object>.<unique
/// suffix>`; this suffix is unique per version instead of per call). A valid DNS subdomain: each
/// part is reduced to lower-case letters, digits and `-`, and the NAD's name is left out when
/// the whole would pass 253 characters.
pub fn name(nad: &Nad, reason: &str) -> String {
    let part = |s: &str| -> String {
        let kept: String = s
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
            .collect();
        let trimmed = kept.trim_matches(|c: char| c == '-' || c == '.').to_string();
        if trimmed.is_empty() {
            "none".into()
        } else {
            trimmed
        }
    };
    let suffix = format!("{}.{}.{}", part(&nad.source.uid), part(&nad.source.resource_version), part(reason));
    let full = format!("{}.{suffix}", part(&nad.source.name));
    if full.len() <= 253 {
        full
    } else {
        suffix.chars().take(253).collect()
    }
}

/// The Event's message.
pub fn message(node: &str, why: &Refusal) -> String {
    if why.on_node {
        format!("braid does not mirror this network on node {node} (other nodes may differ: their logs say): {why}")
    } else {
        format!("braid does not mirror this network (reported by node {node}; every node refuses this version alike): {why}")
    }
}

/// Creates the Warning Event for `nad`'s version refused for `why`, unless one exists.
pub async fn invalid_nad(client: &kube::Client, agent: &Agent, nad: &Nad, why: &Refusal) -> Reported {
    let involved = ObjectReference {
        api_version: Some("k8s.cni.cncf.io/v1".into()),
        kind: Some("NetworkAttachmentDefinition".into()),
        namespace: Some(nad.source.namespace.clone()),
        name: Some(nad.source.name.clone()),
        uid: Some(nad.source.uid.clone()).filter(|u| !u.is_empty()),
        resource_version: Some(nad.source.resource_version.clone()).filter(|r| !r.is_empty()),
        ..ObjectReference::default()
    };
    let ev = warning(&agent.node, name(nad, REASON), involved, (REASON, "Mirror"), message(&agent.node, why));
    let api: Api<Event> = Api::namespaced(client.clone(), &nad.source.namespace);
    match call(agent, Verb::create, "events", api.create(&PostParams::default(), &ev)).await {
        Ok(_) => Reported::Created,
        Err(f) if f.code() == Some(409) => Reported::Already,
        Err(f) => {
            crate::log(&format!("NetworkAttachmentDefinition {}: cannot create its Event: {f}", nad.key()));
            Reported::Failed
        }
    }
}

/// A Warning Event named `name` about `involved` (its namespace is the Event's), reported by
/// this node's agent: `(reason, action)` and the message `kubectl describe` shows.
pub fn warning(
    node: &str,
    name: String,
    involved: ObjectReference,
    (reason, action): (&str, &str),
    message: String,
) -> Event {
    let now = k8s_openapi::jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta { name: Some(name), namespace: involved.namespace.clone(), ..ObjectMeta::default() },
        involved_object: involved,
        reason: Some(reason.into()),
        message: Some(message),
        type_: Some("Warning".into()),
        source: Some(EventSource { component: Some(COMPONENT.into()), host: Some(node.into()) }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.into()),
        action: Some(action.into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nad::Source;

    fn nad(name: &str, uid: &str, rv: &str) -> Nad {
        let source = Source {
            namespace: "team-a".into(),
            name: name.into(),
            uid: uid.into(),
            resource_version: rv.into(),
            resource_name: None,
        };
        Nad { source, config: None }
    }

    fn is_dns_subdomain(s: &str) -> bool {
        s.len() <= 253 && s.split('.').all(cni_types::validate::is_dns_label)
    }

    #[test]
    fn one_name_per_version_and_reason_valid_everywhere() {
        let uid = "4f7d1c2a-9b1e-4c3d-8e2f-0a1b2c3d4e5f";
        let n = name(&nad("macvlan-conf", uid, "1234"), REASON);
        assert_eq!(n, format!("macvlan-conf.{uid}.1234.invalidconfig"));
        assert!(is_dns_subdomain(&n), "{n}");
        // Deterministic: every node computes the same; a new version, uid or reason another.
        assert_eq!(n, name(&nad("macvlan-conf", uid, "1234"), REASON));
        assert_ne!(n, name(&nad("macvlan-conf", uid, "1235"), REASON));
        assert_ne!(n, name(&nad("macvlan-conf", "other-uid", "1234"), REASON));
        assert_ne!(n, name(&nad("macvlan-conf", uid, "1234"), "Other"));
        // Whatever the NAD's name (a subdomain with dots, 253 long), a valid name.
        for odd in ["a.b", &"x".repeat(253), "Upper_Case", ""] {
            let n = name(&nad(odd, uid, "7"), REASON);
            assert!(is_dns_subdomain(&n), "{odd:?}: {n}");
            assert!(n.contains(uid) && n.contains(".7."), "{n}");
        }
    }

    #[test]
    fn a_node_specific_refusal_names_the_node() {
        let on_node = Refusal { why: "no file".into(), on_node: true };
        assert!(message("node-7", &on_node).contains("on node node-7"));
        let everywhere = Refusal { why: "spec.config is not JSON".into(), on_node: false };
        let m = message("node-7", &everywhere);
        assert!(m.contains("reported by node node-7") && m.contains("spec.config is not JSON"), "{m}");
    }
}
