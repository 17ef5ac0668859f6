//! GET of a collection with `watch=true`: a chunked HTTP 200 response of newline-delimited
//! `{"type": …, "object": …}` events, as the apiserver's watch cache serves it
//! (k8s.io/apiserver/pkg/storage/cacher): the initial state or the history after the asked
//! resourceVersion, then live changes, BOOKMARKs, and an end — the client's `timeoutSeconds`, or an
//! `ERROR` event with a 410 `Status` once the history it needs is compacted.

use crate::params::{ListOptions, Rv, WatchOptions};
use crate::resource::View;
use crate::status::ApiError;
use crate::store::{Change, ChangeType, Msg, Shared, Store};
use axum::body::Bytes;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};

/// The apiserver's watch length when the client gives no `timeoutSeconds` (its
/// `--min-request-timeout`, 1800 s; it picks at random up to twice that).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// Which objects a watch shows, in which form.
pub(crate) struct Filter {
    pub view: View,
    pub namespace: Option<String>,
    pub opts: ListOptions,
    /// Objects as `PartialObjectMetadata` (the client asked for metadata only).
    pub metadata_only: bool,
}

impl Filter {
    fn matches(&self, stored: &Value) -> Option<Value> {
        if self.namespace.as_deref().is_some_and(|ns| crate::store::key_of(stored).0 != ns) {
            return None;
        }
        let viewed = self.view.to_view(stored);
        self.opts.selectors.matches(self.view, &viewed).then_some(viewed)
    }

    /// A change as this watch sees it: an object that starts matching is ADDED, one that stops
    /// matching is DELETED (its previous state with the change's resourceVersion), as the
    /// cacher's watchers convert events.
    fn event(&self, change: &Change) -> Option<Value> {
        let now = self.matches(&change.object);
        let before = change.prev.as_ref().and_then(|p| self.matches(p));
        let (typ, object) = match (change.typ, before, now) {
            (ChangeType::Deleted, _, Some(gone)) => ("DELETED", gone),
            (ChangeType::Deleted, _, None) => return None,
            (_, None, Some(object)) => ("ADDED", object),
            (_, Some(_), Some(object)) => ("MODIFIED", object),
            (_, Some(mut old), None) => {
                old["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                ("DELETED", old)
            }
            (_, None, None) => return None,
        };
        Some(json!({ "type": typ, "object": self.output(object) }))
    }

    fn output(&self, object: Value) -> Value {
        if self.metadata_only {
            crate::resource::partial(&object)
        } else {
            object
        }
    }

    /// A BOOKMARK: only the kind and the resourceVersion the client may resume from.
    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Value {
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let object =
            json!({ "kind": self.view.object_kind(), "apiVersion": self.view.api_version(), "metadata": metadata });
        json!({ "type": "BOOKMARK", "object": self.output(object) })
    }
}

fn line(event: &Value) -> Bytes {
    let mut bytes = event.to_string().into_bytes();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn expired_event(asked: u64, oldest: u64) -> Value {
    let status = ApiError::expired(format!("too old resource version: {asked} ({oldest})"));
    json!({ "type": "ERROR", "object": status.body })
}

/// What woke a watch up.
enum Step {
    Msg(Option<Msg>),
    Bookmark,
    Deadline,
}

/// An open watch: what is left to send, and where new changes come from. Dropping it (the
/// client went away, the watch ended, the server stopped) unregisters it from the store.
pub(crate) struct Watch {
    shared: Arc<Shared>,
    id: Option<u64>,
    rx: UnboundedReceiver<Msg>,
    filter: Filter,
    pending: VecDeque<Bytes>,
    /// The resourceVersion the client has seen up to (named in a 410).
    seen: u64,
    bookmarks: Option<Interval>,
    deadline: Pin<Box<Sleep>>,
    done: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.shared.write(|store| store.unregister(id));
        }
    }
}

