//! The one store behind every resource: objects, a global resourceVersion that every write
//! raises by one (etcd's revision), the history of changes since the last compaction (what a
//! watch from an older resourceVersion replays, and what a list at an exact resourceVersion is
//! rebuilt from), the open watches, and the requests seen. Tests wait on its condition variable.

use crate::resource::Kind;
use crate::time::now_rfc3339;
use crate::RecordedRequest;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedSender;

/// What the server thread and the test share.
pub(crate) struct Shared {
    store: Mutex<Store>,
    /// Requests (method, path) answered only once released ([`crate::StandIn::hold`]).
    holds: Mutex<Vec<(String, String)>>,
    released: tokio::sync::watch::Sender<u64>,
    /// Notified after every change of the store (objects, requests, watches).
    pub changed: Condvar,
    pub token: String,
    pub bookmark_interval: Duration,
}

impl Shared {
    pub fn new(token: String, bookmark_interval: Duration) -> Self {
        Shared {
            store: Mutex::new(Store::new()),
            holds: Mutex::new(Vec::new()),
            released: tokio::sync::watch::Sender::new(0),
            changed: Condvar::new(),
            token,
            bookmark_interval,
        }
    }

    fn held(&self, method: &str, path: &str) -> bool {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|(m, p)| m == method && p == path)
    }

    /// Holds every request `method path` from now on, until [`Shared::release`].
    pub fn hold(&self, method: &str, path: &str) {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).push((method.into(), path.into()));
    }

    /// Answers the held requests `method path`, and every later one at once.
    pub fn release(&self, method: &str, path: &str) {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).retain(|(m, p)| !(m == method && p == path));
        self.released.send_modify(|n| *n += 1);
    }

    /// Waits while `method path` is held (at once when it is not).
    pub async fn wait_released(&self, method: &str, path: &str) {
        let mut rx = self.released.subscribe();
        while self.held(method, path) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The store, locked. A panic elsewhere (a failed assertion in a test's closure) leaves
    /// the data consistent: every write is completed before the lock is released.
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the locked store and wakes every waiter.
    pub fn write<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let out = f(&mut self.lock());
        self.changed.notify_all();
        out
    }

    pub fn wait_timeout<'a>(&self, guard: MutexGuard<'a, Store>, dur: Duration) -> MutexGuard<'a, Store> {
        match self.changed.wait_timeout(guard, dur) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One write, as the watch cache keeps it: the object after it (for a delete, the last state
/// with the deletion's resourceVersion, as etcd3's watcher reports it) and the one before.
#[derive(Debug)]
pub(crate) struct Change {
    pub rv: u64,
    pub kind: Kind,
    pub typ: ChangeType,
    pub object: Value,
    pub prev: Option<Value>,
}

/// What the store sends an open watch.
#[derive(Debug, Clone)]
pub(crate) enum Msg {
    Change(Arc<Change>),
    /// Compacted at this resourceVersion: the watch ends with a 410.
    Expired(u64),
}

struct Watcher {
    id: u64,
    kind: Kind,
    tx: UnboundedSender<Msg>,
    what: String,
}

type Key = (Kind, String, String);

pub(crate) struct Store {
    rv: u64,
    /// resourceVersions below this are gone (0: nothing compacted yet).
    compacted: u64,
    objects: BTreeMap<Key, Value>,
    /// The resourceVersion each current object was created at: the order of creation.
    created: BTreeMap<Key, u64>,
    log: Vec<Arc<Change>>,
    watchers: Vec<Watcher>,
    next_watcher: u64,
    pub requests: Vec<RecordedRequest>,
    random: u64,
}

/// splitmix64: uids and tokens need to be unique and look random, not be secret.
pub(crate) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seed that differs between stand-ins and runs.
pub(crate) fn seed() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ count.rotate_left(17)
}

