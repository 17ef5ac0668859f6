//! Every request the agent makes, bounded and counted: kube's client sets no read timeout
//! (`kube::Config::read_timeout` is `None` by default, so that exec and attach sessions live),
//! and an API server that accepts a request and never answers would hold its caller forever —
//! one such pod patch used to stop network-status for the whole node. Each call is wrapped in
//! `tokio::time::timeout(--api-timeout)` and counted in `braid_install_api_requests_total` by
//! verb, resource and outcome.

use super::Agent;
use crate::metrics::Verb;
use std::future::Future;
use std::time::Duration;

/// Why a request did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// No answer within `--api-timeout`; the request was abandoned (its connection dropped).
    #[error("no answer within {} s (--api-timeout)", .0.as_secs())]
    Timeout(Duration),
    /// The API server's error answer, or no HTTP answer at all.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl Failure {
    /// The API server's HTTP status code, when it answered with an error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Failure::Api(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }

    /// Whether the API server refused a patch because its `metadata.uid` is not the object's:
    /// 422 Invalid naming that field (the pod of that name is another pod now).
    pub fn is_uid_refused(&self) -> bool {
        match self {
            Failure::Api(kube::Error::Api(s)) => s.code == 422 && s.message.contains("metadata.uid"),
            _ => false,
        }
    }

    /// Whether a retry may help: no answer, a server error, 408 or 429. Any other 4xx is the
    /// API server's last word on this request.
    pub fn retryable(&self) -> bool {
        self.code().is_none_or(|c| !(400..500).contains(&c) || c == 408 || c == 429)
    }

    /// The outcome label of `braid_install_api_requests_total`.
    fn outcome(&self) -> String {
        match (self, self.code()) {
            (_, Some(code)) => code.to_string(),
            (Failure::Timeout(_), None) => "timeout".into(),
            (Failure::Api(_), None) => "error".into(),
        }
    }
}

/// Runs one request of `agent`'s, bounded by its `--api-timeout`, and counts it.
pub async fn call<T>(
    agent: &Agent,
    verb: Verb,
    resource: &'static str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, Failure> {
    let result = match tokio::time::timeout(agent.api_timeout, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Failure::Api(e)),
        Err(_) => Err(Failure::Timeout(agent.api_timeout)),
    };
    let outcome = match &result {
        Ok(_) => "ok".to_string(),
        Err(f) => f.outcome(),
    };
    agent.metrics.api(verb, resource, outcome);
    result
}
