//! The pool's timestamps: nanoseconds since the pool was built, in a `u64`.
//!
//! Connections carry several timestamps (opened, expires, last used, last
//! pinged) and the hot path compares them on every checkout and return.
//! As plain integers they are 8 bytes each and compare in one instruction,
//! where an `Instant` is 16 bytes and needs a normalising subtraction.
//! The time source is tokio's clock, so tests on a paused clock
//! (`start_paused`) drive expiry, idle timeout and leak checks.

use std::time::Duration;

use tokio::time::Instant;

/// A point in time: nanoseconds since the pool's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Stamp(u64);

impl Stamp {
    /// Later than any reachable time: "never expires".
    pub(crate) const NEVER: Stamp = Stamp(u64::MAX);

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub(crate) fn since(self, earlier: Stamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Stamp::NEVER`].
    pub(crate) fn after(self, d: Duration) -> Stamp {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Stamp(self.0.saturating_add(d))
    }

    /// The raw nanoseconds, for atomics.
    pub(crate) fn nanos(self) -> u64 {
        self.0
    }

    pub(crate) fn from_nanos(n: u64) -> Stamp {
        Stamp(n)
    }
}

/// Reads tokio's clock as [`Stamp`]s.
#[derive(Debug)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    /// Now.
    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        self.stamp(Instant::now())
    }

    /// The stamp of an instant read elsewhere.
    #[inline]
    pub(crate) fn stamp(&self, at: Instant) -> Stamp {
        let since = at.saturating_duration_since(self.epoch);
        Stamp(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let a = Stamp(10);
        assert_eq!(a.after(Duration::from_nanos(5)), Stamp(15));
        assert_eq!(a.after(Duration::MAX), Stamp::NEVER);
        assert_eq!(Stamp(15).since(a), Duration::from_nanos(5));
        assert_eq!(a.since(Stamp(15)), Duration::ZERO);
        assert!(Stamp(1) < Stamp::NEVER);
    }
}
