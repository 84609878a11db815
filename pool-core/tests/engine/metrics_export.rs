//! Export through the `metrics` facade, read back with `metrics-util`'s
//! `DebuggingRecorder`: every series exists, labelled with the pool name;
//! counters move on their events; histograms get samples; gauges follow the
//! pool after a housekeeper tick.
//!
//! The pool registers its handles when it is built, so each test builds it
//! with the recorder installed for the current thread only
//! (`metrics::with_local_recorder`): tests do not see each other's series.
#![cfg(feature = "metrics")]

use crate::support;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{config, Mock};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use pool_core::{MetricNames, Pool, PoolConfigBuilder, PoolError, PooledConnection, TimeoutPhase};

const GAUGES: [&str; 8] = [
    "pool_connections",
    "pool_connections_idle",
    "pool_connections_active",
    "pool_connections_pending",
    "pool_connections_opening",
    "pool_connections_closing",
    "pool_connections_max",
    "pool_connections_min",
];
const COUNTERS: [&str; 5] = [
    "pool_connections_acquired_total",
    "pool_connections_timeout_total",
    "pool_connections_created_total",
    "pool_connections_creation_errors_total",
    "pool_connections_leaked_total",
];
const EVICTED: &str = "pool_connections_evicted_total";
const REASONS: [&str; 8] = [
    "idle_timeout",
    "max_lifetime",
    "broken",
    "validation",
    "reset_failed",
    "soft_evict",
    "hook",
    "closed",
];
const HISTOGRAMS: [&str; 3] = [
    "pool_connections_acquire_seconds",
    "pool_connections_usage_seconds",
    "pool_connections_creation_seconds",
];

/// One series: kind, name and `reason` label (if any).
type Series = (MetricKind, String, Option<String>);

/// What one pool's series showed so far. A snapshot of the debugging
/// recorder drains it (counters and gauges are swapped to zero, histograms
/// emptied), so the reader sums counters, keeps the last gauge value and
/// collects every histogram sample.
struct Reader {
    snapshotter: Snapshotter,
    pool: &'static str,
    counters: BTreeMap<Series, u64>,
    gauges: BTreeMap<Series, f64>,
    histograms: BTreeMap<Series, Vec<f64>>,
}

impl Reader {
    fn new(snapshotter: Snapshotter, pool: &'static str) -> Self {
        Self {
            snapshotter,
            pool,
            counters: BTreeMap::new(),
            gauges: BTreeMap::new(),
            histograms: BTreeMap::new(),
        }
    }

    /// Takes a snapshot; returns the series it showed.
    fn read(&mut self) -> Vec<Series> {
        let mut seen = Vec::new();
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let (kind, key) = key.into_parts();
            let label = |k: &str| {
                key.labels()
                    .find(|l| l.key() == k)
                    .map(|l| l.value().to_owned())
            };
            if label("pool").as_deref() != Some(self.pool) {
                continue;
            }
            let series = (kind, key.name().to_owned(), label("reason"));
            match value {
                DebugValue::Counter(v) => *self.counters.entry(series.clone()).or_default() += v,
                DebugValue::Gauge(v) => {
                    self.gauges.insert(series.clone(), v.into_inner());
                }
                DebugValue::Histogram(v) => self
                    .histograms
                    .entry(series.clone())
                    .or_default()
                    .extend(v.iter().map(|f| f.into_inner())),
            }
            seen.push(series);
        }
        seen
    }

    fn counter(&self, name: &str) -> u64 {
        self.counter_of(name, None)
    }

    fn counter_of(&self, name: &str, reason: Option<&str>) -> u64 {
        let key = (
            MetricKind::Counter,
            name.to_owned(),
            reason.map(str::to_owned),
        );
        match self.counters.get(&key) {
            Some(v) => *v,
            None => panic!("no counter {name} {reason:?}"),
        }
    }

    /// The gauge's value at the last read (read after a housekeeper tick).
    fn gauge(&self, name: &str) -> f64 {
        match self.gauges.get(&(MetricKind::Gauge, name.to_owned(), None)) {
            Some(v) => *v,
            None => panic!("no gauge {name}"),
        }
    }

    /// Every sample a histogram got so far.
    fn samples(&self, name: &str) -> &[f64] {
        match self
            .histograms
            .get(&(MetricKind::Histogram, name.to_owned(), None))
        {
            Some(v) => v,
            None => panic!("no histogram {name}"),
        }
    }
}

/// A lazy pool named `name` whose handles point at a fresh debugging
/// recorder.
fn recorded_pool(
    mock: &Mock,
    name: &'static str,
    builder: PoolConfigBuilder,
) -> (Pool<Mock>, Reader) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let config = builder.name(name).build().unwrap();
    let pool = metrics::with_local_recorder(&recorder, || Pool::new_lazy(mock.clone(), config));
    (pool, Reader::new(snapshotter, name))
}