/// `metadata.resourceVersion` of a stored object.
pub(crate) fn rv_of(object: &Value) -> u64 {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn set_rv(object: &mut Value, rv: u64) {
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
}

impl Store {
    fn new() -> Self {
        Store {
            rv: 1,
            compacted: 0,
            objects: BTreeMap::new(),
            created: BTreeMap::new(),
            log: Vec::new(),
            watchers: Vec::new(),
            next_watcher: 0,
            requests: Vec::new(),
            random: seed(),
        }
    }

    /// The newest resourceVersion (that of the last write).
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The resourceVersion of the last compaction: anything older is gone.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    pub fn uid(&mut self) -> String {
        let (a, b) = (next_random(&mut self.random), next_random(&mut self.random));
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }

    pub fn get(&self, kind: Kind, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(&(kind, ns.to_string(), name.to_string()))
    }

    /// Current objects of a kind, in key order (namespace, then name), as etcd lists them.
    pub fn all(&self, kind: Kind) -> impl Iterator<Item = &Value> {
        self.objects
            .range((kind, String::new(), String::new())..)
            .take_while(move |((k, _, _), _)| *k == kind)
            .map(|(_, v)| v)
    }

    /// Current objects of a kind, oldest first.
    pub fn by_creation(&self, kind: Kind) -> Vec<&Value> {
        let mut all: Vec<(u64, &Value)> = self
            .objects
            .iter()
            .filter(|((k, _, _), _)| *k == kind)
            .map(|(key, v)| (self.created.get(key).copied().unwrap_or(0), v))
            .collect();
        all.sort_by_key(|(created, _)| *created);
        all.into_iter().map(|(_, v)| v).collect()
    }

    /// The objects of a kind as they were at `rv` (rebuilt from the history), or `None` when
    /// `rv` has been compacted away.
    pub fn at(&self, kind: Kind, rv: u64) -> Option<BTreeMap<(String, String), Value>> {
        if rv < self.compacted {
            return None;
        }
        let mut map: BTreeMap<(String, String), Value> = self
            .objects
            .iter()
            .filter(|((k, _, _), _)| *k == kind)
            .map(|((_, ns, name), v)| ((ns.clone(), name.clone()), v.clone()))
            .collect();
        for change in self.log.iter().rev().take_while(|c| c.rv > rv).filter(|c| c.kind == kind) {
            let key = key_of(&change.object);
            match (change.typ, &change.prev) {
                (ChangeType::Added, _) => {
                    map.remove(&key);
                }
                (_, Some(prev)) => {
                    map.insert(key, prev.clone());
                }
                (_, None) => {}
            }
        }
        Some(map)
    }

    /// The changes of a kind after `rv`, or `None` when some of them are compacted away.
    pub fn since(&self, kind: Kind, rv: u64) -> Option<Vec<Arc<Change>>> {
        if rv < self.compacted {
            return None;
        }
        let start = self.log.partition_point(|c| c.rv <= rv);
        Some(self.log[start..].iter().filter(|c| c.kind == kind).cloned().collect())
    }

    /// Creates an object: sets uid, resourceVersion, creationTimestamp (and generation 1 for
    /// custom resources, whose generation the apiserver keeps); 409 when the name is taken.
    pub fn create(&mut self, kind: Kind, mut object: Value) -> Result<Value, Value> {
        let (ns, name) = key_of(&object);
        if self.get(kind, &ns, &name).is_some() {
            return Err(object);
        }
        let rv = self.rv + 1;
        let uid = self.uid();
        let meta = &mut object["metadata"];
        meta["uid"] = json!(uid);
        meta["creationTimestamp"] = json!(now_rfc3339());
        if kind == Kind::Nad {
            meta["generation"] = json!(1);
        }
        set_rv(&mut object, rv);
        self.commit(kind, ChangeType::Added, object.clone(), None);
        Ok(object)
    }

    /// Replaces an existing object with `object` (server-owned metadata already carried over by
    /// the caller). No write when nothing changed, as the apiserver skips no-op updates.
    pub fn update(&mut self, kind: Kind, mut object: Value) -> Value {
        let (ns, name) = key_of(&object);
        let Some(prev) = self.get(kind, &ns, &name).cloned() else {
            return object;
        };
        set_rv(&mut object, rv_of(&prev));
        if object == prev {
            return prev;
        }
        if kind == Kind::Nad && strip_metadata(&object) != strip_metadata(&prev) {
            let generation = prev.pointer("/metadata/generation").and_then(Value::as_u64).unwrap_or(1);
            object["metadata"]["generation"] = json!(generation + 1);
        }
        set_rv(&mut object, self.rv + 1);
        self.commit(kind, ChangeType::Modified, object.clone(), Some(prev));
        object
    }

    /// Deletes an object; the deleted state carries the deletion's resourceVersion.
    pub fn delete(&mut self, kind: Kind, ns: &str, name: &str) -> Option<Value> {
        let prev = self.get(kind, ns, name)?.clone();
        let mut object = prev.clone();
        set_rv(&mut object, self.rv + 1);
        self.commit(kind, ChangeType::Deleted, object.clone(), Some(prev));
        Some(object)
    }

    fn commit(&mut self, kind: Kind, typ: ChangeType, object: Value, prev: Option<Value>) {
        self.rv += 1;
        let key = key_of(&object);
        let key = (kind, key.0, key.1);
        if typ == ChangeType::Deleted {
            self.objects.remove(&key);
            self.created.remove(&key);
        } else {
            self.created.entry(key.clone()).or_insert(self.rv);
            self.objects.insert(key, object.clone());
        }
        let change = Arc::new(Change { rv: self.rv, kind, typ, object, prev });
        self.log.push(change.clone());
        // A watch whose receiver is gone unregisters itself on drop; a failed send here only
        // means it is on its way out.
        for w in self.watchers.iter().filter(|w| w.kind == kind) {
            let _ = w.tx.send(Msg::Change(change.clone()));
        }
    }

    /// As after etcd compaction at the current revision: the history is dropped, every older
    /// resourceVersion is gone, and every open watch is told so (410) and ends.
    pub fn compact(&mut self) {
        self.compacted = self.rv;
        self.log.clear();
        for w in self.watchers.drain(..) {
            let _ = w.tx.send(Msg::Expired(self.compacted));
        }
    }

    pub fn register(&mut self, kind: Kind, tx: UnboundedSender<Msg>, what: String) -> u64 {
        self.next_watcher += 1;
        self.watchers.push(Watcher { id: self.next_watcher, kind, tx, what });
        self.next_watcher
    }

    pub fn unregister(&mut self, id: u64) {
        self.watchers.retain(|w| w.id != id);
    }

    /// The open watches, as `path?query` of the request that opened them.
    pub fn watches(&self) -> Vec<String> {
        self.watchers.iter().map(|w| w.what.clone()).collect()
    }
}

/// (namespace, name) of an object.
pub(crate) fn key_of(object: &Value) -> (String, String) {
    let field = |f: &str| object.pointer(f).and_then(Value::as_str).unwrap_or_default().to_string();
    (field("/metadata/namespace"), field("/metadata/name"))
}

fn strip_metadata(object: &Value) -> Value {
    let mut v = object.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
    }
    v
}
