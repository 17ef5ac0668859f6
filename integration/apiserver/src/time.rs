//! Timestamps as Kubernetes writes `metadata.creationTimestamp`: RFC 3339, UTC, whole seconds
//! (metav1.Time's JSON form). jiff is the date library k8s-openapi already brings.

use jiff::Timestamp;

/// Now, as `2006-01-02T15:04:05Z`.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(Timestamp::now().as_second())
}

fn rfc3339(secs: i64) -> String {
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH).to_string()
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