/// Starts a watch under the store's lock, so no change falls between the initial events and the
/// live ones. A watch from a compacted resourceVersion is still a 200: its one event is the 410.
pub(crate) fn start(
    shared: &Arc<Shared>,
    store: &mut Store,
    filter: Filter,
    options: &WatchOptions,
    what: String,
) -> Watch {
    let (tx, rx) = unbounded_channel();
    let current = store.rv();
    let mut pending = VecDeque::new();
    let mut done = false;
    let mut seen = current;
    let initial = |pending: &mut VecDeque<Bytes>| {
        for object in store.all(filter.view.kind()).filter_map(|o| filter.matches(o)) {
            pending.push_back(line(&json!({ "type": "ADDED", "object": filter.output(object) })));
        }
    };
    match (options.send_initial_events, filter.opts.rv) {
        (Some(true), _) => {
            initial(&mut pending);
            // The end of the initial events is a bookmark, sent only to a client that takes
            // bookmarks (the cacher's isListWatchRequest).
            if options.bookmarks {
                pending.push_back(line(&filter.bookmark(current, true)));
            }
        }
        (None, Rv::Unset | Rv::Any) => initial(&mut pending),
        (Some(false), Rv::Unset | Rv::Any) => {}
        (_, Rv::At(rv)) => match store.since(filter.view.kind(), rv) {
            Some(changes) => {
                pending.extend(changes.iter().filter_map(|c| filter.event(c)).map(|e| line(&e)));
            }
            None => {
                pending.push_back(line(&expired_event(rv, store.compacted())));
                done = true;
                seen = rv;
            }
        },
    }
    let id = (!done).then(|| store.register(filter.view.kind(), tx, what));
    let timeout = options.timeout_seconds.map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = options.bookmarks.then(|| {
        let every = shared.bookmark_interval;
        let mut interval = tokio::time::interval_at(Instant::now() + every, every);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval
    });
    Watch {
        shared: shared.clone(),
        id,
        rx,
        filter,
        pending,
        seen,
        bookmarks,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        done,
    }
}

impl Watch {
    fn on_msg(&mut self, msg: Option<Msg>) {
        match msg {
            Some(Msg::Change(change)) => {
                if let Some(event) = self.filter.event(&change) {
                    self.pending.push_back(line(&event));
                }
                self.seen = change.rv;
            }
            Some(Msg::Expired(compacted)) => {
                self.pending.push_back(line(&expired_event(self.seen, compacted)));
                self.id = None;
                self.done = true;
            }
            None => self.done = true,
        }
    }

    /// A BOOKMARK at the store's resourceVersion, after every change up to it: the changes
    /// already queued for this watch are taken under the lock they were sent under.
    fn bookmark(&mut self) {
        let shared = self.shared.clone();
        let rv = {
            let store = shared.lock();
            while let Ok(msg) = self.rx.try_recv() {
                self.on_msg(Some(msg));
            }
            store.rv()
        };
        if !self.done {
            self.pending.push_back(line(&self.filter.bookmark(rv, false)));
            self.seen = rv;
        }
    }

    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Self)> {
        loop {
            if let Some(bytes) = self.pending.pop_front() {
                return Some((Ok(bytes), self));
            }
            if self.done {
                return None;
            }
            let bookmarks = &mut self.bookmarks;
            let tick = async move {
                match bookmarks.as_mut() {
                    Some(interval) => interval.tick().await,
                    None => std::future::pending().await,
                }
            };
            let step = tokio::select! {
                msg = self.rx.recv() => Step::Msg(msg),
                _ = tick => Step::Bookmark,
                () = &mut self.deadline => Step::Deadline,
            };
            match step {
                Step::Msg(msg) => self.on_msg(msg),
                Step::Bookmark => self.bookmark(),
                Step::Deadline => {
                    // Like the cacher, a last bookmark just as the watch times out, so the
                    // client resumes from as late as possible.
                    if self.bookmarks.is_some() {
                        self.bookmark();
                    }
                    self.done = true;
                }
            }
        }
    }

    /// The response body: one chunk per event.
    pub fn into_body(self) -> axum::body::Body {
        axum::body::Body::from_stream(futures_util::stream::unfold(self, Watch::next))
    }
}
