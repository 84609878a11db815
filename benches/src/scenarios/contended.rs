//! S2 (throughput under contention) and S3 (handoff under exhaustion): the
//! same task loop on a multi-thread runtime (2 workers unless `--workers`
//! says otherwise), one fresh runtime and pool per run.

use std::time::Duration;

use serde::Serialize;

use crate::contestant::{Contestant, Kind};
use crate::fake::FakeSpec;
use crate::placement;
use crate::runner::{multi_thread, run_load, LoadOutcome, LoadSpec, YieldOnce};
use crate::stats::{self, median, FAIR_ENOUGH};
use crate::with_noop_pool;

/// The runtime's workers S2 and S3 have always run on, and still do unless
/// told otherwise: the figures of earlier runs stay comparable.
pub const DEFAULT_WORKERS: usize = 2;

/// Counts and bounds of the S2/S3 runs.
#[derive(Debug, Clone)]
pub struct LoadSettings {
    /// The (pool size, tasks) points, in order.
    pub points: Vec<(u32, usize)>,
    /// The runtime's worker threads.
    pub workers: usize,
    /// Length of one run.
    pub duration: Duration,
    /// Watchdog: time allowed after the stop for the tasks to finish.
    pub grace: Duration,
    /// Repeats of every point, interleaved across contestants.
    pub repeats: usize,
    /// Record acquire waits (S3).
    pub record: bool,
}

/// Every pool size with every task count, pool size first.
pub fn grid(pool_sizes: &[u32], tasks: &[usize]) -> Vec<(u32, usize)> {
    pool_sizes
        .iter()
        .flat_map(|&p| tasks.iter().map(move |&t| (p, t)))
        .collect()
}

/// Parses points such as `16x16,64x64,16x256` (pool size `x` tasks).
pub fn parse_points(list: &str) -> Result<Vec<(u32, usize)>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parsed = item
            .split_once(['x', 'X'])
            .and_then(|(p, t)| Some((p.trim().parse().ok()?, t.trim().parse().ok()?)));
        match parsed {
            Some((p, t)) if p > 0 && t > 0 => out.push((p, t)),
            _ => return Err(format!("point {item:?} is not POOLxTASKS, e.g. 16x256")),
        }
    }
    if out.is_empty() {
        return Err("--points needs a list such as 16x16,16x256".to_owned());
    }
    Ok(out)
}

/// One contestant at one (pool size, tasks) point.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRow {
    /// Contestant.
    pub pool: String,
    /// The runtime's worker threads.
    pub workers: usize,
    /// Pool size.
    pub pool_size: u32,
    /// Tasks.
    pub tasks: usize,
    /// Median cycles per second over the repeats.
    pub cycles_per_sec: f64,
    /// Every repeat's cycles per second.
    pub runs: Vec<f64>,
    /// Lowest Jain's index over the repeats.
    pub jain: f64,
    /// Fewest and most cycles one task completed (in the worst-Jain run).
    pub min_task: u64,
    /// See `min_task`.
    pub max_task: u64,
    /// A repeat's tasks got stuck past the watchdog.
    pub stuck: bool,
    /// Errors over all repeats, with the first one's text.
    pub errors: u64,
    /// The first error, if any.
    pub first_error: Option<String>,
    /// Acquire wait p50 / p99 / max in µs (S3 only; medians of the repeats,
    /// max over them).
    pub wait_us: Option<[f64; 3]>,
    /// Not stuck, no errors, Jain ≥ `FAIR_ENOUGH`.
    pub valid: bool,
    /// Each repeat's cache-line round trip between two threads, probed just
    /// before and just after it, ns (see `placement.rs`).
    pub placement_ns: Vec<[f64; 2]>,
    /// Median cycles per second of the repeats that stayed on the near
    /// placement throughout.
    pub near: Option<f64>,
    /// The same for the far placement.
    pub far: Option<f64>,
}

