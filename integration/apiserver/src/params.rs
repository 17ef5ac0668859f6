//! The query parameters of list and watch requests (metav1.ListOptions), parsed and checked as
//! the apiserver checks them before it reads the store.

use crate::resource::View;
use crate::select::Selectors;
use crate::status::{ApiError, FieldError, FieldErrorKind};

/// A decoded query string.
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: &str) -> Self {
        Query(form_urlencoded::parse(raw.as_bytes()).into_owned().collect())
    }

    /// The first value of `key`; an empty value counts as absent, as in Go's url.Values.Get
    /// read by the apiserver's parameter codec.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }

    /// A boolean as Go's strconv.ParseBool reads it; anything else is a 400.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
            Some(other) => Err(ApiError::bad_request(format!(
                "strconv.ParseBool: parsing \"{other}\": invalid syntax (query parameter {key})"
            ))),
        }
    }

    fn number(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "strconv.ParseInt: parsing \"{v}\": invalid syntax (query parameter {key})"
                    ))
                })
            })
            .transpose()
    }
}

/// How a list or watch asks for a resourceVersion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rv {
    /// Absent: the most recent (a consistent read).
    Unset,
    /// `"0"`: any version the server has at hand.
    Any,
    At(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RvMatch {
    NotOlderThan,
    Exact,
}

/// A list or watch request's options, checked.
pub(crate) struct ListOptions {
    /// `resourceVersion`, and `resourceVersionMatch` saying how a list reads it.
    pub rv: Rv,
    pub rv_match: Option<RvMatch>,
    /// `limit` and `continue`.
    pub page: Page,
    /// `labelSelector` and `fieldSelector`.
    pub selectors: Selectors,
    /// `watch`: a stream of changes instead of one list, and what only a watch reads.
    pub watch: Option<WatchOptions>,
}

/// A list served in pages, each continuing at the first one's snapshot.
pub(crate) struct Page {
    /// `limit`: at most this many objects a page.
    pub limit: Option<u64>,
    /// `continue`: the token the previous page ended with.
    pub token: Option<String>,
}

/// What only a watch reads.
pub(crate) struct WatchOptions {
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `timeoutSeconds`; the server's default when absent.
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents`: the state first, as ADDED events, then (to a client that takes
    /// them) a bookmark.
    pub send_initial_events: Option<bool>,
}

/// Parses a resourceVersion as the apiserver's versioner does.
pub(crate) fn parse_rv(raw: Option<&str>) -> Result<Rv, ApiError> {
    match raw {
        None => Ok(Rv::Unset),
        Some("0") => Ok(Rv::Any),
        Some(v) => v.parse::<u64>().map(Rv::At).map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resource version: strconv.ParseUint: parsing \"{v}\": invalid syntax"
            ))
        }),
    }
}

/// field.NotSupported's detail: the supported values, quoted.
fn supported(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    format!("supported values: {}", quoted.join(", "))
}

impl ListOptions {
    pub fn parse(query: &Query, view: View) -> Result<Self, ApiError> {
        // Decoding first (a 400 for a malformed value), then validation (422), then the
        // resourceVersion, which the storage parses (400).
        let watch = query.bool("watch")?.unwrap_or(false);
        let limit = query.number("limit")?.filter(|l| *l > 0).map(i64::unsigned_abs);
        let timeout_seconds = query.number("timeoutSeconds")?.filter(|t| *t > 0).map(i64::unsigned_abs);
        let bookmarks = query.bool("allowWatchBookmarks")?.unwrap_or(false);
        let send_initial_events = query.bool("sendInitialEvents")?;
        let raw_rv = query.get("resourceVersion");
        let raw_match = query.get("resourceVersionMatch");
        let continue_token = query.get("continue").map(String::from);
        let errors = if watch {
            watch_errors(raw_match, send_initial_events, continue_token.is_some())
        } else {
            list_errors(raw_rv, raw_match, send_initial_events, continue_token.is_some())
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", &errors));
        }
        let rv_match = match raw_match {
            Some("Exact") => Some(RvMatch::Exact),
            Some(_) => Some(RvMatch::NotOlderThan),
            None => None,
        };
        Ok(ListOptions {
            watch: watch.then_some(WatchOptions { bookmarks, timeout_seconds, send_initial_events }),
            rv: parse_rv(raw_rv)?,
            rv_match,
            page: Page { limit, token: continue_token },
            selectors: Selectors::parse(
                query.get("labelSelector").unwrap_or_default(),
                query.get("fieldSelector").unwrap_or_default(),
                view,
            )?,
        })
    }
}

fn forbidden(field: &str, detail: &str) -> FieldError {
    FieldError::new(field, FieldErrorKind::Forbidden, detail)
}

/// ValidateListOptions for a list (metainternalversion/validation).
fn list_errors(rv: Option<&str>, rv_match: Option<&str>, send_initial: Option<bool>, cont: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(m) = rv_match {
        let field = "resourceVersionMatch";
        if rv.is_none() {
            errors.push(forbidden(field, "resourceVersionMatch is forbidden unless resourceVersion is provided"));
        }
        if cont {
            errors.push(forbidden(field, "resourceVersionMatch is forbidden when continue is provided"));
        }
        if m != "Exact" && m != "NotOlderThan" {
            let kind = FieldErrorKind::NotSupported(format!("\"{m}\""));
            errors.push(FieldError::new(field, kind, supported(&["Exact", "NotOlderThan", ""])));
        }
        if m == "Exact" && rv == Some("0") {
            errors.push(forbidden(field, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
        }
    }
    if send_initial.is_some() {
        errors.push(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    errors
}

/// validateWatchOptions (the WatchList feature on, as kube-runtime's streaming lists need).
fn watch_errors(rv_match: Option<&str>, send_initial: Option<bool>, cont: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let field = "resourceVersionMatch";
    if send_initial.is_some() && rv_match != Some("NotOlderThan") {
        errors.push(forbidden(field, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    if let Some(m) = rv_match {
        if send_initial.is_none() {
            errors.push(forbidden(
                field,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if m != "NotOlderThan" {
            let kind = FieldErrorKind::NotSupported(format!("\"{m}\""));
            errors.push(FieldError::new(field, kind, supported(&["NotOlderThan"])));
        }
        if cont {
            errors.push(forbidden(field, "resourceVersionMatch is forbidden when continue is provided"));
        }
    }
    errors
}
