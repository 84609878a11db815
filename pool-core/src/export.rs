//! Export through the `metrics` crate facade (feature `metrics`).
//!
//! Handles are registered once per pool, labelled with its name, so an
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
//! Two naming schemes, chosen by `PoolConfig::metric_names`: HikariCP's
//! names with a `pool_` prefix, labelled `pool` (the default), or the
//! OpenTelemetry semantic conventions for database client connection pools
//! (`db.client.connection.*`, labelled `db.client.connection.pool.name`).
//! A figure a scheme has no name for gets a no-op handle, so the events
//! below cost the same under both. Every series is described (`describe_*`,
//! with its unit) when the pool is built, so exporters print a help line for
//! each. The `guide::metrics` page lists both schemes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Label, Unit,
};
use pool_api::{MetricNames, PoolConfig, PoolState};

use crate::stats::{Histogram as PoolHistogram, Reason};
use crate::sync::lock_std as lock;
use crossbeam_utils::CachePadded;

pub(crate) struct Export {
    total: Gauge,
    idle: Gauge,
    active: Gauge,
    pending: Gauge,
    opening: Gauge,
    closing: Gauge,
    max: Gauge,
    min: Gauge,
    /// The most connections that may sit idle (`max_size`: the pool has no
    /// stricter bound); OpenTelemetry's `idle.max`.
    idle_max: Gauge,
    acquired: Counter,
    timeouts: Counter,
    created: Counter,
    creation_errors: Counter,
    leaked: Counter,
    evicted: [Counter; 8],
    acquire_seconds: Histogram,
    usage_seconds: Histogram,
    creation_seconds: Histogram,
    flushed: Flushed,
}

/// What was already sent to the batched series.
#[derive(Default)]
struct Flushed {
    /// Checkouts already flushed to `acquired`.
    acquired: AtomicU64,
    /// Bucket counts already flushed, per histogram (housekeeper only).
    waits: Mutex<Vec<u64>>,
    holds: Mutex<Vec<u64>>,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Export")
    }
}

/// HikariCP's names, with a `pool_` prefix.
mod hikari {
    pub(super) const TOTAL: &str = "pool_connections";
    pub(super) const IDLE: &str = "pool_connections_idle";
    pub(super) const ACTIVE: &str = "pool_connections_active";
    pub(super) const PENDING: &str = "pool_connections_pending";
    pub(super) const OPENING: &str = "pool_connections_opening";
    pub(super) const CLOSING: &str = "pool_connections_closing";
    pub(super) const MAX: &str = "pool_connections_max";
    pub(super) const MIN: &str = "pool_connections_min";
    pub(super) const ACQUIRED: &str = "pool_connections_acquired_total";
    pub(super) const TIMEOUTS: &str = "pool_connections_timeout_total";
    pub(super) const CREATED: &str = "pool_connections_created_total";
    pub(super) const CREATION_ERRORS: &str = "pool_connections_creation_errors_total";
    pub(super) const LEAKED: &str = "pool_connections_leaked_total";
    pub(super) const EVICTED: &str = "pool_connections_evicted_total";
    pub(super) const ACQUIRE_SECONDS: &str = "pool_connections_acquire_seconds";
    pub(super) const USAGE_SECONDS: &str = "pool_connections_usage_seconds";
    pub(super) const CREATION_SECONDS: &str = "pool_connections_creation_seconds";
}

/// The OpenTelemetry semantic conventions' names.
mod otel {
    pub(super) const POOL: &str = "db.client.connection.pool.name";
    pub(super) const STATE: &str = "db.client.connection.state";
    pub(super) const COUNT: &str = "db.client.connection.count";
    pub(super) const IDLE_MAX: &str = "db.client.connection.idle.max";
    pub(super) const IDLE_MIN: &str = "db.client.connection.idle.min";
    pub(super) const MAX: &str = "db.client.connection.max";
    pub(super) const PENDING: &str = "db.client.connection.pending_requests";
    pub(super) const TIMEOUTS: &str = "db.client.connection.timeouts";
    pub(super) const CREATE_TIME: &str = "db.client.connection.create_time";
    pub(super) const WAIT_TIME: &str = "db.client.connection.wait_time";
    pub(super) const USE_TIME: &str = "db.client.connection.use_time";
}

impl Export {
    pub(crate) fn new(config: &PoolConfig) -> Self {
        match config.metric_names() {
            MetricNames::OpenTelemetry => Self::open_telemetry(config),
            // `MetricNames` is non-exhaustive; Hikari is the default.
            _ => Self::hikari(config),
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
        self.closing.set(f64::from(state.closing));
        self.max.set(f64::from(state.max_size));
        self.idle_max.set(f64::from(state.max_size));
        self.min.set(f64::from(min));
        let before = self.flushed.acquired.swap(acquired, Ordering::Relaxed);
        self.acquired.increment(acquired.saturating_sub(before));
        flush(&self.acquire_seconds, &self.flushed.waits, waits, fast);
        flush(&self.usage_seconds, &self.flushed.holds, holds, 0);
    }
}

impl Export {
    fn hikari(config: &PoolConfig) -> Self {
        use hikari::*;
        describe();
        let l = || labels(config, "pool", None);
        Self {
            total: gauge!(TOTAL, l()),
            idle: gauge!(IDLE, l()),
            active: gauge!(ACTIVE, l()),
            pending: gauge!(PENDING, l()),
            opening: gauge!(OPENING, l()),
            closing: gauge!(CLOSING, l()),
            max: gauge!(MAX, l()),
            min: gauge!(MIN, l()),
            idle_max: Gauge::noop(),
            acquired: counter!(ACQUIRED, l()),
            timeouts: counter!(TIMEOUTS, l()),
            created: counter!(CREATED, l()),
            creation_errors: counter!(CREATION_ERRORS, l()),
            leaked: counter!(LEAKED, l()),
            evicted: Reason::ALL
                .map(|r| counter!(EVICTED, labels(config, "pool", Some(("reason", r.label()))))),
            acquire_seconds: histogram!(ACQUIRE_SECONDS, l()),
            usage_seconds: histogram!(USAGE_SECONDS, l()),
            creation_seconds: histogram!(CREATION_SECONDS, l()),
            flushed: Flushed::default(),
        }
    }