/// One run of one contestant: fresh runtime of `workers` workers, fresh
/// pool.
pub fn run_once(kind: Kind, pool_size: u32, workers: usize, spec: &LoadSpec) -> LoadOutcome {
    let before = placement::probe();
    let rt = multi_thread(workers);
    let fake = FakeSpec::noop(pool_size);
    let out = rt.block_on(async {
        with_noop_pool!(kind, &fake, |pool| {
            let out = run_load(&pool, YieldOnce, spec).await;
            if !out.stuck {
                pool.shutdown().await;
            }
            out
        })
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    LoadOutcome {
        placement_ns: [before, placement::probe()],
        ..out
    }
}

/// Runs every point for every contestant in `kinds`.
pub fn run(kinds: &[Kind], s: &LoadSettings) -> Vec<LoadRow> {
    let mut rows = Vec::new();
    for &(pool_size, tasks) in &s.points {
        let spec = LoadSpec {
            tasks,
            duration: s.duration,
            max_cycles_per_task: 10_000_000,
            grace: s.grace,
            record: s.record,
            pace: None,
        };
        let mut outs: Vec<Vec<LoadOutcome>> = vec![Vec::new(); kinds.len()];
        for _ in 0..s.repeats {
            for (i, &kind) in kinds.iter().enumerate() {
                outs[i].push(run_once(kind, pool_size, s.workers, &spec));
            }
        }
        for (kind, outs) in kinds.iter().zip(outs) {
            rows.push(row(*kind, pool_size, tasks, s.workers, outs));
        }
    }
    rows
}

fn row(
    kind: Kind,
    pool_size: u32,
    tasks: usize,
    workers: usize,
    mut outs: Vec<LoadOutcome>,
) -> LoadRow {
    let runs: Vec<f64> = outs.iter().map(LoadOutcome::rate).collect();
    let placement_ns: Vec<[f64; 2]> = outs.iter().map(|o| o.placement_ns).collect();
    let on = |far: bool| {
        let rates: Vec<f64> = outs
            .iter()
            .filter(|o| o.far() == Some(far))
            .map(LoadOutcome::rate)
            .collect();
        (!rates.is_empty()).then(|| median(&rates))
    };
    let (near, far) = (on(false), on(true));
    let worst = outs
        .iter()
        .min_by(|a, b| a.jain().total_cmp(&b.jain()))
        .expect("at least one repeat");
    let jain = worst.jain();
    let min_task = worst.per_task.iter().copied().min().unwrap_or(0);
    let max_task = worst.per_task.iter().copied().max().unwrap_or(0);
    let stuck = outs.iter().any(|o| o.stuck);
    let errors = outs.iter().map(|o| o.errors).sum();
    let first_error = outs.iter().find_map(|o| o.first_error.clone());
    let wait_us = outs.iter().all(|o| !o.waits_ns.is_empty()).then(|| {
        let per: Vec<[u64; 3]> = outs
            .iter_mut()
            .map(|o| stats::summary(&mut o.waits_ns))
            .collect();
        let us = |i: usize| per.iter().map(|p| p[i] as f64 / 1e3).collect::<Vec<_>>();
        let max = us(2).into_iter().fold(0.0, f64::max);
        [median(&us(0)), median(&us(1)), max]
    });
    LoadRow {
        pool: kind.label().to_owned(),
        workers,
        pool_size,
        tasks,
        cycles_per_sec: median(&runs),
        runs,
        jain,
        min_task,
        max_task,
        stuck,
        errors,
        first_error,
        wait_us,
        valid: !stuck && errors == 0 && jain >= FAIR_ENOUGH,
        placement_ns,
        near,
        far,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_and_grids_expand() {
        assert_eq!(
            parse_points("16x16, 64X64,16x256"),
            Ok(vec![(16, 16), (64, 64), (16, 256)])
        );
        assert!(parse_points("16").is_err());
        assert!(parse_points("0x4").is_err());
        assert!(parse_points("").is_err());
        assert_eq!(grid(&[4, 16], &[8]), vec![(4, 8), (16, 8)]);
    }
}
