//! `labelSelector` and `fieldSelector`, honoured on lists and watches as the apiserver honours
//! them (k8s.io/apimachinery/pkg/labels and pkg/fields): equality, inequality, set-based
//! (`in`, `notin`, exists, `!`) and numeric (`>`, `<`) label requirements; `=`, `==`, `!=` on the
//! fields the resource lists as selectable, any other field refused with 400.

use crate::resource::View;
use crate::status::ApiError;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Label {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Greater(String, i64),
    Less(String, i64),
}

/// A parsed `labelSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<Label>);

/// A parsed `fieldSelector`: (field, wanted value, equal?) terms, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<(String, String, bool)>);

/// A request's `labelSelector` and `fieldSelector`: an object is listed or watched when it
/// meets both, and a list with either set counts no `remainingItemCount` (the apiserver cannot
/// know it without reading every object).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selectors {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selectors {
    pub fn parse(labels: &str, fields: &str, view: View) -> Result<Self, ApiError> {
        Ok(Selectors { labels: LabelSelector::parse(labels)?, fields: FieldSelector::parse(fields, view)? })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether `object`, in the form `view` serves it, meets both selectors.
    pub fn matches(&self, view: View, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(view, object)
    }
}

/// Splits at commas outside parentheses.
fn terms(selector: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&selector[start..]);
    out
}

fn parse_error(term: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why} in '{}'", term.trim()))
}

fn label_key(key: &str, term: &str) -> Result<String, ApiError> {
    let key = key.trim();
    let ok = !key.is_empty()
        && key.len() <= 317
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(parse_error(term, &format!("invalid label key \"{key}\"")))
    }
}

fn set_values(rest: &str, term: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| parse_error(term, "expected a parenthesised set of values"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if selector.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for term in terms(selector) {
            let t = term.trim();
            let req = if let Some(key) = t.strip_prefix('!') {
                Label::NotExists(label_key(key, term)?)
            } else if let Some((key, rest)) = t.split_once(" notin ") {
                Label::NotIn(label_key(key, term)?, set_values(rest, term)?)
            } else if let Some((key, rest)) = t.split_once(" in ") {
                Label::In(label_key(key, term)?, set_values(rest, term)?)
            } else if let Some((key, value)) = t.split_once("!=") {
                Label::NotEquals(label_key(key, term)?, value.trim().to_string())
            } else if let Some((key, value)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Label::Equals(label_key(key, term)?, value.trim().to_string())
            } else if let Some((key, value)) = t.split_once('>') {
                let n = value.trim().parse().map_err(|_| parse_error(term, "expected an integer after '>'"))?;
                Label::Greater(label_key(key, term)?, n)
            } else if let Some((key, value)) = t.split_once('<') {
                let n = value.trim().parse().map_err(|_| parse_error(term, "expected an integer after '<'"))?;
                Label::Less(label_key(key, term)?, n)
            } else {
                Label::Exists(label_key(t, term)?)
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        let number = |key: &str| get(key).and_then(|v| v.parse::<i64>().ok());
        self.0.iter().all(|req| match req {
            Label::Exists(k) => get(k).is_some(),
            Label::NotExists(k) => get(k).is_none(),
            Label::Equals(k, v) => get(k) == Some(v.as_str()),
            Label::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Label::In(k, vs) => get(k).is_some_and(|have| vs.iter().any(|v| v == have)),
            Label::NotIn(k, vs) => get(k).is_none_or(|have| vs.iter().all(|v| v != have)),
            Label::Greater(k, n) => number(k).is_some_and(|have| have > *n),
            Label::Less(k, n) => number(k).is_some_and(|have| have < *n),
        })
    }
}

/// Undoes the selector escapes `\\`, `\,` and `\=` (fields.EscapeValue).
fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits at commas not escaped with a backslash.
fn field_terms(selector: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut escaped = false;
    for c in selector.chars() {
        if escaped {
            if let Some(last) = out.last_mut() {
                last.push('\\');
                last.push(c);
            }
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

impl FieldSelector {
    pub fn parse(selector: &str, view: View) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if selector.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for term in field_terms(selector) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{selector}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !view.selectable_fields().contains(&field) {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            reqs.push((field.to_string(), unescape(value), equal));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `object` is in `view`'s form (the field names of the group asked through).
    pub fn matches(&self, view: View, object: &Value) -> bool {
        self.0.iter().all(|(field, want, equal)| (view.field_value(object, field) == *want) == *equal)
    }
}

#[cfg(test)]
mod tests {
    use super::{FieldSelector, LabelSelector};
    use crate::resource::View;
    use serde_json::json;

    #[test]
    fn label_requirements() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front", "n": "5"}}});
        let yes = [
            "",
            "app",
            "app=web",
            "app==web",
            "app!=db",
            "!missing",
            "app in (db, web)",
            "missing notin (x)",
            "tier notin (back)",
            "n>3",
            "n<6",
            "app=web,tier=front",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
        }
        let no =
            ["missing", "app=db", "app!=web", "!app", "app in (db)", "app notin (web,db)", "n>5", "app=web,tier=back"];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
        }
        assert_eq!(LabelSelector::parse("a in b").unwrap_err().code, 400);
        assert_eq!(LabelSelector::parse("a b=c").unwrap_err().code, 400);
    }

    #[test]
    fn field_requirements() {
        let pod = json!({"metadata": {"name": "p", "namespace": "a"}, "spec": {"nodeName": "n1"}});
        let sel = |s| FieldSelector::parse(s, View::Pod).unwrap();
        assert!(sel("spec.nodeName=n1").matches(View::Pod, &pod));
        assert!(sel("spec.nodeName==n1,metadata.namespace=a").matches(View::Pod, &pod));
        assert!(!sel("spec.nodeName=n2").matches(View::Pod, &pod));
        assert!(sel("spec.nodeName!=n2").matches(View::Pod, &pod));
        assert!(sel("status.podIP=").matches(View::Pod, &pod));
        let err = FieldSelector::parse("spec.containers=x", View::Pod).unwrap_err();
        assert_eq!(err.body["message"], "field label not supported: spec.containers");
        assert!(FieldSelector::parse("spec.nodeName=n1", View::Nad).is_err());
        assert!(FieldSelector::parse("nonsense", View::Pod).is_err());
        let escaped = json!({"metadata": {"name": "a,b"}});
        assert!(FieldSelector::parse("metadata.name=a\\,b", View::Pod).unwrap().matches(View::Pod, &escaped));
    }
}
