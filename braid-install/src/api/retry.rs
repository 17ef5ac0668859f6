//! When hot-plug tries a pod's update again: a failed update is not the pod's last word. A
//! delegate out of addresses (code 11, "try again later"), an update killed at its time limit,
//! a NetworkAttachmentDefinition that does not exist yet — each may pass later, and a sandbox
//! an update left part-way (its status file `unsettled`) must be brought to the annotation even
//! if the user never edits it again. So every failure is retried, on a backoff of its pod's own
//! (1 s doubling to 5 min), and an edit of the annotation is tried at once whatever the backoff.
//! Only the first failure of an annotation (or one with other words) is reported as an Event,
//! so that a pod whose update keeps failing does not flood its Events.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// First and last retry delay.
pub const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));

/// One pod's failed update.
#[derive(Debug, Clone, PartialEq)]
struct Failed {
    /// The annotation it tried.
    networks: Option<String>,
    /// How many times in a row it failed.
    attempts: u32,
    /// When it may run again.
    at: Instant,
    /// Why it last failed.
    why: String,
}

/// The failed updates, by pod UID.
#[derive(Debug, Default)]
pub struct Retries {
    failed: BTreeMap<String, Failed>,
}

impl Retries {
    /// Whether an update of pod `uid` to `networks` may start at `now`: at once for an
    /// annotation that did not fail, after its backoff for one that did.
    pub fn due(&self, uid: &str, networks: &Option<String>, now: Instant) -> bool {
        match self.failed.get(uid) {
            Some(f) if f.networks == *networks => f.at <= now,
            _ => true,
        }
    }

    /// Records that the update of `uid` to `networks` failed at `now` for `why`; whether that
    /// is news (the first failure of this annotation, or other words than the last time).
    pub fn failed(&mut self, uid: &str, networks: Option<String>, why: &str, now: Instant) -> bool {
        let (attempts, news) = match self.failed.get(uid) {
            Some(f) if f.networks == networks => (f.attempts.saturating_add(1), f.why != why),
            _ => (1, true),
        };
        let delay = BACKOFF.0.saturating_mul(1 << (attempts - 1).min(16)).min(BACKOFF.1);
        self.failed.insert(uid.to_string(), Failed { networks, attempts, at: now + delay, why: why.to_string() });
        news
    }

    /// The update of `uid` succeeded (or its pod is gone): nothing to retry.
    pub fn forget(&mut self, uid: &str) {
        self.failed.remove(uid);
    }

    /// The UIDs whose retry is due at `now`.
    pub fn due_now(&self, now: Instant) -> Vec<String> {
        self.failed.iter().filter(|(_, f)| f.at <= now).map(|(u, _)| u.clone()).collect()
    }

    /// When the next retry is due.
    pub fn next(&self) -> Option<Instant> {
        self.failed.values().map(|f| f.at).min()
    }

    /// Drops the entries of pods not in `uids` (gone while the watch was away).
    pub fn retain(&mut self, uids: &std::collections::BTreeSet<String>) {
        self.failed.retain(|u, _| uids.contains(u));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// Code 11 and a killed update fail the same way: retried, each time later, up to the cap.
    #[test]
    fn a_failure_is_retried_with_a_backoff_that_doubles_up_to_its_cap() {
        let t0 = Instant::now();
        let mut r = Retries::default();
        assert!(r.due("u", &some("red"), t0), "never failed: at once");
        assert!(r.failed("u", some("red"), "no room on this node (code 11)", t0));
        assert!(!r.due("u", &some("red"), t0), "not again at once");
        assert!(r.due("u", &some("red"), t0 + BACKOFF.0));
        assert_eq!(r.due_now(t0 + BACKOFF.0), ["u"]);
        assert_eq!(r.next(), Some(t0 + BACKOFF.0));
        // The same words again: no new Event, twice the wait.
        assert!(!r.failed("u", some("red"), "no room on this node (code 11)", t0));
        assert_eq!(r.next(), Some(t0 + BACKOFF.0 * 2));
        for _ in 0..30 {
            r.failed("u", some("red"), "the update did not end within 300 s and was killed", t0);
        }
        assert_eq!(r.next(), Some(t0 + BACKOFF.1), "capped");
        // Other words are news.
        assert!(r.failed("u", some("red"), "something else", t0));
    }

    /// An edit is tried at once, whatever the backoff of the annotation before it.
    #[test]
    fn an_edited_annotation_is_tried_at_once_and_success_forgets() {
        let t0 = Instant::now();
        let mut r = Retries::default();
        r.failed("u", some("red,blue"), "failed", t0);
        assert!(!r.due("u", &some("red,blue"), t0));
        assert!(r.due("u", &some("red"), t0), "the reverted annotation");
        assert!(r.due("u", &None, t0));
        assert!(r.due("other", &some("red,blue"), t0), "another pod");
        // A new annotation failing starts its own backoff from the first step, and is news.
        assert!(r.failed("u", some("red"), "failed", t0));
        assert_eq!(r.next(), Some(t0 + BACKOFF.0));
        r.forget("u");
        assert!(r.due("u", &some("red"), t0) && r.next().is_none());
        r.failed("gone", None, "failed", t0);
        r.retain(&std::collections::BTreeSet::new());
        assert!(r.next().is_none());
    }
}
