//! Export through the `metrics` crate facade (feature `metrics`).
//!
//! Handles are registered once per pool, labelled `pool = <name>`, so an
//! event costs one call on a handle, not a registry lookup. What the hot
//! path would pay for is batched instead: uncontended checkouts are counted
//! by the pool's own histogram and flushed here (as zero-second waits) on
//! every housekeeper tick, at most a second apart; gauges are refreshed on
//! the same tick. Only the hold (usage) time is recorded per return.
//!
//! The names follow HikariCP's, with a `pool_` prefix; the README lists them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};
use pool_api::PoolState;

use crate::stats::Reason;

pub(crate) struct Export {
    total: Gauge,
    idle: Gauge,
    active: Gauge,
    pending: Gauge,
    opening: Gauge,
    max: Gauge,
    min: Gauge,
    acquired: Counter,
    timeouts: Counter,
    created: Counter,
    creation_errors: Counter,
    leaked: Counter,
    evicted: [Counter; 8],
    acquire_seconds: Histogram,
    usage_seconds: Histogram,
    creation_seconds: Histogram,
    /// Zero-wait checkouts already flushed to `acquire_seconds`.
    flushed_zero: AtomicU64,
    /// Checkouts already flushed to `acquired`.
    flushed_acquired: AtomicU64,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Export")
    }
}

impl Export {
    pub(crate) fn new(pool: &str) -> Self {
        let label = pool.to_owned();
        let l = || [("pool", label.clone())];
        Self {
            total: gauge!("pool_connections", &l()),
            idle: gauge!("pool_connections_idle", &l()),
            active: gauge!("pool_connections_active", &l()),
            pending: gauge!("pool_connections_pending", &l()),
            opening: gauge!("pool_connections_opening", &l()),
            max: gauge!("pool_connections_max", &l()),
            min: gauge!("pool_connections_min", &l()),
            acquired: counter!("pool_connections_acquired_total", &l()),
            timeouts: counter!("pool_connections_timeout_total", &l()),
            created: counter!("pool_connections_created_total", &l()),
            creation_errors: counter!("pool_connections_creation_errors_total", &l()),
            leaked: counter!("pool_connections_leaked_total", &l()),
            evicted: Reason::ALL.map(|r| {
                counter!(
                    "pool_connections_evicted_total",
                    &[("pool", label.clone()), ("reason", r.label().to_owned())]
                )
            }),
            acquire_seconds: histogram!("pool_connections_acquire_seconds", &l()),
            usage_seconds: histogram!("pool_connections_usage_seconds", &l()),
            creation_seconds: histogram!("pool_connections_creation_seconds", &l()),
            flushed_zero: AtomicU64::new(0),
            flushed_acquired: AtomicU64::new(0),
        }
    }

    /// A checkout that waited (uncontended ones are flushed in `refresh`).
    pub(crate) fn acquired(&self, waited: Duration) {
        if !waited.is_zero() {
            self.acquire_seconds.record(waited);
        }
    }

    pub(crate) fn held(&self, d: Duration) {
        self.usage_seconds.record(d);
    }

    pub(crate) fn created(&self, d: Duration) {
        self.created.increment(1);
        self.creation_seconds.record(d);
    }

    pub(crate) fn creation_failed(&self) {
        self.creation_errors.increment(1);
    }

    pub(crate) fn timeout(&self) {
        self.timeouts.increment(1);
    }

    pub(crate) fn leaked(&self) {
        self.leaked.increment(1);
    }

    pub(crate) fn evicted(&self, reason: Reason) {
        self.evicted[reason as usize].increment(1);
    }

    /// Sets the gauges and flushes the batched checkout counts.
    /// `acquired` is the pool's checkout count, `zero_waits` how many of them
    /// did not wait.
    pub(crate) fn refresh(&self, state: PoolState, min: u32, acquired: u64, zero_waits: u64) {
        self.total.set(f64::from(state.total));
        self.idle.set(f64::from(state.idle));
        self.active.set(f64::from(state.in_use));
        self.pending.set(f64::from(state.waiting));
        self.opening.set(f64::from(state.opening));
        self.max.set(f64::from(state.max_size));
        self.min.set(f64::from(min));
        let before = self.flushed_acquired.swap(acquired, Ordering::Relaxed);
        self.acquired.increment(acquired.saturating_sub(before));
        let before = self.flushed_zero.swap(zero_waits, Ordering::Relaxed);
        let new = zero_waits.saturating_sub(before);
        if new > 0 {
            self.acquire_seconds
                .record_many(0.0, usize::try_from(new).unwrap_or(usize::MAX));
        }
    }
}
