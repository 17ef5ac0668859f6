//! The HTTP side: one handler for every path (authentication, then the route, then the verb),
//! served by axum on a current-thread tokio runtime that owns its OS thread. Stopping the
//! server drops that runtime, and with it every connection and open watch mid-stream, as a
//! crashed apiserver would.

use crate::event_rules;
use crate::list;
use crate::params::{ListOptions, Query};
use crate::patch::{merge, strategic_unsupported};
use crate::resource::{route, Kind, Route, View};
use crate::status::{ApiError, FieldError, FieldErrorKind};
use crate::store::{rv_of, Shared, Store};
use crate::watch::{self, Filter};
use crate::RecordedRequest;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use std::future::IntoFuture;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// A running server thread.
pub(crate) struct Server {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `listener` on a new thread until `stop`.
    pub fn spawn(listener: std::net::TcpListener, shared: Arc<Shared>) -> io::Result<Server> {
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("kube-standin".into()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let app = Router::new().fallback(handle).with_state(shared);
                tokio::select! {
                    _ = axum::serve(listener, app).into_future() => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime drops every task: each connection is closed where it stands.
            drop(runtime);
        })?;
        Ok(Server { stop: Some(stop), thread: Some(thread) })
    }

    /// Closes the listener and every connection, and waits until they are gone.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_response(self.code, &self.body)
    }
}

