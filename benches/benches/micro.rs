//! Criterion micro benchmarks: S1 (uncontended get + drop on a
//! current-thread runtime) for every pool, and S6 (ours with the metrics
//! export and leak detection on/off) both uncontended and at one contended
//! point (pool 16, 64 tasks, 2 workers).
//!
//! `cargo bench -p pool-benches --features peers --bench micro`

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use metrics_exporter_prometheus::PrometheusBuilder;
use pool_benches::fake::FakeSpec;
use pool_benches::pools::{noop, peers};
use pool_benches::runner::{current_thread, multi_thread};
use pool_benches::scenarios::options::{self, Options};
use pool_benches::Contestant;

const POOL_SIZE: u32 = 16;

/// Times `iters` get + drop cycles on one task.
fn get_drop<P: Contestant>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    rt: &tokio::runtime::Runtime,
    pool: P,
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    drop(black_box(pool.get().await.expect("get")));
                }
                start.elapsed()
            })
        });
    });
}

fn s1_one<P, F>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, build: impl FnOnce() -> F)
where
    P: Contestant,
    F: Future<Output = P>,
{
    let rt = current_thread();
    let pool = rt.block_on(build());
    get_drop(g, name, &rt, pool);
}

fn s1(c: &mut Criterion) {
    let spec = FakeSpec::noop(POOL_SIZE);
    let mut g = c.benchmark_group("s1_get_drop");
    s1_one(&mut g, "ours", || noop::Ours::build(&spec));
    s1_one(&mut g, "ours_after_connect", || {
        noop::Ours::build_after_connect(&spec)
    });
    s1_one(&mut g, "deadpool", || peers::Deadpool::build(&spec));
    s1_one(&mut g, "bb8", || peers::Bb8::build(&spec));
    s1_one(&mut g, "qp", || peers::Qp::build(&spec));
    s1_one(&mut g, "mobc", || peers::Mobc::build(&spec));
    s1_one(&mut g, "fastpool", || peers::Fastpool::build(&spec));
    s1_one(&mut g, "floor", || noop::Floor::build(&spec));
    g.finish();
}

fn label(o: Options) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    format!("metrics_{}_leak_{}", on(o.metrics), on(o.leak_detection))
}

fn s6_uncontended(c: &mut Criterion) {
    let spec = FakeSpec::noop(POOL_SIZE);
    let mut g = c.benchmark_group("s6_get_drop");
    for o in Options::ALL {
        let recorder = PrometheusBuilder::new().build_recorder();
        let rt = current_thread();
        let pool = rt.block_on(async { options::build(&spec, o, &recorder) });
        get_drop(&mut g, &label(o), &rt, pool);
    }
    g.finish();
}

fn s6_contended(c: &mut Criterion) {
    const TASKS: u64 = 64;
    let spec = FakeSpec::noop(POOL_SIZE);
    let mut g = c.benchmark_group("s6_contended_p16_t64");
    for o in Options::ALL {
        let recorder = PrometheusBuilder::new().build_recorder();
        let rt = multi_thread(2);
        let pool = rt.block_on(async { options::build(&spec, o, &recorder) });
        g.bench_function(label(o), |b| {
            // Each iteration is one cycle (get, yield, drop) of one of 64
            // tasks; criterion divides the elapsed time by the total.
            b.iter_custom(|iters| {
                let per_task = iters.div_ceil(TASKS);
                rt.block_on(async {
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..TASKS)
                        .map(|_| {
                            let pool = pool.clone();
                            tokio::spawn(async move {
                                for _ in 0..per_task {
                                    let guard = pool.get().await.expect("get");
                                    tokio::task::yield_now().await;
                                    drop(guard);
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.expect("task");
                    }
                    start
                        .elapsed()
                        .mul_f64(iters as f64 / (per_task * TASKS) as f64)
                })
            });
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = s1, s6_uncontended, s6_contended
}
criterion_main!(benches);
