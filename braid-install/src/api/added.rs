//! `AddedInterface` Events on pods, as Multus creates them (multus-cni `pkg/multus/multus.go`
//! `DelegateAdd`: reason `AddedInterface`, type Normal, message `Add <ifname> [<address/prefix>
//! …] from <network>`), so that what operators grep for and what `kubectl describe pod` shows
//! stay as they were. The difference is where: Multus sends them from inside every delegate's
//! ADD (one API request per interface on the pod-start path, its recorder's rate limit aside);
//! braid's node agent sends them **after** the pod's network-status is published, off the ADD
//! path, from what the delegator's status file records (the interface, its network's
//! network-status name, and its addresses with their prefix lengths, `addresses`).
//!
//! **One Event per interface per sandbox, on every node and across restarts.** The Event's
//! name is derived from the pod's UID, the sandbox (the status file's container ID), the
//! interface, its network and its addresses ([`name`]): a restarted agent that publishes a
//! pod's status again creates the same names, and `409 AlreadyExists` means "already
//! reported" (not retried, no second Event) as long as the API server keeps Events (its
//! `--event-ttl`, 1 h by default). A network hot-plugged into a running pod gets its Event when
//! the new document is published; an interface removed and added again with another network or
//! address is a new name and a new Event. Within one process, an Event created (or found) is
//! remembered for the pod until its status files are gone, so a republished document costs no
//! request for the interfaces it already announced.
//!
//! Created (core/v1, the verb the agent's RBAC has), never updated, never retried: an Event
//! is a courtesy and the agent's log line beside it the record. `--no-interface-events` turns
//! them off.

use super::call::call;
use super::event::COMPONENT;
use super::Agent;
use crate::metrics::Verb;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};

/// The Events' `reason` (Multus's).
pub const REASON: &str = "AddedInterface";

/// One interface of a published document, as its Event reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// The interface in the pod (`net1`).
    pub interface: String,
    /// Its network's network-status name (`namespace/name`, or the cluster network's name).
    pub network: String,
    /// Its addresses with prefix (`198.18.5.7/24`); without prefix from an older delegator.
    pub addresses: Vec<String>,
}

/// The Event's message, Multus's format: Go's `%v` of a string slice (`[a b]`).
pub fn message(a: &Added) -> String {
    format!("Add {} [{}] from {}", a.interface, a.addresses.join(" "), a.network)
}

/// 64-bit FNV-1a: a stable hash with no dependency (the same on every node and release).
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The Event's name: `<pod>.<16 hex digits>`, the digits a hash of the pod's UID, the sandbox,
/// the interface, its network and addresses — the same wherever and whenever it is computed.
/// A valid DNS subdomain (a pod's name is one; it is shortened to fit 253 characters).
pub fn name(pod: &str, uid: &str, sandbox: &str, a: &Added) -> String {
    let addresses = a.addresses.join(",");
    let h = fnv(&[uid, sandbox, &a.interface, &a.network, &addresses, REASON]);
    let keep = 253 - 17;
    let pod: String = pod.chars().take(keep).collect();
    let pod = pod.trim_end_matches(['.', '-']);
    format!("{pod}.{h:016x}")
}

/// The interfaces of a network-status document (its entries' `interface`, `name`, `ips`), with
/// the addresses the status file records beside it (`addresses`: interface → prefixed
/// addresses) where it does. Entries without an interface are left out.
pub fn of_document(doc: &serde_json::Value, addresses: Option<&serde_json::Value>) -> Vec<Added> {
    let strings = |v: Option<&serde_json::Value>| -> Vec<String> {
        v.and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    doc.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let interface = e.get("interface")?.as_str()?.to_string();
            let network = e.get("name").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
            let recorded = addresses.and_then(|a| a.get(&interface));
            let addresses = if recorded.is_some() { strings(recorded) } else { strings(e.get("ips")) };
            Some(Added { interface, network, addresses })
        })
        .collect()
}

/// What creating one Event did.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// Created, or found already there (`409`): reported.
    Reported,
    /// Not created (the log says why); not retried.
    Failed,
}

/// The Normal Event `name` on pod `namespace/pod` (`uid`: its UID, when known) for `a`.
pub fn event(node: &str, namespace: &str, pod: &str, uid: Option<&str>, name: String, a: &Added) -> Event {
    let now = k8s_openapi::jiff::Timestamp::now();
    let involved = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.into()),
        name: Some(pod.into()),
        uid: uid.map(str::to_string),
        ..ObjectReference::default()
    };
    Event {
        metadata: ObjectMeta { name: Some(name), namespace: Some(namespace.into()), ..ObjectMeta::default() },
        involved_object: involved,
        reason: Some(REASON.into()),
        message: Some(message(a)),
        type_: Some("Normal".into()),
        source: Some(EventSource { component: Some(COMPONENT.into()), host: Some(node.into()) }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.into()),
        action: Some("AddInterface".into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        ..Event::default()
    }
}

