//! The pool's timestamps: nanoseconds since the pool was built, in a `u64`.
//!
//! Connections carry several timestamps (opened, expires, last used, last
//! pinged) and the hot path reads the clock on every checkout and return.
//! As plain integers they are 8 bytes each and compare in one instruction,
//! where an `Instant` is 16 bytes and needs a normalising subtraction.
//!
//! The source is the CPU's time-stamp counter through `quanta` (calibrated
//! once per process, falling back to the OS clock where the counter is not
//! reliable): about half the cost of `clock_gettime`, which on a virtual
//! machine was a quarter of a contended checkout's time. With the
//! `tokio-clock` feature the source is tokio's clock instead, so tests on a
//! paused clock (`start_paused`) drive idle timeout, lifetime, keepalive and
//! leak detection; timeouts and deadlines always use tokio's clock.

use std::time::Duration;

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

    /// A stamp `ns` nanoseconds after the epoch (for keeping one in an
    /// atomic).
    pub(crate) const fn from_nanos(ns: u64) -> Stamp {
        Stamp(ns)
    }

    /// Nanoseconds after the epoch.
    pub(crate) const fn nanos(self) -> u64 {
        self.0
    }

    /// `self + d`, saturating at [`Stamp::NEVER`].
    pub(crate) fn after(self, d: Duration) -> Stamp {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Stamp(self.0.saturating_add(d))
    }
}

/// Reads the pool's clock as [`Stamp`]s.
#[cfg(not(feature = "tokio-clock"))]
#[derive(Debug)]
pub(crate) struct Clock {
    source: quanta::Clock,
    epoch: u64,
}

#[cfg(not(feature = "tokio-clock"))]
impl Clock {
    pub(crate) fn new() -> Self {
        let source = quanta::Clock::new();
        let epoch = source.raw();
        Self { source, epoch }
    }

    /// Now.
    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        Stamp(self.source.delta_as_nanos(self.epoch, self.source.raw()))
    }
}

/// Reads the pool's clock as [`Stamp`]s.
#[cfg(feature = "tokio-clock")]
#[derive(Debug)]
pub(crate) struct Clock {
    epoch: tokio::time::Instant,
}

#[cfg(feature = "tokio-clock")]
impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            epoch: tokio::time::Instant::now(),
        }
    }

    /// Now.
    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        let since = tokio::time::Instant::now().saturating_duration_since(self.epoch);
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

    #[test]
    fn the_clock_moves_forward_with_real_time() {
        let clock = Clock::new();
        let a = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        let b = clock.now();
        // Generous bounds: this checks the source and its scaling, not speed.
        let d = b.since(a);
        assert!(d >= Duration::from_millis(15), "{d:?}");
        assert!(d < Duration::from_secs(5), "{d:?}");
    }
}
