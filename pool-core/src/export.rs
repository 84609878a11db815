//! Export through the `metrics` crate facade (feature `metrics`).
//!
//! Handles are registered once per pool, labelled `pool = <name>`, so an
//! event costs one call on a handle, not a registry lookup. What the hot
//! path would pay for is batched instead: acquire waits and hold times go
//! to the pool's own lock-free histograms (one atomic add each), and every
//! housekeeper tick, at most a second apart, sends the exporter what each
//! bucket gained since the last tick (`record_many` at the bucket's
//! midpoint, within 6.25 % of every sample in it); checkouts are counted per
//! slot and flushed the same way, and gauges are refreshed on that tick.
//! A recorder that is slow under contention (a Prometheus exporter's atomic
//! buckets cost a third of a contended checkout's throughput when fed per
//! event) is thus never on the hot path. Rare events (connects, timeouts,
//! evictions, leaks) are recorded when they happen.
//!
//! The names follow HikariCP's, with a `pool_` prefix; the README lists them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};
use pool_api::PoolState;

use crate::stats::{Histogram as PoolHistogram, Reason};
use crate::sync::lock_std as lock;
use crossbeam_utils::CachePadded;

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
    /// Checkouts already flushed to `acquired`.
    flushed_acquired: AtomicU64,
    /// Bucket counts already flushed, per histogram (housekeeper only).
    flushed_waits: Mutex<Vec<u64>>,
    flushed_holds: Mutex<Vec<u64>>,
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
            flushed_acquired: AtomicU64::new(0),
            flushed_waits: Mutex::new(Vec::new()),
            flushed_holds: Mutex::new(Vec::new()),
        }
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

    /// Sets the gauges and flushes the batched figures: `acquired` is the
    /// pool's checkout count, `fast` how many of them were counted per slot
    /// (no wait, not in `waits`).
    pub(crate) fn refresh(
        &self,
        state: PoolState,
        min: u32,
        acquired: u64,
        fast: u64,
        waits: &[CachePadded<PoolHistogram>],
        holds: &[CachePadded<PoolHistogram>],
    ) {
        self.total.set(f64::from(state.total));
        self.idle.set(f64::from(state.idle));
        self.active.set(f64::from(state.in_use));
        self.pending.set(f64::from(state.waiting));
        self.opening.set(f64::from(state.opening));
        self.max.set(f64::from(state.max_size));
        self.min.set(f64::from(min));
        let before = self.flushed_acquired.swap(acquired, Ordering::Relaxed);
        self.acquired.increment(acquired.saturating_sub(before));
        flush(&self.acquire_seconds, &self.flushed_waits, waits, fast);
        flush(&self.usage_seconds, &self.flushed_holds, holds, 0);
    }
}

/// Sends `to` what each bucket of `from` (added up over its shards) gained
/// since the last flush (`extra_zeros` counts as part of the zero bucket).
fn flush(
    to: &Histogram,
    flushed: &Mutex<Vec<u64>>,
    from: &[CachePadded<PoolHistogram>],
    extra_zeros: u64,
) {
    let mut flushed = lock(flushed);
    let Some((first, rest)) = from.split_first() else {
        return;
    };
    let mut shards: Vec<_> = rest.iter().map(|h| h.buckets()).collect();
    for (i, (nanos, mut count)) in first.buckets().enumerate() {
        for shard in &mut shards {
            count += shard.next().map_or(0, |(_, c)| c);
        }
        if i == 0 {
            count += extra_zeros;
        }
        if flushed.len() <= i {
            flushed.push(0);
        }
        let new = count.saturating_sub(flushed[i]);
        if new > 0 {
            flushed[i] = count;
            let seconds = Duration::from_nanos(nanos).as_secs_f64();
            to.record_many(seconds, usize::try_from(new).unwrap_or(usize::MAX));
        }
    }
}
