//! S1: one task, get + drop, ns per cycle, on a current-thread runtime (the
//! default) or on a multi-thread runtime of N workers (`--workers`); and the
//! floor of four uncontended atomic read-modify-writes.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use serde::Serialize;

use crate::contestant::{Contestant, Kind};
use crate::fake::FakeSpec;
use crate::runner::run_on;
use crate::stats::median;
use crate::with_noop_pool;

/// Counts and bounds of an S1 run.
#[derive(Debug, Clone)]
pub struct S1Settings {
    /// Pool size (the same for all).
    pub pool_size: u32,
    /// Cycles per repeat.
    pub iters: u64,
    /// Time bound per repeat.
    pub time_limit: Duration,
    /// Repeats; the median is reported.
    pub repeats: usize,
    /// The runtime: `None` for the current-thread one, else a multi-thread
    /// runtime with this many workers (the task runs on one of them).
    pub workers: Option<usize>,
}

/// One contestant's S1 figure.
#[derive(Debug, Clone, Serialize)]
pub struct S1Row {
    /// Contestant.
    pub pool: String,
    /// The runtime's workers; `null`: the current-thread runtime.
    pub workers: Option<usize>,
    /// Median ns per get + drop.
    pub ns_per_cycle: f64,
    /// Every repeat's figure.
    pub runs: Vec<f64>,
    /// All cycles succeeded.
    pub valid: bool,
}

/// Times `iters` get + drop cycles (bounded by `limit`) on the current task.
/// `None` if a get failed.
pub async fn get_drop_loop<P: Contestant>(pool: &P, iters: u64, limit: Duration) -> Option<f64> {
    for _ in 0..1_000 {
        drop(pool.get().await.ok()?);
    }
    let start = Instant::now();
    let mut done = 0u64;
    while done < iters {
        for _ in 0..1_024 {
            let guard = pool.get().await.ok()?;
            drop(black_box(guard));
        }
        done += 1_024;
        if start.elapsed() > limit {
            break;
        }
    }
    Some(start.elapsed().as_nanos() as f64 / done as f64)
}

/// S1 for one no-op contestant.
pub fn run(kind: Kind, s: &S1Settings) -> S1Row {
    let mut runs = Vec::new();
    let mut valid = true;
    for _ in 0..s.repeats {
        let spec = FakeSpec::noop(s.pool_size);
        let (iters, limit) = (s.iters, s.time_limit);
        let ns = run_on(s.workers, async move {
            with_noop_pool!(kind, &spec, |pool| {
                let ns = get_drop_loop(&pool, iters, limit).await;
                pool.shutdown().await;
                ns
            })
        });
        match ns {
            Some(ns) => runs.push(ns),
            None => valid = false,
        }
    }
    S1Row {
        pool: kind.label().to_owned(),
        workers: s.workers,
        ns_per_cycle: median(&runs),
        runs,
        valid,
    }
}

/// The S1 floor: ns for the four uncontended atomic read-modify-writes an
/// ideal pool's get + drop needs (get: a CAS on the idle stack's head and a
/// count update; drop: the same again), with nothing else.
pub fn atomics_floor(s: &S1Settings) -> S1Row {
    let cells: [CachePadded<AtomicUsize>; 4] = Default::default();
    let mut runs = Vec::new();
    for _ in 0..s.repeats {
        let start = Instant::now();
        let mut done = 0u64;
        while done < s.iters {
            for _ in 0..1_024 {
                let c = black_box(&cells);
                // get: pop the head, count in use
                let head = c[0].load(Ordering::Relaxed);
                let _ = c[0].compare_exchange(head, head + 1, Ordering::AcqRel, Ordering::Relaxed);
                c[1].fetch_add(1, Ordering::Relaxed);
                // drop: push the head, count idle
                let head = c[0].load(Ordering::Relaxed);
                let _ = c[0].compare_exchange(head, head - 1, Ordering::AcqRel, Ordering::Relaxed);
                c[1].fetch_sub(1, Ordering::Relaxed);
            }
            done += 1_024;
            if start.elapsed() > s.time_limit {
                break;
            }
        }
        runs.push(start.elapsed().as_nanos() as f64 / done as f64);
    }
    S1Row {
        pool: "4 atomic RMWs".to_owned(),
        workers: None,
        ns_per_cycle: median(&runs),
        runs,
        valid: true,
    }
}