#[tokio::test(start_paused = true)]
async fn every_series_exists_with_the_pool_label() {
    let mock = Mock::default();
    let (_pool, mut reader) = recorded_pool(&mock, "orders", config(3));
    let seen = reader.read();
    let has = |kind: MetricKind, name: &str, reason: Option<&str>| {
        seen.contains(&(kind, name.to_owned(), reason.map(str::to_owned)))
    };
    for name in GAUGES {
        assert!(has(MetricKind::Gauge, name, None), "{name}: {seen:?}");
    }
    for name in COUNTERS {
        assert!(has(MetricKind::Counter, name, None), "{name}: {seen:?}");
        assert_eq!(reader.counter(name), 0, "{name}");
    }
    for reason in REASONS {
        assert!(
            has(MetricKind::Counter, EVICTED, Some(reason)),
            "{reason}: {seen:?}"
        );
        assert_eq!(reader.counter_of(EVICTED, Some(reason)), 0, "{reason}");
    }
    for name in HISTOGRAMS {
        assert!(has(MetricKind::Histogram, name, None), "{name}: {seen:?}");
    }
    let expected = GAUGES.len() + COUNTERS.len() + REASONS.len() + HISTOGRAMS.len();
    assert_eq!(seen.len(), expected, "unexpected series: {seen:?}");
    let others = Reader::new(reader.snapshotter, "pool").read();
    assert!(
        others.is_empty(),
        "series without our pool label: {others:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn counters_histograms_and_gauges_follow_the_events() {
    let mock = Mock::default();
    let (pool, mut reader) = recorded_pool(
        &mock,
        "billing",
        config(1)
            .min_size(0)
            .idle_timeout(None)
            // The refused connects below time out rather than fail fast.
            .fail_fast(false)
            .leak_detection_threshold(Duration::from_millis(100))
            .housekeeping_period(Duration::from_secs(30)),
    );

    // Created and acquired; a second caller times out meanwhile; held
    // 200 ms: leaked; returned broken.
    let mut conn = pool.get().await.unwrap();
    let err = pool
        .get_timeout(Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        PoolError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        }
    ));
    tokio::time::sleep(Duration::from_millis(150)).await;
    conn.broken = true;
    drop(conn);
    // Hold times reach the exporter in a batch on the next housekeeper tick
    // (every 100 ms here: the leak threshold).
    tokio::time::sleep(Duration::from_millis(150)).await;
    reader.read();
    assert_eq!(reader.counter("pool_connections_created_total"), 1);
    assert_eq!(reader.counter("pool_connections_timeout_total"), 1);
    assert_eq!(reader.counter("pool_connections_leaked_total"), 1);
    assert_eq!(reader.counter_of(EVICTED, Some("broken")), 1);
    assert_eq!(reader.samples("pool_connections_creation_seconds").len(), 1);
    let usage = reader.samples("pool_connections_usage_seconds");
    assert_eq!(usage.len(), 1, "{usage:?}");
    // Exported at its histogram bucket's midpoint: within 6.25 %.
    assert!(
        (usage[0] - 0.2).abs() <= 0.2 * 0.0625,
        "held 200 ms: {usage:?}"
    );

    // The database refuses: creation errors, and a timeout.
    mock.script.set(&mock.script.fail_connect, true);
    assert!(pool.get_timeout(Duration::from_millis(30)).await.is_err());
    mock.script.set(&mock.script.fail_connect, false);
    // Let the connector's back-off run out: nobody wants a connection now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Back: one more connection, used twice, then retired by soft evict.
    drop(pool.get().await.unwrap());
    drop(pool.get().await.unwrap());
    pool.soft_evict_all();
    // A housekeeper tick (at most 1 s apart) flushes the checkout count and
    // refreshes the gauges.
    tokio::time::sleep(Duration::from_millis(1_100)).await;

    let snapshot = pool.metrics();
    reader.read();
    assert_eq!(reader.counter("pool_connections_created_total"), 2);
    assert!(snapshot.creation_error_count >= 1, "{snapshot:?}");
    assert_eq!(
        reader.counter("pool_connections_creation_errors_total"),
        snapshot.creation_error_count
    );
    assert_eq!(reader.counter("pool_connections_timeout_total"), 2);
    assert_eq!(snapshot.timeout_count, 2);
    assert_eq!(snapshot.acquire_count, 3);
    assert_eq!(reader.counter("pool_connections_acquired_total"), 3);
    for reason in REASONS {
        let want = match reason {
            "broken" | "soft_evict" => 1,
            _ => 0,
        };
        assert_eq!(reader.counter_of(EVICTED, Some(reason)), want, "{reason}");
    }
    assert_eq!(reader.counter("pool_connections_leaked_total"), 1);
    // Every checkout is one acquire-wait sample (none waited on the paused
    // clock: the connects took no time); every return one usage sample.
    let waits = reader.samples("pool_connections_acquire_seconds");
    assert_eq!(waits, [0.0; 3], "{waits:?}");
    assert_eq!(reader.samples("pool_connections_usage_seconds").len(), 3);
    assert_eq!(reader.samples("pool_connections_creation_seconds").len(), 2);
    assert_eq!(reader.gauge("pool_connections_max"), 1.0);
    assert_eq!(reader.gauge("pool_connections_min"), 0.0);
    assert_eq!(reader.gauge("pool_connections"), 0.0);
    assert_eq!(reader.gauge("pool_connections_idle"), 0.0);

    // Gauges track the pool: one in use, one caller waiting.
    let held = pool.get().await.unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get().await.map(drop) })
    };
    support::until(|| pool.metrics().waiting == 1).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    reader.read();
    assert_eq!(reader.gauge("pool_connections"), 1.0);
    assert_eq!(reader.gauge("pool_connections_active"), 1.0);
    assert_eq!(reader.gauge("pool_connections_idle"), 0.0);
    assert_eq!(reader.gauge("pool_connections_pending"), 1.0);
    assert_eq!(reader.gauge("pool_connections_opening"), 0.0);
    drop(held);
    waiter.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    reader.read();
    assert_eq!(reader.counter("pool_connections_acquired_total"), 5);
    assert_eq!(reader.gauge("pool_connections_pending"), 0.0);
    assert_eq!(reader.gauge("pool_connections_active"), 0.0);
    assert_eq!(reader.gauge("pool_connections_idle"), 1.0);
    // The waiter waited 1.1 s; the holder held 1.1 s (exported at their
    // bucket's midpoint: within 6.25 %).
    let near = |x: f64| (x - 1.1).abs() <= 1.1 * 0.0625;
    let waits = reader.samples("pool_connections_acquire_seconds");
    assert_eq!(waits.len(), 5, "{waits:?}");
    assert!(waits.iter().copied().any(near), "{waits:?}");
    let usage = reader.samples("pool_connections_usage_seconds");
    assert_eq!(usage.len(), 5, "{usage:?}");
    assert!(usage.iter().copied().any(near), "{usage:?}");
    assert_eq!(reader.samples("pool_connections_creation_seconds").len(), 3);
}

