//! NetworkAttachmentDefinitions of every namespace, watched and mirrored.

use super::{event, Agent};
use crate::log_changed;
use crate::metrics::Verb;
use crate::nad::Nad;
use crate::nad_mirror::{Applied, NadMirror};
use crate::owners::Owners;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;

/// The NAD's API resource (as Multus's CRD defines it): group `k8s.cni.cncf.io`, version `v1`,
/// plural `network-attachment-definitions`. Known without discovery, so the agent needs no
/// permission beyond get/list/watch on it.
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition"),
        "network-attachment-definitions",
    )
}

/// Watches NADs until the process ends. The watcher lists, then watches from the list's
/// resourceVersion; on `410 Gone` it lists again (`Init` … `InitDone`); on any error it retries
/// with kube-runtime's default backoff (0.8 s doubling to 30 s), the mirror untouched meanwhile.
pub async fn run(client: kube::Client, agent: Agent, owners: Owners) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    let mut mirror = NadMirror::open(&agent.networks, agent.nad_conf_dir.clone(), owners);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut refresh = tokio::time::interval(agent.refresh);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut failing, mut listed) = (None::<String>, false);
    loop {
        tokio::select! {
            item = stream.next() => {
                let Some(item) = item else { return };
                match item {
                    Ok(Event::Init) => {
                        if failing.take().is_some() {
                            crate::log("NetworkAttachmentDefinitions: the API server answers again; listing");
                        }
                        mirror.begin_list();
                    }
                    Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
                        apply(&client, &agent, &mut mirror, Nad::from_object(&serde_json::to_value(&o).unwrap_or_default())).await;
                    }
                    Ok(Event::InitDone) => {
                        agent.metrics.api(Verb::list, RESOURCE, "ok");
                        match mirror.end_list() {
                            Ok(_) if !listed => {
                                listed = true;
                                agent.metrics.set_listed();
                                crate::log("NetworkAttachmentDefinitions: first full list mirrored; watching");
                            }
                            Ok(_) => {}
                            Err(e) => crate::log(&format!("NetworkAttachmentDefinitions: cannot remove a stale definition: {e}")),
                        }
                    }
                    Ok(Event::Delete(o)) => {
                        let nad = Nad::from_object(&serde_json::to_value(&o).unwrap_or_default());
                        if let Err(e) = mirror.delete(&nad) {
                            crate::log(&format!("network {}: cannot remove its definition: {e}", nad.key()));
                        }
                    }
                    Err(e) => {
                        count_failure(&agent, &e);
                        log_changed(
                            &mut failing,
                            format!("NetworkAttachmentDefinitions: {e}; retrying with backoff, the mirrored definitions stay as they are"),
                        )
                    }
                }
                let (mirrored, refused) = mirror.counts();
                agent.metrics.set_nads(mirrored, refused);
            }
            _ = refresh.tick() => {
                match mirror.refresh() {
                    Ok(done) => {
                        for (nad, applied) in done {
                            report(&client, &agent, &nad, applied).await;
                        }
                    }
                    Err(e) => crate::log(&format!("NetworkAttachmentDefinitions: cannot write a definition: {e}")),
                }
            }
        }
    }
}

async fn apply(client: &kube::Client, agent: &Agent, mirror: &mut NadMirror, nad: Nad) {
    match mirror.apply(nad.clone()) {
        Ok(applied) => report(client, agent, &nad, applied).await,
        Err(e) => crate::log(&format!("network {}: cannot write its definition: {e}", nad.key())),
    }
}

async fn report(client: &kube::Client, agent: &Agent, nad: &Nad, applied: Applied) {
    if let Applied::Refused(why) = applied {
        crate::log(&format!(
            "NetworkAttachmentDefinition {} (resourceVersion {}) not mirrored: {why}",
            nad.key(),
            nad.source.resource_version
        ));
        if event::invalid_nad(client, agent, nad, &why).await == event::Reported::Already {
            crate::log(&format!(
                "NetworkAttachmentDefinition {} (resourceVersion {}): its Event exists already (one per version for the cluster)",
                nad.key(),
                nad.source.resource_version
            ));
        }
    }
}

/// The resource's name in `braid_install_api_requests_total`.
const RESOURCE: &str = "network-attachment-definitions";

/// The watcher's failed request, counted by its verb (the list, or the watch) and outcome.
fn count_failure(agent: &Agent, e: &watcher::Error) {
    let (verb, code) = match e {
        watcher::Error::InitialListFailed(e) => (Verb::list, api_code(e)),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => (Verb::watch, api_code(e)),
        watcher::Error::WatchError(status) => (Verb::watch, Some(status.code)),
        _ => (Verb::watch, None),
    };
    agent.metrics.api(verb, RESOURCE, code.map_or_else(|| "error".to_string(), |c| c.to_string()));
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
