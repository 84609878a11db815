//! The pool's statistics: counters by outcome and reason, the wait and
//! hold histograms (`histogram.rs`), and the [`PoolMetrics`] snapshot made
//! from them. All Relaxed atomics (`sync::stat`): statistics, read as a
//! snapshot that may be a few operations behind.

use pool_api::{Evictions, PoolMetrics};

#[cfg(feature = "metrics")]
pub(crate) use crate::histogram::Histogram;
use crate::histogram::Sharded;
use crate::slots::Census;
use crate::sync::stat::AtomicU64;
use crate::sync::Ordering;

/// Why the pool closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    IdleTimeout,
    MaxLifetime,
    Broken,
    Validation,
    ResetFailed,
    SoftEvict,
    Hook,
    Closed,
}

impl Reason {
    #[cfg(feature = "metrics")]
    pub(crate) const ALL: [Reason; 8] = [
        Reason::IdleTimeout,
        Reason::MaxLifetime,
        Reason::Broken,
        Reason::Validation,
        Reason::ResetFailed,
        Reason::SoftEvict,
        Reason::Hook,
        Reason::Closed,
    ];

    /// The `reason` label of the eviction counter and of log lines.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Reason::IdleTimeout => "idle_timeout",
            Reason::MaxLifetime => "max_lifetime",
            Reason::Broken => "broken",
            Reason::Validation => "validation",
            Reason::ResetFailed => "reset_failed",
            Reason::SoftEvict => "soft_evict",
            Reason::Hook => "hook",
            Reason::Closed => "closed",
        }
    }
}

/// The pool's counters.
#[derive(Debug)]
pub(crate) struct Stats {
    /// Waits of the checkouts that waited (the others are counted per slot).
    pub(crate) acquire_wait: Sharded,
    /// Hold (usage) times, for the export only.
    #[cfg(feature = "metrics")]
    pub(crate) hold: Sharded,
    timeouts: AtomicU64,
    creations: AtomicU64,
    creation_errors: AtomicU64,
    leaks: AtomicU64,
    evictions: [AtomicU64; 8],
}

impl Stats {
    pub(crate) fn new() -> Self {
        Self {
            acquire_wait: Sharded::new(),
            #[cfg(feature = "metrics")]
            hold: Sharded::new(),
            timeouts: AtomicU64::new(0),
            creations: AtomicU64::new(0),
            creation_errors: AtomicU64::new(0),
            leaks: AtomicU64::new(0),
            evictions: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// A checkout timed out.
    pub(crate) fn timed_out(&self) {
        Self::bump(&self.timeouts);
    }

    /// A connection was opened.
    pub(crate) fn created(&self) {
        Self::bump(&self.creations);
    }

    /// A connect failed.
    pub(crate) fn creation_failed(&self) {
        Self::bump(&self.creation_errors);
    }

    /// A leak was reported.
    pub(crate) fn leaked(&self) {
        Self::bump(&self.leaks);
    }

    pub(crate) fn evicted(&self, reason: Reason) {
        Self::bump(&self.evictions[reason as usize]);
    }

    /// The snapshot `Pool::metrics` returns: these counters with the slots'
    /// `census`, the checkouts that did not wait (`fast`, counted per slot),
    /// the callers `waiting` and the pool's `max_size`.
    pub(crate) fn snapshot(
        &self,
        census: Census,
        fast: u64,
        waiting: u32,
        max_size: u32,
    ) -> PoolMetrics {
        let wait = self.acquire_wait.summary_with_zeros(fast, [0.5, 0.99]);
        let evictions = self.evictions();
        let mut m = PoolMetrics::default();
        m.idle = census.idle;
        m.in_use = census.in_use;
        m.opening = census.opening;
        m.closing = census.closing;
        m.total = census.total();
        m.waiting = waiting;
        m.max_size = max_size;
        m.acquire_count = wait.count;
        m.acquire_wait_total = wait.sum;
        m.acquire_wait_p50 = wait.quantiles[0];
        m.acquire_wait_p99 = wait.quantiles[1];
        m.acquire_wait_max = wait.max;
        m.timeout_count = Self::get(&self.timeouts);
        m.creation_count = Self::get(&self.creations);
        m.creation_error_count = Self::get(&self.creation_errors);
        m.eviction_count = evictions.total();
        m.evictions = evictions;
        m.leak_count = Self::get(&self.leaks);
        m
    }

    fn evictions(&self) -> Evictions {
        let e = |r: Reason| Self::get(&self.evictions[r as usize]);
        let mut out = Evictions::default();
        out.idle_timeout = e(Reason::IdleTimeout);
        out.max_lifetime = e(Reason::MaxLifetime);
        out.broken = e(Reason::Broken);
        out.validation = e(Reason::Validation);
        out.reset_failed = e(Reason::ResetFailed);
        out.soft_evict = e(Reason::SoftEvict);
        out.hook = e(Reason::Hook);
        out.closed = e(Reason::Closed);
        out
    }
}
