//! GET of a collection without `watch`: the list, in etcd's key order, with `limit`/`continue`
//! paging and the resourceVersion semantics of
//! <https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-get-and-list>.

use crate::params::{ListOptions, Rv, RvMatch};
use crate::resource::View;
use crate::status::ApiError;
use crate::store::Store;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

/// The message of a 410 for a list at a compacted resourceVersion (etcd3 store).
const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";
/// The message of a 410 for a continue token whose snapshot is compacted (etcd3 store).
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A continue token as the apiserver encodes it: base64url (no padding) of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key after the last item>\u0000"}`.
fn encode_continue(rv: u64, last_key: &str) -> String {
    let token = json!({ "v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last_key}\u{0}") });
    URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes = URL_SAFE_NO_PAD.decode(token.trim_end_matches('=')).map_err(|e| invalid(&e.to_string()))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| invalid(&e.to_string()))?;
    if value["v"] != "meta.k8s.io/v1" {
        return Err(invalid("server does not recognize this encoded version"));
    }
    let rv = value["rv"]
        .as_u64()
        .filter(|rv| *rv > 0)
        .ok_or_else(|| invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let start = value["start"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| invalid("encoded start key empty"))?;
    Ok((rv, start.to_string()))
}

/// An object's key within the listed collection: `ns/name` across namespaces, `name` in one.
fn list_key(object: &Value, across_namespaces: bool) -> String {
    let (ns, name) = crate::store::key_of(object);
    if across_namespaces {
        format!("{ns}/{name}")
    } else {
        name
    }
}

/// The list, or with `metadata_only` a `PartialObjectMetadataList`.
pub(crate) fn list(
    store: &Store,
    view: View,
    namespace: Option<&str>,
    opts: &ListOptions,
    metadata_only: bool,
) -> Result<Value, ApiError> {
    let current = store.rv();
    let too_large = |asked: u64| ApiError::too_large_resource_version(asked, current);
    // Which snapshot, from which key, how many.
    let (snapshot, start, limit) = if let Some(token) = &opts.page.token {
        if matches!(opts.rv, Rv::At(_)) {
            return Err(ApiError::bad_request("specifying resource version is not allowed when using continue".into()));
        }
        let (rv, start) = decode_continue(token)?;
        if rv > current {
            return Err(too_large(rv));
        }
        if rv < store.compacted() {
            let mut status = ApiError::expired(CONTINUE_EXPIRED.into());
            let restart = start.trim_end_matches('\u{0}');
            status.body["metadata"] = json!({ "continue": encode_continue(current, restart) });
            return Err(status);
        }
        (rv, Some(start), opts.page.limit)
    } else {
        match (opts.rv, opts.rv_match) {
            // "0": whatever the watch cache holds, which pages nothing.
            (Rv::Any, _) => (current, None, None),
            (Rv::Unset, _) => (current, None, opts.page.limit),
            (Rv::At(rv), _) if rv > current => return Err(too_large(rv)),
            // Exact, or a limit with no match given (the legacy paging semantics): that snapshot.
            (Rv::At(rv), Some(RvMatch::Exact)) | (Rv::At(rv), None)
                if opts.page.limit.is_some() || opts.rv_match.is_some() =>
            {
                if rv < store.compacted() {
                    return Err(ApiError::expired(LIST_EXPIRED.into()));
                }
                (rv, None, opts.page.limit)
            }
            // NotOlderThan: the newest data is not older.
            (Rv::At(_), _) => (current, None, opts.page.limit),
        }
    };
    let objects = store.at(view.kind(), snapshot).ok_or_else(|| ApiError::expired(LIST_EXPIRED.into()))?;
    let across = namespace.is_none();
    let mut matching: Vec<(String, Value)> = objects
        .into_values()
        .filter(|o| namespace.is_none_or(|ns| crate::store::key_of(o).0 == ns))
        .map(|o| view.to_view(&o))
        .filter(|o| opts.selectors.matches(view, o))
        .map(|o| (list_key(&o, across), o))
        .filter(|(key, _)| start.as_deref().is_none_or(|s| key.as_str() >= s))
        .collect();
    matching.sort_by(|a, b| a.0.cmp(&b.0));
    let mut metadata = json!({ "resourceVersion": snapshot.to_string() });
    if let Some(limit) = limit.and_then(|l| usize::try_from(l).ok()) {
        if matching.len() > limit {
            let remaining = matching.len() - limit;
            matching.truncate(limit);
            if let Some((last, _)) = matching.last() {
                metadata["continue"] = json!(encode_continue(snapshot, last));
            }
            if opts.selectors.is_empty() {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
    }
    let items: Vec<Value> = matching
        .into_iter()
        .map(|(_, mut o)| {
            if metadata_only {
                return crate::resource::partial(&o);
            }
            if view.items_typed() {
                if let Some(m) = o.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
            }
            o
        })
        .collect();
    let (api_version, kind) = if metadata_only {
        ("meta.k8s.io/v1", "PartialObjectMetadataList".to_string())
    } else {
        (view.api_version(), view.list_kind())
    };
    Ok(json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "items": items,
    }))
}

#[cfg(test)]
mod tests {
    use super::{decode_continue, encode_continue};

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "a/b");
        assert_eq!(decode_continue(&token).unwrap(), (42, "a/b\u{0}".to_string()));
        assert_eq!(decode_continue("not base64!").unwrap_err().code, 400);
    }
}
