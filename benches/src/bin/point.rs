//! Runs one S2/S3 point for a few contestants, repeated and interleaved: the
//! quick A/B check and the target to put under a profiler.
//!
//! ```text
//! cargo run --release -p pool-benches --features peers --bin point -- [POOL_SIZE] [TASKS] [SECONDS] [REPEATS] [POOLS] [--workers 1,2,…]
//! # e.g. ours against bb8 and the floor at pool 4, 64 tasks, 1 s runs, 5 repeats
//! target/release/point 4 64 1 5 ours,bb8,floor
//! # the same point on runtimes of 1, 2 and 4 workers (default: 2)
//! target/release/point 16 16 0.5 3 ours,qp,floor --workers 1,2,4
//! # an after_connect-only hook against none (S2 with a hook on connect)
//! target/release/point 4 64 1 5 ours,ours-after-connect
//! ```
//!
//! Prints each run's cycles per second, Jain's index, per-task spread and
//! the cores' placement before and after it (see `placement.rs`), then the
//! medians, each line with its worker count. Worker counts run one after
//! the other; within each, the repeats interleave the pools.

use std::time::Duration;

use pool_benches::runner::{parse_workers, LoadSpec};
use pool_benches::scenarios::contended::{run_once, DEFAULT_WORKERS};
use pool_benches::stats::median;
use pool_benches::Kind;

/// Takes `--workers LIST` out of the arguments (anywhere among them).
fn take_workers(args: &mut Vec<String>) -> Vec<usize> {
    let Some(at) = args.iter().position(|a| a == "--workers") else {
        return vec![DEFAULT_WORKERS];
    };
    args.remove(at);
    if at >= args.len() {
        eprintln!("--workers needs a list, e.g. 1,2,4,8,16");
        std::process::exit(2);
    }
    let list = args.remove(at);
    parse_workers(&list).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    })
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let workers = take_workers(&mut args);
    let num = |i: usize, default: f64| -> f64 {
        args.get(i)
            .map(|s| {
                s.parse().unwrap_or_else(|_| {
                    eprintln!("argument {} is not a number: {s:?}", i + 1);
                    std::process::exit(2)
                })
            })
            .unwrap_or(default)
    };
    let pool_size = num(0, 4.0) as u32;
    let tasks = num(1, 64.0) as usize;
    let secs = num(2, 1.0);
    let repeats = (num(3, 3.0) as usize).clamp(1, 100);
    let kinds: Vec<Kind> = match args.get(4) {
        None => vec![Kind::Ours],
        Some(list) => list
            .split(',')
            .map(|name| {
                Kind::from_label(name.trim()).unwrap_or_else(|| {
                    eprintln!("unknown pool {name:?}");
                    std::process::exit(2)
                })
            })
            .collect(),
    };
    if pool_size == 0 || tasks == 0 || !(0.01..=60.0).contains(&secs) {
        eprintln!("pool size and tasks must be positive, seconds within 0.01..=60");
        std::process::exit(2);
    }
    let spec = LoadSpec {
        tasks,
        duration: Duration::from_secs_f64(secs),
        max_cycles_per_task: 100_000_000,
        grace: Duration::from_secs(5),
        record: false,
        pace: None,
    };
    for &w in &workers {
        run_point(&kinds, pool_size, w, repeats, &spec);
    }
}

/// The repeats of one worker count, interleaved across `kinds`.
fn run_point(kinds: &[Kind], pool_size: u32, workers: usize, repeats: usize, spec: &LoadSpec) {
    let mut rates = vec![Vec::new(); kinds.len()];
    for r in 0..repeats {
        for (i, &kind) in kinds.iter().enumerate() {
            let out = run_once(kind, pool_size, workers, spec);
            if out.jain() < 0.95 {
                let mut sorted = out.per_task.clone();
                sorted.sort_unstable();
                let med = sorted[sorted.len() / 2];
                let low: Vec<usize> = out
                    .per_task
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c * 2 < med)
                    .map(|(i, _)| i)
                    .collect();
                println!(
                    "  median {med}; {} tasks below half: {:?}",
                    low.len(),
                    &low[..low.len().min(40)]
                );
                println!(
                    "  deciles {:?}",
                    (0..10)
                        .map(|d| sorted[d * sorted.len() / 10])
                        .collect::<Vec<_>>()
                );
            }
            let min = out.per_task.iter().min().copied().unwrap_or(0);
            let max = out.per_task.iter().max().copied().unwrap_or(0);
            println!(
                "w={workers} run {r} {:<9} {:>10.0} cycles/s  jain {:.3}  per task {min}..{max}  placement {:.0}/{:.0} ns{}",
                kind.label(),
                out.rate(),
                out.jain(),
                out.placement_ns[0],
                out.placement_ns[1],
                if out.stuck { "  STUCK" } else { "" }
            );
            rates[i].push(out.rate());
        }
    }
    for (kind, r) in kinds.iter().zip(&rates) {
        println!(
            "w={workers} median {:<9} {:>10.0} cycles/s",
            kind.label(),
            median(r)
        );
    }
}
