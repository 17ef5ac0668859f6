//! The CNI test vectors of the Go reference library, kept in the repository at `testdata/cni-vectors`.

use std::path::{Path, PathBuf};

/// The path of one vector file.
pub fn vector_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/cni-vectors").join(rel)
}

/// One vector file's text; a missing file fails with where it was looked for.
pub fn vector_text(rel: &str) -> String {
    let p = vector_path(rel);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (the vectors live in testdata/cni-vectors of the repository)", p.display()))
}

/// One vector file as JSON.
#[allow(dead_code)]
pub fn vector_json(rel: &str) -> serde_json::Value {
    serde_json::from_str(&vector_text(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}