/// Bearer-token authentication, as the apiserver's token authenticator reads the header.
fn authenticated(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| given.trim() == token)
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or_default().to_string();
    let header_of =
        |name| parts.headers.get(name).and_then(|v: &header::HeaderValue| v.to_str().ok()).map(String::from);
    let content_type = header_of(header::CONTENT_TYPE);
    let accept = header_of(header::ACCEPT);
    shared.write(|store| {
        store.requests.push(RecordedRequest {
            method: parts.method.to_string(),
            path: path.clone(),
            query: raw_query.clone(),
            content_type: content_type.clone(),
            accept: accept.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    });
    shared.wait_released(parts.method.as_str(), &path).await;
    if !authenticated(&parts.headers, &shared.token) {
        return ApiError::unauthorized().into_response();
    }
    let Some(route) = route(&path) else {
        return ApiError::no_such_resource().into_response();
    };
    let query = Query::parse(&raw_query);
    let form = Form { metadata_only: accept.as_deref().is_some_and(|a| a.contains("as=PartialObjectMetadata")) };
    let what = if raw_query.is_empty() { path.clone() } else { format!("{path}?{raw_query}") };
    let result = match (&parts.method, route.name.as_deref()) {
        (&Method::GET, None) => collection(&shared, &route, &query, form, what),
        (&Method::GET, Some(name)) => get(&shared.lock(), &route, name, &query, form),
        (&Method::POST, None) if route.view.kind() == Kind::Event && route.namespace.is_some() => {
            create_event(&shared, &route, &body, form)
        }
        (&Method::PATCH, Some(name)) if route.view.kind() != Kind::Nad => {
            patch(&shared, &route, name, content_type.as_deref(), &body, form)
        }
        _ => Err(ApiError::method_not_allowed()),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// The form the client asked for in `Accept`.
#[derive(Clone, Copy)]
struct Form {
    metadata_only: bool,
}

impl Form {
    /// An object of `view`, as stored, in this form.
    fn output(self, view: View, stored: &Value) -> Value {
        let viewed = view.to_view(stored);
        if self.metadata_only {
            crate::resource::partial(&viewed)
        } else {
            viewed
        }
    }
}

/// List or watch.
fn collection(
    shared: &Arc<Shared>,
    route: &Route,
    query: &Query,
    form: Form,
    what: String,
) -> Result<Response, ApiError> {
    let mut opts = ListOptions::parse(query, route.view)?;
    if let Some(options) = opts.watch.take() {
        let metadata_only = form.metadata_only;
        let filter = Filter { view: route.view, namespace: route.namespace.clone(), opts, metadata_only };
        let watch = shared.write(|store| watch::start(shared, store, filter, &options, what));
        let headers = [(header::CONTENT_TYPE, "application/json")];
        return Ok((StatusCode::OK, headers, watch.into_body()).into_response());
    }
    let list = list::list(&shared.lock(), route.view, route.namespace.as_deref(), &opts, form.metadata_only)?;
    Ok(json_response(200, &list))
}

fn get(store: &Store, route: &Route, name: &str, query: &Query, form: Form) -> Result<Response, ApiError> {
    if query.bool("watch")?.unwrap_or(false) {
        return Err(ApiError::bad_request(
            "kube-standin does not implement watching one object by its path; watch the collection with fieldSelector=metadata.name=NAME".into(),
        ));
    }
    let ns = route.namespace.as_deref().unwrap_or_default();
    let object = store.get(route.view.kind(), ns, name).ok_or_else(|| ApiError::not_found(route.view, name))?;
    Ok(json_response(200, &form.output(route.view, object)))
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request("the body of the request must be a JSON object".into()))
    }
}

/// The characters of generated name suffixes (k8s.io/apimachinery/pkg/util/rand: no vowels,
/// no look-alikes).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// POST of an Event (either group). The apiserver's create: the body's group version and
/// namespace must agree with the URL's, a name or generateName is required, the server sets
/// uid, resourceVersion and creationTimestamp, 409 if the name is taken, 201 with the object.
fn create_event(shared: &Arc<Shared>, route: &Route, body: &[u8], form: Form) -> Result<Response, ApiError> {
    let view = route.view;
    let ns = route.namespace.clone().unwrap_or_default();
    let mut object = parse_body(body)?;
    if let Some(api_version) = object.get("apiVersion").and_then(Value::as_str) {
        if api_version != view.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                view.api_version()
            )));
        }
    }
    if let Some(kind) = object.get("kind").and_then(Value::as_str) {
        if kind != view.object_kind() {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                view.object_kind()
            )));
        }
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    match object["metadata"].get("namespace").and_then(Value::as_str) {
        Some(given) if !given.is_empty() && given != ns => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ))
        }
        _ => object["metadata"]["namespace"] = json!(ns),
    }
    object["apiVersion"] = json!(view.api_version());
    object["kind"] = json!(view.object_kind());
    let created = shared.write(|store| {
        let name = match object["metadata"].get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => {
                let Some(prefix) = object["metadata"].get("generateName").and_then(Value::as_str) else {
                    let error =
                        FieldError::new("metadata.name", FieldErrorKind::Required, "name or generateName is required");
                    return Err(ApiError::invalid(view.group(), view.object_kind(), "", &[error]));
                };
                let mut name = prefix.to_string();
                let uid = store.uid();
                name.extend(
                    uid.bytes()
                        .filter(u8::is_ascii_hexdigit)
                        .take(5)
                        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()])),
                );
                name
            }
        };
        object["metadata"]["name"] = json!(name);
        let stored = view.to_stored(&object);
        let errors = event_rules::validate_create(&stored, view == View::EventsV1);
        if !errors.is_empty() {
            return Err(ApiError::invalid(view.group(), view.object_kind(), &name, &errors));
        }
        store.create(Kind::Event, stored).map_err(|_| ApiError::already_exists(view, &name))
    })?;
    Ok(json_response(201, &form.output(view, &created)))
}

