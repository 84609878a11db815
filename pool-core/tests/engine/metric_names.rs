//! Both metric naming schemes, read back through
//! `metrics-util`'s `DebuggingRecorder`: `MetricNames::Hikari` (the default)
//! and `MetricNames::OpenTelemetry` each export exactly their series, every
//! one labelled with the pool's name and described with a unit and a help
//! text; the OpenTelemetry series follow the pool's events, durations in
//! seconds.
//!
//! Each pool is built with its own recorder installed for the current
//! thread only (`metrics::with_local_recorder`), so tests do not see each
//! other's series.
#![cfg(feature = "metrics")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use metrics::Unit;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use pool_core::{async_trait, ManageConnection, MetricNames, Pool, PoolConfig, PoolConfigBuilder};

/// Connects after `connect_ms` of (paused) time; every connection is valid.
#[derive(Debug, Clone, Default)]
struct Slow {
    connect_ms: Arc<AtomicU64>,
}

#[async_trait]
impl ManageConnection for Slow {
    type Connection = ();
    type Error = std::io::Error;

    async fn connect(&self) -> Result<(), std::io::Error> {
        let ms = self.connect_ms.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    }

    async fn is_valid(&self, _: &mut ()) -> Result<(), std::io::Error> {
        Ok(())
    }
}

const POOL_LABEL: &str = "db.client.connection.pool.name";
const STATE_LABEL: &str = "db.client.connection.state";

/// One series: kind, name, and its labels other than the pool's.
type Series = (MetricKind, String, Vec<(String, String)>);

/// What one recorder showed: every series of the pool named `pool` (under
/// `pool_label`), with the last gauge value, summed counters, histogram
/// samples, and each series' unit and description.
struct Reader {
    snapshotter: Snapshotter,
    pool_label: &'static str,
    pool: &'static str,
    seen: BTreeMap<Series, (Option<Unit>, Option<String>)>,
    gauges: BTreeMap<Series, f64>,
    counters: BTreeMap<Series, u64>,
    histograms: BTreeMap<Series, Vec<f64>>,
    /// Series in the recorder without this pool's label.
    strays: Vec<String>,
}

impl Reader {
    /// Asserts every series has a description, and the unit seconds where
    /// `in_seconds` says so, a count elsewhere.
    fn assert_units_and_descriptions(&self, in_seconds: impl Fn(&Series) -> bool) {
        for (series, (unit, description)) in &self.seen {
            let want_unit = if in_seconds(series) {
                Unit::Seconds
            } else {
                Unit::Count
            };
            assert_eq!(*unit, Some(want_unit), "{series:?}");
            assert!(
                description.as_deref().is_some_and(|d| !d.is_empty()),
                "{series:?} has no description"
            );
        }
    }

    fn read(&mut self) {
        for (key, unit, description, value) in self.snapshotter.snapshot().into_vec() {
            let (kind, key) = key.into_parts();
            let mut pool = None;
            let mut others = Vec::new();
            for label in key.labels() {
                if label.key() == self.pool_label {
                    pool = Some(label.value().to_owned());
                } else {
                    others.push((label.key().to_owned(), label.value().to_owned()));
                }
            }
            if pool.as_deref() != Some(self.pool) {
                self.strays.push(key.name().to_owned());
                continue;
            }
            let series = (kind, key.name().to_owned(), others);
            self.seen
                .insert(series.clone(), (unit, description.map(|d| d.to_string())));
            match value {
                DebugValue::Counter(v) => *self.counters.entry(series).or_default() += v,
                DebugValue::Gauge(v) => {
                    self.gauges.insert(series, v.into_inner());
                }
                DebugValue::Histogram(v) => self
                    .histograms
                    .entry(series)
                    .or_default()
                    .extend(v.iter().map(|f| f.into_inner())),
            }
        }
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let key = series(MetricKind::Gauge, name, labels);
        *self
            .gauges
            .get(&key)
            .unwrap_or_else(|| panic!("no gauge {key:?}"))
    }

    fn counter(&self, name: &str) -> u64 {
        let key = series(MetricKind::Counter, name, &[]);
        *self
            .counters
            .get(&key)
            .unwrap_or_else(|| panic!("no counter {key:?}"))
    }

    fn samples(&self, name: &str) -> &[f64] {
        let key = series(MetricKind::Histogram, name, &[]);
        self.histograms
            .get(&key)
            .unwrap_or_else(|| panic!("no histogram {key:?}"))
    }
}

fn series(kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> Series {
    let labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    (kind, name.to_owned(), labels)
}

/// A lazy pool named `pool` built with a fresh debugging recorder.
fn recorded(
    manager: &Slow,
    pool: &'static str,
    pool_label: &'static str,
    builder: PoolConfigBuilder,
) -> (Pool<Slow>, Reader) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let config = builder.name(pool).build().unwrap();
    let built = metrics::with_local_recorder(&recorder, || Pool::new_lazy(manager.clone(), config));
    let reader = Reader {
        snapshotter,
        pool_label,
        pool,
        seen: BTreeMap::new(),
        gauges: BTreeMap::new(),
        counters: BTreeMap::new(),
        histograms: BTreeMap::new(),
        strays: Vec::new(),
    };
    (built, reader)
}