/// Creates the Event for `a` on the pod.
pub async fn send(client: &kube::Client, agent: &Agent, namespace: &str, ev: Event) -> Sent {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let what = format!(
        "pod {namespace}/{}: {}",
        ev.involved_object.name.as_deref().unwrap_or_default(),
        ev.message.as_deref().unwrap_or_default()
    );
    match call(agent, Verb::create, "events", api.create(&PostParams::default(), &ev)).await {
        Ok(_) => {
            crate::log(&format!("{REASON} Event {what}"));
            Sent::Reported
        }
        Err(f) if f.code() == Some(409) => Sent::Reported,
        Err(f) => {
            crate::log(&format!("{REASON} Event {what}: not created ({f}); not retried"));
            Sent::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn added(i: &str, n: &str, a: &[&str]) -> Added {
        Added { interface: i.into(), network: n.into(), addresses: a.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn multus_message_format() {
        assert_eq!(
            message(&added("net1", "team-a/blue", &["198.18.5.7/24"])),
            "Add net1 [198.18.5.7/24] from team-a/blue"
        );
        assert_eq!(
            message(&added("eth0", "cbr0", &["198.18.0.5/24", "2001:db8::5/64"])),
            "Add eth0 [198.18.0.5/24 2001:db8::5/64] from cbr0"
        );
        assert_eq!(message(&added("net2", "x/y", &[])), "Add net2 [] from x/y");
    }

    #[test]
    fn names_are_stable_distinct_and_valid() {
        let a = added("net1", "team-a/blue", &["198.18.5.7/24"]);
        let n = name("web-0", "uid-1", "c1", &a);
        assert_eq!(n, name("web-0", "uid-1", "c1", &a), "the same on every node and after a restart");
        assert!(n.starts_with("web-0.") && n.len() == "web-0.".len() + 16, "{n}");
        for other in [
            name("web-0", "uid-2", "c1", &a),
            name("web-0", "uid-1", "c2", &a),
            name("web-0", "uid-1", "c1", &added("net2", "team-a/blue", &["198.18.5.7/24"])),
            name("web-0", "uid-1", "c1", &added("net1", "team-a/red", &["198.18.5.7/24"])),
            name("web-0", "uid-1", "c1", &added("net1", "team-a/blue", &["198.18.5.8/24"])),
        ] {
            assert_ne!(n, other);
        }
        let long = format!("{}-.a", "p".repeat(250));
        let n = name(&long, "u", "c", &a);
        // A DNS-1123 subdomain as Kubernetes checks names: at most 253, labels of [a-z0-9-]
        // that start and end alphanumeric (no per-label length).
        let label = |l: &str| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        assert!(n.len() <= 253 && n.split('.').all(label), "{n}");
    }

    #[test]
    fn interfaces_of_a_document_with_and_without_recorded_addresses() {
        let doc = json!([
            {"name": "cbr0", "interface": "eth0", "ips": ["198.18.0.5"], "default": true},
            {"name": "team-a/blue", "interface": "net1", "ips": ["198.18.5.7"]},
            {"name": "no-interface"}
        ]);
        let addresses = json!({"eth0": ["198.18.0.5/24"], "net1": ["198.18.5.7/24"]});
        assert_eq!(
            of_document(&doc, Some(&addresses)),
            [added("eth0", "cbr0", &["198.18.0.5/24"]), added("net1", "team-a/blue", &["198.18.5.7/24"])]
        );
        // An older delegator's file: the document's own ips.
        assert_eq!(of_document(&doc, None)[1], added("net1", "team-a/blue", &["198.18.5.7"]));
        assert!(of_document(&json!({}), None).is_empty());
    }

    #[test]
    fn the_event_is_normal_on_the_pod_with_its_uid() {
        let a = added("net1", "team-a/blue", &["198.18.5.7/24"]);
        let e = event("node1", "team-a", "web-0", Some("uid-1"), "web-0.0123".into(), &a);
        assert_eq!((e.type_.as_deref(), e.reason.as_deref()), (Some("Normal"), Some(REASON)));
        assert_eq!(e.message.as_deref(), Some("Add net1 [198.18.5.7/24] from team-a/blue"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("uid-1"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(e.source.and_then(|s| s.component).as_deref(), Some(COMPONENT));
    }
}