const PATCH_TYPES: &str = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// PATCH of a pod or an event with a JSON merge patch (or a strategic one that means the same).
fn patch(
    shared: &Arc<Shared>,
    route: &Route,
    name: &str,
    content_type: Option<&str>,
    body: &[u8],
    form: Form,
) -> Result<Response, ApiError> {
    let view = route.view;
    let mime = content_type.and_then(|c| c.split(';').next()).map(str::trim).unwrap_or_default();
    match mime {
        "application/merge-patch+json" => {}
        "application/strategic-merge-patch+json" if view.takes_strategic_patch() => {}
        "application/json-patch+json" | "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
            return Err(ApiError::unsupported_media_type(format!(
                "kube-standin does not implement {mime} patches (a real API server applies them); it applies application/merge-patch+json and application/strategic-merge-patch+json"
            )))
        }
        _ => {
            let accepted = if view.takes_strategic_patch() {
                format!("{PATCH_TYPES}, application/strategic-merge-patch+json")
            } else {
                PATCH_TYPES.to_string()
            };
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            )));
        }
    }
    let patch = parse_body(body)?;
    if mime == "application/strategic-merge-patch+json" {
        if let Some(what) = strategic_unsupported(&patch, "") {
            return Err(ApiError::bad_request(format!(
                "kube-standin applies a strategic merge patch as a JSON merge patch, which differs for {what}: not implemented"
            )));
        }
    }
    let ns = route.namespace.clone().unwrap_or_default();
    let updated = shared.write(|store| {
        let stored = store.get(view.kind(), &ns, name).ok_or_else(|| ApiError::not_found(view, name))?.clone();
        let current = view.to_view(&stored);
        let meta = &current["metadata"];
        if let Some(rv) = patch.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
            if rv != meta["resourceVersion"] {
                return Err(ApiError::conflict(
                    view,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
        }
        if let Some(uid) = patch.pointer("/metadata/uid").and_then(Value::as_str) {
            if uid != meta["uid"] {
                // What kube-apiserver answers (v1.36, seen in integration/tests/kube_node.rs):
                // the merged object fails ValidateObjectMetaUpdate, uid being immutable.
                let kind = current["kind"].as_str().unwrap_or_default().to_string();
                let immutable = FieldError::new("metadata.uid", FieldErrorKind::Invalid(format!("{uid:?}")), "field is immutable");
                return Err(ApiError::invalid(view.group(), &kind, name, &[immutable]));
            }
        }
        let mut merged = current.clone();
        merge(&mut merged, &patch);
        if !merged.is_object() || !merged["metadata"].is_object() {
            return Err(ApiError::bad_request("the patched object is not an object with metadata".into()));
        }
        for (field, url) in [("name", name), ("namespace", ns.as_str())] {
            if merged["metadata"][field] != url {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the object ({}) does not match the {field} on the request ({url})",
                    merged["metadata"][field]
                )));
            }
        }
        // Fields the server owns: a patch cannot set them.
        for field in ["apiVersion", "kind"] {
            merged[field] = current[field].clone();
        }
        for field in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
            restore(&mut merged["metadata"], &current["metadata"], field);
        }
        for field in ["labels", "annotations"] {
            if merged["metadata"][field].as_object().is_some_and(serde_json::Map::is_empty) {
                if let Some(m) = merged["metadata"].as_object_mut() {
                    m.remove(field);
                }
            }
        }
        if view == View::Pod {
            // The pod's status is its own subresource; the main resource keeps it.
            restore(&mut merged, &current, "status");
            if merged["spec"] != current["spec"] {
                let error = FieldError::new(
                    "spec",
                    FieldErrorKind::Forbidden,
                    "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative) — kube-standin refuses any change of spec",
                );
                return Err(ApiError::invalid("", "Pod", name, &[error]));
            }
        }
        let new = view.to_stored(&merged);
        if view.kind() == Kind::Event {
            let errors = event_rules::validate_update(&new, &stored, view == View::EventsV1);
            if !errors.is_empty() {
                return Err(ApiError::invalid(view.group(), view.object_kind(), name, &errors));
            }
        }
        let updated = store.update(view.kind(), new);
        debug_assert!(rv_of(&updated) >= rv_of(&stored));
        Ok(updated)
    })?;
    Ok(json_response(200, &form.output(view, &updated)))
}

/// Sets `field` of `to` to that of `from`, or removes it when `from` has none.
fn restore(to: &mut Value, from: &Value, field: &str) {
    match (from.get(field), to.as_object_mut()) {
        (Some(value), Some(to)) => {
            to.insert(field.to_string(), value.clone());
        }
        (None, Some(to)) => {
            to.remove(field);
        }
        (_, None) => {}
    }
}
