//! The state store against the real filesystem.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use braid_attach::state::{Key, StateStore};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("braid-state-{tag}-{}", std::process::id()))
}

#[test]
fn state_files_are_private_atomic_and_removable() {
    let dir = temp_dir("basic");
    let _ = std::fs::remove_dir_all(&dir);
    let store = StateStore::open(dir.join("sub")).unwrap();
    let mode = std::fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let key = Key::new("ctr-1", "eth0").unwrap();
    assert_eq!(store.read(&key).unwrap(), None);
    store.write(&key, b"one").unwrap();
    store.write(&key, b"two").unwrap();
    assert_eq!(store.read(&key).unwrap().as_deref(), Some(&b"two"[..]));
    let file = store.dir().join("ctr-1@eth0");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(store.keys().unwrap(), vec![key.clone()]);
    // No temp files linger.
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
    store.remove(&key).unwrap();
    store.remove(&key).unwrap();
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// DEL's removal: the state is gone for every reader at once (renamed into `.retired`, which
/// no key names), and a sweep frees it later; a missing state is fine, and anything but a
/// regular file is removed as `remove` does (a planted directory is an error naming it).
#[test]
fn retired_state_is_gone_at_once_and_swept_later() {
    let dir = temp_dir("retire");
    let _ = std::fs::remove_dir_all(&dir);
    let store = StateStore::open(&dir).unwrap();
    let (a, b) = (Key::new("ctr-a", "eth0").unwrap(), Key::new("ctr-b", "eth0").unwrap());
    store.create(&a, b"plan a\n").unwrap();
    store.create(&b, b"plan b\n").unwrap();
    store.retire(&a).unwrap();
    assert_eq!(store.read(&a).unwrap(), None);
    assert_eq!(store.keys().unwrap(), vec![b.clone()], "a retired state is no key (GC never sees it)");
    let retired = dir.join(braid_attach::state::RETIRED);
    let names: Vec<String> =
        std::fs::read_dir(&retired).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec![std::process::id().to_string()], "kept, named after its process, until a sweep");
    assert_eq!(std::fs::read(retired.join(&names[0])).unwrap(), b"plan a\n");
    store.retire(&a).unwrap();
    store.sweep_retired();
    assert_eq!(std::fs::read_dir(&retired).unwrap().count(), 0);
    // A second state retired by the same process replaces the first, not yet swept one.
    store.retire(&b).unwrap();
    assert_eq!(store.keys().unwrap(), Vec::<Key>::new());
    assert_eq!(std::fs::read_dir(&retired).unwrap().count(), 1);
    store.sweep_retired();
    // Not a regular file: removed as before, and what cannot be removed is reported.
    let planted = dir.join("ctr-c@eth0");
    std::fs::create_dir(&planted).unwrap();
    let e = store.retire(&Key::new("ctr-c", "eth0").unwrap()).unwrap_err();
    assert!(e.to_string().contains("ctr-c@eth0"), "{e}");
    assert!(planted.is_dir(), "a planted directory is not moved away unnoticed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn state_is_created_then_appended_to() {
    let dir = temp_dir("append");
    let _ = std::fs::remove_dir_all(&dir);
    let store = StateStore::open(&dir).unwrap();
    let key = Key::new("ctr-2", "eth0").unwrap();
    // Appending needs a state to append to: a clear error naming the file, nothing created.
    let e = store.append(&key, b"late\n").unwrap_err();
    assert!(e.to_string().contains("ctr-2@eth0"), "{e}");
    assert_eq!(store.keys().unwrap(), Vec::<Key>::new());
    store.create(&key, b"plan\n").unwrap();
    store.append(&key, b"one\n").unwrap();
    store.append(&key, b"two\n").unwrap();
    assert_eq!(store.read(&key).unwrap().as_deref(), Some(&b"plan\none\ntwo\n"[..]));
    let file = store.dir().join("ctr-2@eth0");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    // A second ADD of the same attachment replaces the state whole (atomically), no temp left.
    store.create(&key, b"again\n").unwrap();
    assert_eq!(store.read(&key).unwrap().as_deref(), Some(&b"again\n"[..]));
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn state_refuses_traversal_and_symlinks() {
    assert!(Key::new("../etc", "eth0").is_err());
    assert!(Key::new("ctr", "a/b").is_err());
    assert!(Key::new("ctr", "..").is_err());
    let dir = temp_dir("links");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink("/tmp", dir.join("link")).unwrap();
    assert!(StateStore::open(dir.join("link")).is_err());
    let store = StateStore::open(dir.join("real")).unwrap();
    let key = Key::new("c", "eth0").unwrap();
    let target = dir.join("target");
    std::fs::write(&target, b"secret").unwrap();
    std::os::unix::fs::symlink(&target, store.dir().join("c@eth0")).unwrap();
    assert!(store.read(&key).is_err(), "a symlinked state file must not be followed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_state_file_larger_than_any_plan_is_refused_not_read_whole() {
    let dir = temp_dir("huge");
    let _ = std::fs::remove_dir_all(&dir);
    let store = StateStore::open(&dir).unwrap();
    let key = Key::new("c", "eth0").unwrap();
    store.create(&key, b"plan\n").unwrap();
    // Sparse: no disk is used, but a reader without a cap would hold all of it.
    let f = std::fs::OpenOptions::new().write(true).open(store.dir().join("c@eth0")).unwrap();
    f.set_len(braid_attach::state::MAX_STATE + 1).unwrap();
    let e = store.read(&key).unwrap_err();
    assert!(e.to_string().ends_with(&format!("c@eth0: larger than {} bytes", braid_attach::state::MAX_STATE)), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn container_lock_serialises_one_container_and_cleans_up() {
    let dir = temp_dir("lock");
    let _ = std::fs::remove_dir_all(&dir);
    let store = StateStore::open(&dir).unwrap();
    let counter = std::sync::Arc::new(std::sync::Mutex::new((0u32, 0u32)));
    std::thread::scope(|s| {
        for _ in 0..4 {
            let store = store.clone();
            let counter = counter.clone();
            s.spawn(move || {
                for _ in 0..20 {
                    let _l = store.lock("ctr").unwrap();
                    {
                        let mut c = counter.lock().unwrap();
                        c.0 += 1;
                        c.1 = c.1.max(c.0);
                    }
                    std::thread::yield_now();
                    counter.lock().unwrap().0 -= 1;
                }
            });
        }
        // A different container is never blocked by "ctr".
        let _other = store.lock("other").unwrap();
    });
    assert_eq!(counter.lock().unwrap().1, 1, "two holders of one container lock at once");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "lock files left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}
