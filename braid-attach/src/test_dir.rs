//! A scratch directory for unit tests, removed on drop (the modules' tests each used to carry
//! their own copy).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

/// `<temp>/braid-<tag>-<pid>-<n>`, not created; removed with what it holds on drop.
pub(crate) struct Dir(pub(crate) PathBuf);

impl Dir {
    pub(crate) fn new(tag: &str) -> Dir {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Dir(std::env::temp_dir().join(format!("braid-{tag}-{}-{n}", std::process::id())))
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
