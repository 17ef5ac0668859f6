//! Static pods' network-status. The kubelet runs a static pod (a manifest of its own
//! `staticPodPath`) under a UID it makes itself — the hash of the manifest, fnv-128a in hex
//! (`pkg/kubelet/config/common.go`, `applyDefaults`) — and that is the `K8S_POD_UID` its
//! sandbox's ADD gets. The pod the API server shows is its *mirror pod*, with a UID of the API
//! server's, carrying the kubelet's hash as its `kubernetes.io/config.mirror` annotation
//! (`pkg/kubelet/pod/mirror_client.go`, `CreateMirrorPod`). A patch guarded by the file's UID is
//! therefore always refused (422) for a static pod.
//!
//! A UID of the kubelet's hash shape (32 hexadecimal digits, no dashes; the API server's are
//! RFC 4122 UUIDs, with dashes) is patched instead with a JSON patch whose first operation
//! tests that `kubernetes.io/config.mirror` is that hash: still one request per file version,
//! and still never another pod's — a mirror pod of another manifest (or a plain pod of that
//! name) fails the test, 422, and the file is not published, as for a recreated pod.

use serde_json::{json, Value};

/// The mirror pod's annotation naming its static pod's UID.
pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

/// Whether `uid` has the shape of the kubelet's hash of a static pod's manifest.
pub fn is_kubelet_hash(uid: &str) -> bool {
    uid.len() == 32 && uid.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// RFC 6901's escaping of one path segment.
fn pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The JSON patch (RFC 6902) that sets `annotation` to `value` on the mirror pod of the static
/// pod `uid` only.
pub fn patch(uid: &str, annotation: &str, value: &str) -> Value {
    json!([
        {"op": "test", "path": format!("/metadata/annotations/{}", pointer(CONFIG_MIRROR)), "value": uid},
        {"op": "add", "path": format!("/metadata/annotations/{}", pointer(annotation)), "value": value}
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_hash_is_told_from_the_api_servers_uids_and_the_patch_tests_the_mirror() {
        assert!(is_kubelet_hash("5b3c8ad7f0e1c2b4a69d8e7f10234567"));
        assert!(!is_kubelet_hash("5f0c2d1e-8a3b-4c7d-9e6f-0a1b2c3d4e5f"), "the API server's");
        assert!(!is_kubelet_hash("5B3C8AD7F0E1C2B4A69D8E7F10234567"), "hex.EncodeToString is lower case");
        assert!(!is_kubelet_hash("uid-1"));
        assert_eq!(
            patch("5b3c8ad7f0e1c2b4a69d8e7f10234567", "k8s.v1.cni.cncf.io/network-status", "[]"),
            json!([
                {"op": "test", "path": "/metadata/annotations/kubernetes.io~1config.mirror",
                 "value": "5b3c8ad7f0e1c2b4a69d8e7f10234567"},
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1network-status", "value": "[]"}
            ])
        );
    }
}
