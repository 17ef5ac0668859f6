//! The query parameters of list and watch requests (metav1.ListOptions), parsed and checked as
//! the apiserver checks them before it reads the store.

use crate::resource::View;
use crate::select::{FieldSelector, LabelSelector};
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

pub(crate) struct ListOptions {
    pub watch: bool,
    pub rv: Rv,
    pub rv_match: Option<RvMatch>,
    pub limit: Option<u64>,
    pub continue_token: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub bookmarks: bool,
    pub timeout_seconds: Option<u64>,
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

impl ListOptions {
    pub fn parse(query: &Query, view: View) -> Result<Self, ApiError> {
        let watch = query.bool("watch")?.unwrap_or(false);
        let rv = parse_rv(query.get("resourceVersion"))?;
        let rv_match = match query.get("resourceVersionMatch") {
            None => None,
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            Some(other) => {
                return Err(ApiError::invalid_list_options(FieldError::new(
                    "resourceVersionMatch",
                    FieldErrorKind::NotSupported(format!("\"{other}\"")),
                    "supported values: \"Exact\", \"NotOlderThan\"",
                )))
            }
        };
        let limit = query.number("limit")?.filter(|l| *l > 0).map(i64::unsigned_abs);
        let timeout_seconds = query.number("timeoutSeconds")?.filter(|t| *t > 0).map(i64::unsigned_abs);
        let options = ListOptions {
            watch,
            rv,
            rv_match,
            limit,
            continue_token: query.get("continue").map(String::from),
            labels: LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or_default(), view)?,
            bookmarks: query.bool("allowWatchBookmarks")?.unwrap_or(false),
            timeout_seconds,
            send_initial_events: query.bool("sendInitialEvents")?,
        };
        options.validate()?;
        Ok(options)
    }

    /// metainternalversion validation.ValidateListOptions.
    fn validate(&self) -> Result<(), ApiError> {
        let forbidden = |field: &str, detail: &str| {
            Err(ApiError::invalid_list_options(FieldError::new(field, FieldErrorKind::Forbidden, detail)))
        };
        if let Some(send) = self.send_initial_events {
            if !self.watch {
                return forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list");
            }
            if self.rv_match != Some(RvMatch::NotOlderThan) {
                let given = match self.rv_match {
                    None => "\"\"",
                    Some(RvMatch::Exact) => "\"Exact\"",
                    Some(RvMatch::NotOlderThan) => "\"NotOlderThan\"",
                };
                return Err(ApiError::invalid_list_options(FieldError::new(
                    "resourceVersionMatch",
                    FieldErrorKind::NotSupported(given.into()),
                    "supported values: \"NotOlderThan\" (sendInitialEvents requires setting resourceVersionMatch)",
                )));
            }
            if send && !self.bookmarks {
                return forbidden(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks must be true when sendInitialEvents is true",
                );
            }
            return Ok(());
        }
        if self.watch {
            if self.rv_match.is_some() {
                return forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                );
            }
            return Ok(());
        }
        match (self.rv_match, self.rv) {
            (Some(_), Rv::Unset) => forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ),
            (Some(RvMatch::Exact), Rv::Any) => forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ),
            (Some(_), _) if self.continue_token.is_some() => {
                forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
            }
            _ => Ok(()),
        }
    }
}
