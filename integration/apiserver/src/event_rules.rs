//! Validation of events as the apiserver does it (kubernetes/pkg/apis/core/validation/events.go):
//! every event passes the legacy rules (the involved object's namespace; for events with an
//! `eventTime`, the reporting fields); an event created or updated through `events.k8s.io/v1`
//! passes the strict ones too. Checked on the stored (`v1`) form, so field paths name `v1`
//! fields, as the apiserver's (which validates its internal type) do.

use crate::status::{FieldError, FieldErrorKind};
use serde_json::Value;

fn text<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// A timestamp or other field that is present and not empty.
fn set(event: &Value, pointer: &str) -> bool {
    match event.pointer(pointer) {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_i64() != Some(0),
        Some(_) => true,
    }
}

fn quoted(value: &str) -> String {
    Value::String(value.to_string()).to_string()
}

fn invalid(field: &str, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError::new(field, FieldErrorKind::Invalid(quoted(value)), detail)
}

fn required(field: &str) -> FieldError {
    FieldError::new(field, FieldErrorKind::Required, "")
}

const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_dns_subdomain(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.starts_with(alnum)
                && label.ends_with(alnum)
                && label.chars().all(|c| alnum(c) || c == '-')
        })
}

/// validation.IsQualifiedName: `[prefix/]name`, the name part 1–63 characters.
fn qualified_name_errors(value: &str) -> Option<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if let Some(prefix) = prefix {
        if !is_dns_subdomain(prefix) {
            return Some(format!("prefix part {DNS_SUBDOMAIN}"));
        }
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if name.is_empty() {
        Some("name part must be non-empty".into())
    } else if name.len() > 63 {
        Some("name part must be no more than 63 characters".into())
    } else if !(name.starts_with(alnum) && name.ends_with(alnum) && name.chars().all(|c| alnum(c) || "-_.".contains(c)))
    {
        Some(QUALIFIED_NAME.into())
    } else {
        None
    }
}

fn limit(errors: &mut Vec<FieldError>, event: &Value, field: &str, max: usize) {
    if text(event, &format!("/{field}")).len() > max {
        errors.push(invalid(field, "", format!("can have at most {max} characters")));
    }
}

/// legacyValidateEvent.
fn legacy(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ns = text(event, "/metadata/namespace");
    let involved_ns = text(event, "/involvedObject/namespace");
    let mismatch = || invalid("involvedObject.namespace", involved_ns, "does not match event.namespace");
    if !set(event, "/eventTime") {
        if (involved_ns.is_empty() && !ns.is_empty() && ns != "default")
            || (!involved_ns.is_empty() && ns != involved_ns)
        {
            errors.push(mismatch());
        }
        return errors;
    }
    if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
        errors.push(mismatch());
    }
    let controller = text(event, "/reportingComponent");
    if controller.is_empty() {
        errors.push(required("reportingController"));
    }
    if let Some(why) = qualified_name_errors(controller) {
        errors.push(invalid("reportingController", controller, why));
    }
    for (field, max) in [("reportingInstance", 128), ("action", 128), ("reason", 128)] {
        if text(event, &format!("/{field}")).is_empty() {
            errors.push(required(field));
        }
        limit(&mut errors, event, field, max);
    }
    limit(&mut errors, event, "message", 1024);
    errors
}

/// validateV1EventSeries.
fn series(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if set(event, "/series") {
        if event.pointer("/series/count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errors.push(invalid("series.count", "", "should be at least 2"));
        }
        if !set(event, "/series/lastObservedTime") {
            errors.push(required("series.lastObservedTime"));
        }
    }
    errors
}