#[tokio::test(start_paused = true)]
async fn evictions_are_exported_by_reason() {
    let mock = Mock::default();
    let (pool, mut reader) = recorded_pool(
        &mock,
        "reasons",
        config(2)
            .idle_timeout(Duration::from_secs(5))
            .max_lifetime(Duration::from_secs(60))
            .max_lifetime_jitter(0.0)
            .housekeeping_period(Duration::from_secs(1)),
    );
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    drop(b);
    tokio::time::sleep(Duration::from_secs(70)).await; // b idles out, a ages out
    drop(a);
    // Discarded by the caller; dirty with a reset that fails.
    PooledConnection::discard(pool.get().await.unwrap());
    mock.script.set(&mock.script.fail_reset, true);
    let mut dirty = pool.get().await.unwrap();
    dirty.dirty = true;
    drop(dirty);
    support::until(|| pool.metrics().total == 0).await;
    reader.read();
    let e = pool.metrics().evictions;
    for (reason, want, got) in [
        ("idle_timeout", 1, e.idle_timeout),
        ("max_lifetime", 1, e.max_lifetime),
        ("closed", 1, e.closed),
        ("reset_failed", 1, e.reset_failed),
    ] {
        assert_eq!(got, want, "{reason} in the snapshot: {e:?}");
        assert_eq!(reader.counter_of(EVICTED, Some(reason)), want, "{reason}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_pool_new_exports_its_creation_error() {
    let recorder = DebuggingRecorder::new();
    let mut reader = Reader::new(recorder.snapshotter(), "refused");
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    let built = {
        let _local = metrics::set_default_local_recorder(&recorder);
        Pool::new(mock.clone(), config(2).name("refused").build().unwrap()).await
    };
    assert!(matches!(built, Err(PoolError::Backend(_))), "{built:?}");
    reader.read();
    // The first failed connect and its one retry.
    assert_eq!(reader.counter("pool_connections_creation_errors_total"), 2);
    assert_eq!(reader.counter("pool_connections_created_total"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_metric_label_is_on_every_series_under_both_schemes() {
    for names in [MetricNames::Hikari, MetricNames::OpenTelemetry] {
        let mock = Mock::default();
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let config = config(2)
            .name("orders")
            .metric_names(names)
            .metric_label("host", "db2:5432")
            .build()
            .unwrap();
        let _pool =
            metrics::with_local_recorder(&recorder, || Pool::new_lazy(mock.clone(), config));
        let series = snapshotter.snapshot().into_vec();
        assert!(!series.is_empty(), "{names:?}");
        for (key, _, _, _) in series {
            let key = key.key().clone();
            let host: Vec<_> = key.labels().filter(|l| l.key() == "host").collect();
            assert_eq!(host.len(), 1, "{names:?} {key:?}");
            assert_eq!(host[0].value(), "db2:5432");
            assert!(
                key.labels().any(|l| l.value() == "orders"),
                "the pool's own label stays: {key:?}"
            );
        }
    }
}
