//! Errors as the API server writes them: a `Status` object (kind `Status`, apiVersion `v1`) with
//! the HTTP code repeated in `code` and a machine-readable `reason`
//! (k8s.io/apimachinery/pkg/api/errors; clients such as kube-rs deserialize the body into their
//! `Status` type and branch on `code`, e.g. 410 means relist).

use crate::resource::View;
use serde_json::{json, Value};

/// An answer other than success: the HTTP status and the `Status` object sent as its body.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub code: u16,
    pub body: Value,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: String, details: Option<Value>) -> Self {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        });
        if let Some(details) = details {
            body["details"] = details;
        }
        ApiError { code, body }
    }

    /// The `details` an object error carries: the name, and the resource's group and plural
    /// (the apiserver puts the plural in `kind`).
    fn object_details(view: View, name: &str) -> Value {
        let mut details = json!({ "name": name, "kind": view.plural() });
        if !view.group().is_empty() {
            details["group"] = json!(view.group());
        }
        details
    }

    /// 404 for a named object: `pods "x" not found`.
    pub fn not_found(view: View, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", view.qualified_resource());
        Self::new(404, "NotFound", message, Some(Self::object_details(view, name)))
    }

    /// 404 for a path the server does not serve.
    pub fn no_such_resource() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource".into(), Some(json!({})))
    }

    /// 409 for a create whose name is taken.
    pub fn already_exists(view: View, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", view.qualified_resource());
        Self::new(409, "AlreadyExists", message, Some(Self::object_details(view, name)))
    }

    /// 409 for a write whose precondition (resourceVersion, uid) no longer holds.
    pub fn conflict(view: View, name: &str, why: &str) -> Self {
        let message = format!("Operation cannot be fulfilled on {} \"{name}\": {why}", view.qualified_resource());
        Self::new(409, "Conflict", message, Some(Self::object_details(view, name)))
    }

    /// 410 Expired: the resourceVersion asked for has been compacted away.
    pub fn expired(message: String) -> Self {
        Self::new(410, "Expired", message, None)
    }

    /// 400.
    pub fn bad_request(message: String) -> Self {
        Self::new(400, "BadRequest", message, None)
    }

    /// 422 for fields that fail validation, in the shape of an aggregated `field.ErrorList`:
    /// `Kind.group "name" is invalid: <error>`, or `[<error>, <error>]` for several.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let all: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.field, e.body())).collect();
        let listed = if all.len() == 1 { all.concat() } else { format!("[{}]", all.join(", ")) };
        let message = format!("{qualified} \"{name}\" is invalid: {listed}");
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({ "reason": e.kind.reason(), "message": e.body(), "field": e.field }))
            .collect();
        let mut details = json!({ "name": name, "kind": kind, "causes": causes });
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        Self::new(422, "Invalid", message, Some(details))
    }

    /// 401, as the apiserver answers a request no authenticator accepted.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized".into(), None)
    }

    /// 405 for a verb the resource does not offer here.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
            None,
        )
    }

    /// 415 for a body type the endpoint does not take.
    pub fn unsupported_media_type(message: String) -> Self {
        Self::new(415, "UnsupportedMediaType", message, None)
    }

    /// 504 for a resourceVersion newer than the store's (the apiserver's watch cache answers so
    /// after waiting 3 s for it; the stand-in's store is the source of truth, so it cannot come).
    pub fn too_large_resource_version(asked: u64, current: u64) -> Self {
        let message = format!("Timeout: Too large resource version: {asked}, current: {current}");
        let details = json!({
            "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
            "retryAfterSeconds": 1,
        });
        Self::new(504, "Timeout", message, Some(details))
    }
}

/// The kind of a field error (k8s.io/apimachinery/pkg/util/validation/field).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldErrorKind {
    Required,
    Forbidden,
    /// The value, printed.
    Invalid(String),
    /// The value, printed.
    NotSupported(String),
}

impl FieldErrorKind {
    fn reason(&self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Invalid(_) => "FieldValueInvalid",
            FieldErrorKind::NotSupported(_) => "FieldValueNotSupported",
        }
    }
}

/// One field that failed validation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    pub field: String,
    pub kind: FieldErrorKind,
    pub detail: String,
}

impl FieldError {
    pub fn new(field: &str, kind: FieldErrorKind, detail: impl Into<String>) -> Self {
        FieldError { field: field.to_string(), kind, detail: detail.into() }
    }

    /// field.Error.ErrorBody: the type, the value where it has one, the detail.
    fn body(&self) -> String {
        let head = match &self.kind {
            FieldErrorKind::Required => "Required value".to_string(),
            FieldErrorKind::Forbidden => "Forbidden".to_string(),
            FieldErrorKind::Invalid(value) => format!("Invalid value: {value}"),
            FieldErrorKind::NotSupported(value) => format!("Unsupported value: {value}"),
        };
        if self.detail.is_empty() {
            head
        } else {
            format!("{head}: {}", self.detail)
        }
    }
}
