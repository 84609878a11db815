//! Runs S5 points (PostgreSQL `SELECT 1`, pool 16) for a few database
//! contestants, repeated and interleaved: the quick A/B check of the
//! tokio-postgres managers and the target to put under a profiler.
//!
//! ```text
//! cargo run --release -p pool-benches --features peers --bin dbpoint -- [TASKS] [SECONDS] [REPEATS] [POOLS] [VALIDATION] [RATE]
//! # ours over PostgresManager against the two peers, 256 tasks, 1 s runs, 3 repeats, validation off
//! target/release/dbpoint 256 1 3 ours-mgr,deadpool-pg,bb8-pg off
//! # one contestant for 10 s, to record with `perf record -g`
//! target/release/dbpoint 256 10 1 ours-mgr off
//! # latency at equal throughput: every contestant held to 16 000 queries/s
//! target/release/dbpoint 16 2 5 ours-sqlx,sqlx off 16000
//! ```
//!
//! POOLS: `ours-tp` (the benches' minimal local manager), `ours-mgr`
//! (pool-core's `PostgresManager`), `deadpool-pg`, `bb8-pg`, `ours-sqlx`,
//! `sqlx`. VALIDATION: `off`, `on` or `both` (default `off`). The database
//! is `DATABASE_URL`, else `postgres://postgres@127.0.0.1:5432/test`.
//! RATE (queries per second for all tasks together, default 0: none)
//! paces each task to `TASKS / RATE` between the starts of its cycles, so
//! the contestants' latencies can be compared at one throughput rather
//! than each at its own; a contestant that cannot keep up reads below the
//! rate. A cycle is timed from when it starts, not from when it was due.
//! Prints each run's queries per second, p50, p99, p99.9 and the load
//! average before it, then the medians (latencies too) and each
//! contestant's throughput over the best peer's.

use std::time::Duration;

use pool_benches::pools::pg::DbSpec;
use pool_benches::scenarios::db::{database_url, run_once, DbKind, DbSettings};
use pool_benches::stats::median;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: f64| -> f64 {
        args.get(i).map_or(default, |s| {
            s.parse()
                .unwrap_or_else(|_| fail(&format!("argument {} is not a number: {s:?}", i + 1)))
        })
    };
    let tasks = num(0, 256.0) as usize;
    let secs = num(1, 1.0);
    let repeats = (num(2, 3.0) as usize).clamp(1, 100);
    let kinds: Vec<DbKind> = match args.get(3) {
        None => vec![DbKind::OursPgManager, DbKind::DeadpoolPg, DbKind::Bb8Pg],
        Some(list) => list
            .split(',')
            .map(|n| DbKind::from_short(n.trim()).unwrap_or_else(|e| fail(&e)))
            .collect(),
    };
    let rate = num(5, 0.0);
    if !(rate.is_finite() && rate >= 0.0) {
        fail("rate must be 0 (none) or a positive number of queries per second");
    }
    let rate = (rate > 0.0).then_some(rate);
    let validate = match args.get(4).map(String::as_str) {
        None | Some("off") => vec![false],
        Some("on") => vec![true],
        Some("both") => vec![false, true],
        Some(other) => fail(&format!("validation {other:?}: off, on or both")),
    };
    if tasks == 0 || !(0.05..=60.0).contains(&secs) {
        fail("tasks must be positive, seconds within 0.05..=60");
    }
    let url = database_url();
    let s = DbSettings {
        url: url.clone(),
        pool_size: 16,
        tasks: vec![tasks],
        validate: validate.clone(),
        duration: Duration::from_secs_f64(secs),
        grace: Duration::from_secs(3),
        repeats,
        rate,
    };
    for &v in &validate {
        let spec = DbSpec {
            url: url.clone(),
            max_size: 16,
            validate: v,
            acquire_timeout: Duration::from_secs(30),
        };
        let mut qps = vec![Vec::new(); kinds.len()];
        let mut lat: Vec<[Vec<f64>; 3]> = vec![Default::default(); kinds.len()];
        for r in 0..repeats {
            for (i, &kind) in kinds.iter().enumerate() {
                let before = load();
                let m = run_once(kind, &spec, tasks, &s);
                println!(
                    "tasks={tasks} validation={} run {r} {:<24} {:>8.0} qps  p50 {:>6.0} p99 {:>7.0} p99.9 {:>7.0} µs  jain {:.3}  errors {}  load {before}{}",
                    if v { "on" } else { "off" },
                    kind.label(),
                    m.qps,
                    m.latency_us[0],
                    m.latency_us[1],
                    m.p999_us,
                    m.jain,
                    m.errors,
                    m.first_error.map(|e| format!("  ({e})")).unwrap_or_default()
                );
                qps[i].push(m.qps);
                for (l, x) in lat[i]
                    .iter_mut()
                    .zip([m.latency_us[0], m.latency_us[1], m.p999_us])
                {
                    l.push(x);
                }
            }
        }
        let medians: Vec<f64> = qps.iter().map(|q| median(q)).collect();
        let best_peer = kinds
            .iter()
            .zip(&medians)
            .filter(|(k, _)| !k.is_ours())
            .map(|(_, &m)| m)
            .fold(0.0_f64, f64::max);
        for ((kind, m), l) in kinds.iter().zip(&medians).zip(&lat) {
            let vs = if kind.is_ours() && best_peer > 0.0 {
                format!("  {:.2}× best peer", m / best_peer)
            } else {
                String::new()
            };
            println!(
                "median tasks={tasks} validation={} {:<24} {m:>8.0} qps  p50 {:>6.0} p99 {:>7.0} p99.9 {:>7.0} µs{vs}",
                if v { "on" } else { "off" },
                kind.label(),
                median(&l[0]),
                median(&l[1]),
                median(&l[2]),
            );
        }
    }
}
