//! Where the two runtime workers' cores sit relative to each other, probed
//! before every S2/S3 run.
//!
//! On the 2-vCPU virtual machines these benchmarks run on, the hypervisor
//! moves the two vCPUs between nearby cores (a cache-line round trip of
//! about 70 ns) and distant ones (about 350 ns), from one second to the
//! next. Every contended cycle moves a few cache lines between the workers,
//! so a run's throughput halves on the distant placement, for every pool.
//! Runs are therefore tagged with the round trip measured just before them
//! and compared within the same placement (see `LoadRow::near`/`far`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Round trips above this many nanoseconds count as the distant placement
/// (the two clusters seen here sit near 70 ns and near 350 ns).
pub const FAR_NS: f64 = 180.0;

/// Round trips per batch, batches per probe, and the most time a probe may
/// take.
const BATCH: u64 = 500;
const BATCHES: usize = 21;
const PROBE_LIMIT: Duration = Duration::from_millis(100);

/// Nanoseconds for one cache-line round trip between two threads (a
/// ping-pong on one atomic), as the OS places them right now: the median
/// of short batches, so the partner thread's start and a preempted batch do
/// not count. Bounded by `BATCHES` and `PROBE_LIMIT`; NaN if no batch
/// finished in time.
pub fn probe() -> f64 {
    let flag = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + PROBE_LIMIT;
    let total = BATCH * BATCHES as u64;
    let other = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            let mut expect = 1;
            while expect < 2 * total {
                let mut spins = 0u32;
                while flag.load(Ordering::Acquire) != expect {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins & 4095 == 0 && Instant::now() > stop {
                        return;
                    }
                }
                flag.store(expect + 1, Ordering::Release);
                expect += 2;
            }
        })
    };
    let mut batches = Vec::with_capacity(BATCHES);
    let mut i = 0;
    'outer: for _ in 0..BATCHES {
        let started = Instant::now();
        for _ in 0..BATCH {
            flag.store(2 * i + 1, Ordering::Release);
            let mut spins = 0u32;
            while flag.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins & 4095 == 0 && Instant::now() > stop {
                    break 'outer;
                }
            }
            i += 1;
        }
        batches.push(started.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    // Tell the other thread to stop if the probe ran out of time.
    flag.store(u64::MAX, Ordering::Release);
    let _ = other.join();
    if batches.is_empty() {
        return f64::NAN;
    }
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

/// Whether a probe result is the distant placement.
pub fn is_far(round_trip_ns: f64) -> bool {
    round_trip_ns > FAR_NS
}

/// Where a run stayed, from the probes before and after it: `Some(true)` on
/// the far placement throughout, `Some(false)` on the near one, `None` when
/// a probe is missing or the placement changed during the run.
pub fn stayed_far([before, after]: [f64; 2]) -> Option<bool> {
    if before.is_nan() || after.is_nan() {
        return None;
    }
    let far = is_far(before);
    (far == is_far(after)).then_some(far)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_counts_for_a_placement_only_if_it_stayed_there() {
        assert_eq!(stayed_far([70.0, 65.0]), Some(false));
        assert_eq!(stayed_far([320.0, 340.0]), Some(true));
        assert_eq!(stayed_far([70.0, 320.0]), None);
        assert_eq!(stayed_far([f64::NAN, 70.0]), None);
    }

    #[test]
    fn the_probe_returns_a_plausible_round_trip() {
        let ns = probe();
        // Bounds that hold on any machine: a round trip is more than a few
        // ns and, within the 100 ms cap, far less than a millisecond.
        assert!(ns.is_nan() || (1.0..1_000_000.0).contains(&ns), "{ns}");
    }
}