fn otel_config() -> PoolConfigBuilder {
    PoolConfig::builder()
        .metric_names(MetricNames::OpenTelemetry)
        .max_size(3)
        .min_size(0)
        .idle_timeout(None)
        .max_lifetime(None)
        .housekeeping_period(Duration::from_secs(30))
}

/// Every series the OpenTelemetry scheme exports, with its extra labels.
fn otel_series() -> Vec<Series> {
    use MetricKind::{Counter, Gauge, Histogram};
    vec![
        series(
            Gauge,
            "db.client.connection.count",
            &[(STATE_LABEL, "idle")],
        ),
        series(
            Gauge,
            "db.client.connection.count",
            &[(STATE_LABEL, "used")],
        ),
        series(Gauge, "db.client.connection.idle.max", &[]),
        series(Gauge, "db.client.connection.idle.min", &[]),
        series(Gauge, "db.client.connection.max", &[]),
        series(Gauge, "db.client.connection.pending_requests", &[]),
        series(Counter, "db.client.connection.timeouts", &[]),
        series(Histogram, "db.client.connection.create_time", &[]),
        series(Histogram, "db.client.connection.wait_time", &[]),
        series(Histogram, "db.client.connection.use_time", &[]),
    ]
}

#[tokio::test(start_paused = true)]
async fn open_telemetry_exports_exactly_its_series_described_and_labelled() {
    let manager = Slow::default();
    let (_pool, mut reader) = recorded(&manager, "orders", POOL_LABEL, otel_config());
    reader.read();
    let want = otel_series();
    let got: Vec<Series> = reader.seen.keys().cloned().collect();
    let mut sorted = want.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert!(reader.strays.is_empty(), "unlabelled: {:?}", reader.strays);
    reader.assert_units_and_descriptions(|series| series.0 == MetricKind::Histogram);
}

#[tokio::test(start_paused = true)]
async fn open_telemetry_series_follow_the_pool_in_seconds() {
    let manager = Slow::default();
    manager.connect_ms.store(250, Ordering::SeqCst);
    let (pool, mut reader) = recorded(&manager, "billing", POOL_LABEL, otel_config().max_size(1));

    // One connect of 250 ms; the caller waited for it.
    let held = pool.get().await.unwrap();
    // A second caller times out after 100 ms; a third waits 400 ms for the
    // held connection.
    assert!(pool
        .get_timeout(Duration::from_millis(100))
        .await
        .unwrap_err()
        .is_timeout());
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get().await.map(drop) })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    // A housekeeper tick (at most 1 s apart) refreshes the gauges: one
    // used, one pending.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reader.read();
    let used = [(STATE_LABEL, "used")];
    let idle = [(STATE_LABEL, "idle")];
    assert_eq!(reader.gauge("db.client.connection.count", &used), 1.0);
    assert_eq!(reader.gauge("db.client.connection.count", &idle), 0.0);
    assert_eq!(
        reader.gauge("db.client.connection.pending_requests", &[]),
        1.0
    );
    assert_eq!(reader.gauge("db.client.connection.max", &[]), 1.0);
    assert_eq!(reader.gauge("db.client.connection.idle.max", &[]), 1.0);
    assert_eq!(reader.gauge("db.client.connection.idle.min", &[]), 0.0);
    assert_eq!(reader.counter("db.client.connection.timeouts"), 1);
    let create = reader.samples("db.client.connection.create_time");
    assert_eq!(create, [0.25], "a 250 ms connect, in seconds");

    drop(held);
    waiter.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    reader.read();
    assert_eq!(reader.gauge("db.client.connection.count", &used), 0.0);
    assert_eq!(reader.gauge("db.client.connection.count", &idle), 1.0);
    assert_eq!(
        reader.gauge("db.client.connection.pending_requests", &[]),
        0.0
    );
    // Exported at their histogram bucket's midpoint: within 6.25 %.
    let near =
        |samples: &[f64], secs: f64| samples.iter().any(|s| (s - secs).abs() <= secs * 0.0625);
    let waits = reader.samples("db.client.connection.wait_time");
    assert_eq!(waits.len(), 2, "two connections handed out: {waits:?}");
    assert!(
        near(waits, 0.25),
        "the first waited for the connect: {waits:?}"
    );
    assert!(near(waits, 1.4), "the second for the holder: {waits:?}");
    let uses = reader.samples("db.client.connection.use_time");
    assert_eq!(uses.len(), 2, "{uses:?}");
    assert!(near(uses, 1.5), "held from 0.25 s to 1.75 s: {uses:?}");
    assert!(reader.strays.is_empty(), "unlabelled: {:?}", reader.strays);
}

#[tokio::test(start_paused = true)]
async fn hikari_stays_the_default_with_every_series_described() {
    let manager = Slow::default();
    let (_pool, mut reader) = recorded(
        &manager,
        "legacy",
        "pool",
        PoolConfig::builder().max_size(2),
    );
    reader.read();
    let names: std::collections::BTreeSet<&str> =
        reader.seen.keys().map(|s| s.1.as_str()).collect();
    assert_eq!(names.len(), 17, "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("pool_connections")),
        "{names:?}"
    );
    assert!(reader.strays.is_empty(), "unlabelled: {:?}", reader.strays);
    reader.assert_units_and_descriptions(|series| series.1.ends_with("_seconds"));
    assert!(names.contains("pool_connections_evicted_total"));
    assert!(!names.iter().any(|n| n.starts_with("db.")), "{names:?}");
}
