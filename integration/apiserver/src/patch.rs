//! JSON merge patch (RFC 7386), the body of `application/merge-patch+json`, and the subset of
//! strategic merge patch for which the two agree.

use serde_json::{Map, Value};

/// Applies `patch` to `target` as RFC 7386 says: an object merges key by key, `null` deletes
/// the key, anything else (arrays included) replaces the value whole.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Why a strategic merge patch cannot be applied as a JSON merge patch: strategic merge differs
/// only for lists (merged by key, e.g. containers by `name`) and `$`-directives, and the
/// stand-in implements neither, so it refuses them rather than apply them differently.
pub(crate) fn strategic_unsupported(patch: &Value, path: &str) -> Option<String> {
    match patch {
        Value::Array(_) => Some(format!("the list at {path}")),
        Value::Object(map) => map.iter().find_map(|(key, value)| {
            let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            if key.starts_with('$') {
                Some(format!("the directive {here}"))
            } else {
                strategic_unsupported(value, &here)
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{merge, strategic_unsupported};
    use serde_json::json;

    /// The examples of RFC 7386 appendix A.
    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (json!({"a":"b","b":"c"}), json!({"a":null}), json!({"b":"c"})),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (json!({"a":{"b":"c"}}), json!({"a":{"b":"d","c":null}}), json!({"a":{"b":"d"}})),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (json!({}), json!({"a":{"bb":{"ccc":null}}}), json!({"a":{"bb":{}}})),
        ];
        for (mut target, patch, want) in cases {
            merge(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn strategic_refuses_lists_and_directives() {
        assert_eq!(strategic_unsupported(&json!({"metadata":{"annotations":{"a":"b","c":null}}}), ""), None);
        assert_eq!(
            strategic_unsupported(&json!({"metadata":{"finalizers":["x"]}}), "").as_deref(),
            Some("the list at metadata.finalizers")
        );
        assert_eq!(
            strategic_unsupported(&json!({"metadata":{"$patch":"replace"}}), "").as_deref(),
            Some("the directive metadata.$patch")
        );
    }
}
