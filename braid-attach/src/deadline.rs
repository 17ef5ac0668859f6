//! One deadline for a whole command, rollback included.
//!
//! A runtime bounds its own wait for a plugin: the kubelet gives the runtime 2 minutes for most
//! CRI calls (`--runtime-request-timeout`, `StopPodSandbox`, which DELs the pod's networks) and
//! twice that for `RunPodSandbox` (kubernetes `pkg/kubelet/cri/remote/remote_runtime.go`), and
//! containerd's go-cni kills the plugin when the call's context ends (libcni `raw_exec.go`,
//! `exec.CommandContext`). A meta-plugin killed there leaves its delegates half attached and its
//! rollback undone. So every wait of a braid command — each delegate call, each lock, each
//! retry — draws on one deadline, and a share of it is kept back for rolling an ADD back:
//!
//! * ADD work (the pod namespace's lock, the container's lock, every delegate's ADD) must end
//!   by [`Deadline::add_until`]: the deadline less the rollback share ([`ROLLBACK_SHARE`], a
//!   third). What runs then is killed (with its process group).
//! * The rollback's DELs — and every DEL, CHECK and GC — must end by [`Deadline::until`].
//! * Past either, the command fails with code 11 (`TRY_AGAIN_LATER`), naming what it was
//!   waiting for; what could not be rolled back stays recorded for the runtime's DEL.

use cni_types::error::TRY_AGAIN_LATER;
use cni_types::CniError;
use std::fmt;
use std::time::{Duration, Instant};

/// The default `deadline`: 90 s, below the kubelet's 2-minute runtime request timeout (the
/// bound of the `StopPodSandbox` that DELs, and half of `RunPodSandbox`'s), leaving the runtime
/// a margin for its own work and for the pod's other networks that go-cni sets up alongside.
pub const DEFAULT: Duration = Duration::from_secs(90);

/// The share of the deadline kept for rolling back a failed ADD: one third (30 s of the
/// default 90 s; the ADD work gets 60 s, as much as one delegate's default `timeout`).
pub const ROLLBACK_SHARE: u32 = 3;

/// The command's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    total: Option<Duration>,
    add_until: Option<Instant>,
    until: Option<Instant>,
}

impl Deadline {
    /// No deadline: every wait is as long as it takes (tests of other things).
    pub const fn none() -> Deadline {
        Deadline { total: None, add_until: None, until: None }
    }

    /// A deadline of `total` for a command that started at `start`.
    pub fn new(start: Instant, total: Duration) -> Deadline {
        let reserve = total / ROLLBACK_SHARE;
        Deadline { total: Some(total), add_until: Some(start + (total - reserve)), until: Some(start + total) }
    }

    /// When ADD work must have ended (the rollback share kept back).
    pub fn add_until(&self) -> Option<Instant> {
        self.add_until
    }

    /// When the whole command must have ended.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// The deadline as configured, for messages.
    pub fn total(&self) -> Option<Duration> {
        self.total
    }

    /// At most `d`, and no later than `until` (what is left of it; zero once passed).
    pub fn cap(until: Option<Instant>, d: Duration) -> Duration {
        until.map_or(d, |u| d.min(u.saturating_duration_since(Instant::now())))
    }

    /// Code 11: the deadline passed while waiting for `what`.
    pub fn passed(&self, what: impl fmt::Display) -> CniError {
        CniError::new(TRY_AGAIN_LATER, format!("{}: passed while waiting for {what}", self))
    }
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.total {
            Some(t) => {
                write!(f, "the command's deadline ({}, {} of it kept for rollback)", secs(t), secs(t / ROLLBACK_SHARE))
            }
            None => f.write_str("the command's deadline"),
        }
    }
}

pub(crate) fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        let tenths = tenths(d.as_secs_f64());
        format!("{}.{}s", tenths / 10, tenths % 10)
    }
}

/// `v` (finite, not negative) in tenths, rounded as `format!("{:.1}", v)` rounds — the exact
/// binary value, ties to even — in integers: the only `{:.1}` of a float in the plugins would
/// otherwise link the float formatting machinery (~5 KB of the delegator's 1.2 MB budget).
fn tenths(v: f64) -> u128 {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = u128::from(bits & ((1 << 52) - 1));
    // v = mantissa × 2^shift exactly.
    let (mantissa, shift) = if exp == 0 { (frac, -1074) } else { (frac | 1 << 52, exp - 1075) };
    let scaled = mantissa * 10;
    if shift >= 0 {
        // An integer of 2^52 or more (never a duration printed here): exact, or saturated.
        return 1u128.checked_shl(shift.unsigned_abs()).map_or(u128::MAX, |m| scaled.saturating_mul(m));
    }
    let down = shift.unsigned_abs();
    if down >= 127 {
        return 0;
    }
    let (q, r, half) = (scaled >> down, scaled & ((1 << down) - 1), 1u128 << (down - 1));
    if r > half || (r == half && q % 2 == 1) {
        q + 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_third_is_kept_for_rollback() {
        let start = Instant::now();
        let d = Deadline::new(start, Duration::from_secs(90));
        assert_eq!(d.add_until(), Some(start + Duration::from_secs(60)));
        assert_eq!(d.until(), Some(start + Duration::from_secs(90)));
        assert_eq!(d.to_string(), "the command's deadline (90s, 30s of it kept for rollback)");
        let e = d.passed("the lock of container c");
        assert_eq!(e.code, 11);
        assert_eq!(
            e.msg,
            "the command's deadline (90s, 30s of it kept for rollback): passed while waiting for the lock of container c"
        );
        assert_eq!(
            Deadline::new(start, Duration::from_millis(1500)).to_string().split(',').next(),
            Some("the command's deadline (1.5s")
        );
        assert_eq!(Deadline::cap(None, Duration::from_secs(5)), Duration::from_secs(5));
        assert_eq!(Deadline::cap(Some(start), Duration::from_secs(5)), Duration::ZERO);
        assert_eq!(Deadline::none().add_until(), None);
    }

    /// Tenths in integers, exactly as `{:.1}` prints them: every millisecond up to 3 s, ties
    /// of the binary value (0.25, 1.25, 2.75: to even) and values that only look like ties
    /// (0.35, 1.45: below them in binary), and a spread of durations up to a day in nanoseconds.
    #[test]
    fn tenths_round_as_the_float_formatter_does() {
        let check = |d: Duration| {
            let v = d.as_secs_f64();
            let t = tenths(v);
            assert_eq!(format!("{}.{}", t / 10, t % 10), format!("{v:.1}"), "{d:?}");
        };
        for ms in 0..3000 {
            check(Duration::from_millis(ms));
        }
        for s in ["0.25", "1.25", "2.75", "0.35", "1.45", "0.05", "86399.95"] {
            check(Duration::from_secs_f64(s.parse().unwrap()));
        }
        assert_eq!(tenths(4_503_599_627_370_496.0), 45_035_996_273_704_960, "2^52: the integer branch");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(Duration::from_nanos(x % 86_400_000_000_000));
        }
    }
}
