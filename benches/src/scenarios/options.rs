//! S6: what the hot-path options cost. Ours only: S1 and one S2 point with
//! the metrics export on (a Prometheus recorder installed when the pool is
//! built, so its handles are live) or off (no recorder: the handles are
//! no-ops), and leak detection on (threshold 60 s, backtraces on: the
//! first checkout per call site and thread and one in 256 after it capture
//! a backtrace; never reported) or off.

use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use serde::Serialize;

use crate::fake::FakeSpec;
use crate::pools::noop::Ours;
use crate::runner::{current_thread, multi_thread, run_load, LoadSpec, YieldOnce};
use crate::scenarios::uncontended::get_drop_loop;
use crate::stats::median;

/// One combination of the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Options {
    /// A metrics recorder installed.
    pub metrics: bool,
    /// Leak detection on.
    pub leak_detection: bool,
}

impl Options {
    /// The four combinations, baseline first.
    pub const ALL: [Options; 4] = [
        Options {
            metrics: false,
            leak_detection: false,
        },
        Options {
            metrics: true,
            leak_detection: false,
        },
        Options {
            metrics: false,
            leak_detection: true,
        },
        Options {
            metrics: true,
            leak_detection: true,
        },
    ];

    /// Row label.
    pub fn label(self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!(
            "metrics {}, leak detection {}",
            on(self.metrics),
            on(self.leak_detection)
        )
    }
}

/// Counts and bounds of S6.
#[derive(Debug, Clone)]
pub struct OptionSettings {
    /// S1 cycles per repeat.
    pub iters: u64,
    /// S1 time bound per repeat.
    pub time_limit: Duration,
    /// S2 point: pool size.
    pub pool_size: u32,
    /// S2 point: tasks.
    pub tasks: usize,
    /// S2 run length.
    pub duration: Duration,
    /// Repeats (medians reported).
    pub repeats: usize,
}

/// One combination's figures.
#[derive(Debug, Clone, Serialize)]
pub struct OptionRow {
    /// The combination.
    pub options: Options,
    /// Its label.
    pub label: String,
    /// S1 ns per cycle (median).
    pub s1_ns: f64,
    /// S2 cycles per second (median).
    pub s2_cycles_per_sec: f64,
    /// Metric series the recorder rendered (0 with metrics off): proof the
    /// export was live.
    pub exported_lines: usize,
}

/// Builds ours with `opts`; with metrics on, the pool's handles are
/// registered with `recorder`.
pub fn build(spec: &FakeSpec, opts: Options, recorder: &PrometheusRecorder) -> Ours {
    let leak = opts.leak_detection.then_some(Duration::from_secs(60));
    let config = Ours::config(spec)
        .leak_detection_threshold(leak)
        .build()
        .expect("valid config");
    let make = || pool_core::Pool::new_lazy(spec.manager(), config.clone());
    let pool = if opts.metrics {
        metrics::with_local_recorder(recorder, make)
    } else {
        make()
    };
    Ours(pool)
}

/// S6, every combination.
pub fn run(s: &OptionSettings) -> Vec<OptionRow> {
    let mut rows = Vec::new();
    for opts in Options::ALL {
        let recorder = PrometheusBuilder::new().build_recorder();
        let (mut s1, mut s2) = (Vec::new(), Vec::new());
        for _ in 0..s.repeats {
            let rt = current_thread();
            let spec = FakeSpec::noop(s.pool_size);
            if let Some(ns) = rt.block_on(async {
                let pool = build(&spec, opts, &recorder);
                let ns = get_drop_loop(&pool, s.iters, s.time_limit).await;
                pool.0.close().await;
                ns
            }) {
                s1.push(ns);
            }
            drop(rt);
            let rt = multi_thread(2);
            let load = LoadSpec {
                tasks: s.tasks,
                duration: s.duration,
                max_cycles_per_task: 10_000_000,
                grace: Duration::from_secs(2),
                record: false,
                pace: None,
            };
            let out = rt.block_on(async {
                let pool = build(&spec, opts, &recorder);
                let out = run_load(&pool, YieldOnce, &load).await;
                pool.0.close().await;
                out
            });
            rt.shutdown_timeout(Duration::from_secs(1));
            if !out.stuck && out.errors == 0 {
                s2.push(out.rate());
            }
        }
        let rendered = recorder.handle().render();
        rows.push(OptionRow {
            options: opts,
            label: opts.label(),
            s1_ns: median(&s1),
            s2_cycles_per_sec: median(&s2),
            exported_lines: rendered
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .count(),
        });
    }
    rows
}