    fn open_telemetry(config: &PoolConfig) -> Self {
        use otel::*;
        describe_open_telemetry();
        let l = || labels(config, POOL, None);
        let count = |state: &'static str| gauge!(COUNT, labels(config, POOL, Some((STATE, state))));
        Self {
            total: Gauge::noop(),
            idle: count("idle"),
            active: count("used"),
            pending: gauge!(PENDING, l()),
            opening: Gauge::noop(),
            closing: Gauge::noop(),
            max: gauge!(MAX, l()),
            min: gauge!(IDLE_MIN, l()),
            idle_max: gauge!(IDLE_MAX, l()),
            acquired: Counter::noop(),
            timeouts: counter!(TIMEOUTS, l()),
            created: Counter::noop(),
            creation_errors: Counter::noop(),
            leaked: Counter::noop(),
            evicted: Reason::ALL.map(|_| Counter::noop()),
            acquire_seconds: histogram!(WAIT_TIME, l()),
            usage_seconds: histogram!(USE_TIME, l()),
            creation_seconds: histogram!(CREATE_TIME, l()),
            flushed: Flushed::default(),
        }
    }
}

/// The labels of one series: the pool's name under `pool_key`, then `extra`
/// (a reason, a state) if any, then the config's own
/// [`metric_labels`](PoolConfig::metric_labels).
fn labels(
    config: &PoolConfig,
    pool_key: &'static str,
    extra: Option<(&'static str, &str)>,
) -> Vec<Label> {
    let mut out = Vec::with_capacity(2 + config.metric_labels().len());
    out.push(Label::new(pool_key, config.name().to_owned()));
    if let Some((key, value)) = extra {
        out.push(Label::new(key, value.to_owned()));
    }
    for (key, value) in config.metric_labels() {
        out.push(Label::new(key.clone(), value.clone()));
    }
    out
}

/// Describes HikariCP-named series to the recorder (`# HELP` lines in a
/// Prometheus exporter).
fn describe() {
    use hikari::*;
    let count = Unit::Count;
    describe_gauge!(
        TOTAL,
        count,
        "open connections: idle, in use and being opened"
    );
    describe_gauge!(IDLE, count, "idle connections, ready to hand out");
    describe_gauge!(
        ACTIVE,
        count,
        "connections held by callers, or being reset or pinged"
    );
    describe_gauge!(PENDING, count, "callers waiting for a connection");
    describe_gauge!(OPENING, count, "connects in flight");
    describe_gauge!(
        CLOSING,
        count,
        "connections being closed, their slots still taken"
    );
    describe_gauge!(MAX, count, "most connections the pool may open (max_size)");
    describe_gauge!(
        MIN,
        count,
        "connections kept open even when idle (min_size)"
    );
    describe_counter!(ACQUIRED, count, "connections handed out");
    describe_counter!(TIMEOUTS, count, "acquisitions that timed out, in any phase");
    describe_counter!(CREATED, count, "connections opened");
    describe_counter!(CREATION_ERRORS, count, "connects that failed or timed out");
    describe_counter!(
        LEAKED,
        count,
        "connections reported held past the leak threshold"
    );
    describe_counter!(EVICTED, count, "connections the pool closed, by reason");
    describe_histogram!(
        ACQUIRE_SECONDS,
        Unit::Seconds,
        "time spent acquiring each connection handed out"
    );
    describe_histogram!(
        USAGE_SECONDS,
        Unit::Seconds,
        "time each connection was held, from checkout to return"
    );
    describe_histogram!(
        CREATION_SECONDS,
        Unit::Seconds,
        "time each successful connect took, after_connect included"
    );
}

/// Describes the OpenTelemetry-named series to the recorder.
fn describe_open_telemetry() {
    use otel::*;
    let count = Unit::Count;
    describe_gauge!(
        COUNT,
        count,
        "open connections by state: idle, or used by a caller"
    );
    describe_gauge!(
        IDLE_MAX,
        count,
        "most connections that may sit idle (max_size)"
    );
    describe_gauge!(IDLE_MIN, count, "idle connections the pool keeps ready");
    describe_gauge!(MAX, count, "most connections the pool may open (max_size)");
    describe_gauge!(PENDING, count, "callers waiting for a connection");
    describe_counter!(TIMEOUTS, count, "acquisitions that timed out, in any phase");
    describe_histogram!(
        CREATE_TIME,
        Unit::Seconds,
        "time each successful connect took, after_connect included"
    );
    describe_histogram!(
        WAIT_TIME,
        Unit::Seconds,
        "time spent acquiring each connection handed out"
    );
    describe_histogram!(
        USE_TIME,
        Unit::Seconds,
        "time each connection was held, from checkout to return"
    );
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