/// ValidateEventCreate; `strict` for a create through `events.k8s.io/v1`.
pub(crate) fn validate_create(event: &Value, strict: bool) -> Vec<FieldError> {
    let mut errors = legacy(event);
    if !strict {
        return errors;
    }
    let name = text(event, "/metadata/name");
    if !is_dns_subdomain(name) {
        errors.push(invalid("metadata.name", name, DNS_SUBDOMAIN));
    }
    errors.extend(series(event));
    if !set(event, "/eventTime") {
        errors.push(required("eventTime"));
    }
    let typ = text(event, "/type");
    if typ != "Normal" && typ != "Warning" {
        errors.push(invalid("type", "", format!("has invalid value: {typ}")));
    }
    for field in ["firstTimestamp", "lastTimestamp", "count"] {
        if set(event, &format!("/{field}")) {
            errors.push(invalid(field, "", "needs to be unset"));
        }
    }
    if set(event, "/source/component") || set(event, "/source/host") {
        errors.push(invalid("source", "", "needs to be unset"));
    }
    errors
}

/// ValidateEventUpdate; `strict` for an update through `events.k8s.io/v1`.
pub(crate) fn validate_update(new: &Value, old: &Value, strict: bool) -> Vec<FieldError> {
    let mut errors = legacy(new);
    if !strict {
        return errors;
    }
    if new.get("series") != old.get("series") {
        errors.extend(series(new));
    }
    let immutable = [
        ("involvedObject", "involvedObject"),
        ("reason", "reason"),
        ("message", "message"),
        ("source", "source"),
        ("firstTimestamp", "firstTimestamp"),
        ("lastTimestamp", "lastTimestamp"),
        ("count", "count"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("action", "action"),
        ("related", "related"),
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
    ];
    for (stored, field) in immutable {
        let value = new.get(stored).unwrap_or(&Value::Null);
        if value != old.get(stored).unwrap_or(&Value::Null) {
            errors.push(FieldError::new(field, FieldErrorKind::Invalid(value.to_string()), "field is immutable"));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::{qualified_name_errors, validate_create, validate_update};
    use serde_json::json;

    fn fields(errors: &[crate::status::FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn legacy_events_need_matching_namespaces() {
        let ok = json!({"metadata": {"name": "e", "namespace": "a"}, "involvedObject": {"namespace": "a"}});
        assert!(validate_create(&ok, false).is_empty());
        let other = json!({"metadata": {"name": "e", "namespace": "a"}, "involvedObject": {"namespace": "b"}});
        assert_eq!(fields(&validate_create(&other, false)), ["involvedObject.namespace"]);
        let cluster = json!({"metadata": {"name": "e", "namespace": "default"}, "involvedObject": {"kind": "Node"}});
        assert!(validate_create(&cluster, false).is_empty());
    }

    #[test]
    fn strict_events_need_the_reporting_fields() {
        let full = json!({
            "metadata": {"name": "p.1", "namespace": "a"}, "involvedObject": {"namespace": "a"},
            "eventTime": "2024-01-01T00:00:00.000000Z", "reportingComponent": "braid-install",
            "reportingInstance": "node-1", "action": "Patch", "reason": "R", "type": "Normal",
        });
        assert!(validate_create(&full, true).is_empty());
        let bare =
            json!({"metadata": {"name": "P_1", "namespace": "a"}, "involvedObject": {"namespace": "a"}, "count": 3});
        assert_eq!(fields(&validate_create(&bare, true)), ["metadata.name", "eventTime", "type", "count"]);
        let mut later = full.clone();
        later["series"] = json!({"count": 2, "lastObservedTime": "2024-01-01T00:00:01.000000Z"});
        assert!(validate_update(&later, &full, true).is_empty());
        later["reason"] = json!("Other");
        assert_eq!(fields(&validate_update(&later, &full, true)), ["reason"]);
        assert!(validate_update(&later, &full, false).is_empty());
    }

    #[test]
    fn qualified_names() {
        for ok in ["braid-install", "k8s.io/braid", "A.b_c"] {
            assert_eq!(qualified_name_errors(ok), None, "{ok}");
        }
        for bad in ["", "-x", "a b", "Bad_Prefix/x"] {
            assert!(qualified_name_errors(bad).is_some(), "{bad}");
        }
    }
}
