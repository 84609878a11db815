//! `Pool::metrics()`: the snapshot invariant under concurrent load, counters
//! that add up, and acquire-wait percentiles against a known distribution.

use crate::support;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{config, Mock};
use pool_core::{PoolMetrics, PooledConnection};

/// Counters never go down between two snapshots.
fn assert_monotonic(before: &PoolMetrics, after: &PoolMetrics) {
    let pairs = [
        (before.acquire_count, after.acquire_count, "acquire_count"),
        (before.timeout_count, after.timeout_count, "timeout_count"),
        (
            before.creation_count,
            after.creation_count,
            "creation_count",
        ),
        (
            before.creation_error_count,
            after.creation_error_count,
            "creation_error_count",
        ),
        (
            before.eviction_count,
            after.eviction_count,
            "eviction_count",
        ),
        (before.leak_count, after.leak_count, "leak_count"),
    ];
    for (b, a, name) in pairs {
        assert!(a >= b, "{name} went down: {b} -> {a}");
    }
    assert!(after.acquire_wait_max >= before.acquire_wait_max);
    assert!(after.acquire_wait_total >= before.acquire_wait_total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snapshot_is_consistent_under_concurrent_load() {
    const WORKERS: u64 = 8;
    const ROUNDS: u64 = 300;
    let mock = Mock::default();
    let max = 4;
    let pool = support::started(
        &mock,
        config(max)
            .min_size(1)
            .max_concurrent_connects(2)
            .acquire_timeout(Duration::from_secs(30)),
    )
    .await;
    let done = Arc::new(AtomicBool::new(false));
    let acquired = Arc::new(AtomicU64::new(0));

    let sampler = {
        let pool = pool.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut last = pool.metrics();
            let mut samples = 0u64;
            // Bounded: the workers finish long before this many samples.
            for _ in 0..5_000_000u64 {
                support::assert_bounds(&pool);
                let m = pool.metrics();
                assert_eq!(m.max_size, max);
                assert_monotonic(&last, &m);
                last = m;
                samples += 1;
                if done.load(Ordering::SeqCst) {
                    return samples;
                }
                if samples.is_multiple_of(64) {
                    tokio::task::yield_now().await;
                }
            }
            panic!("workers did not finish");
        })
    };

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let pool = pool.clone();
            let acquired = acquired.clone();
            tokio::spawn(async move {
                for i in 0..ROUNDS {
                    let mut conn = pool.get().await.expect("get");
                    acquired.fetch_add(1, Ordering::Relaxed);
                    conn.uses.push(w);
                    tokio::task::yield_now().await;
                    match (w * ROUNDS + i) % 29 {
                        0 => conn.broken = true,
                        1 => PooledConnection::discard(conn),
                        _ => drop(conn),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let samples = sampler.await.unwrap();
    assert!(samples > 0);

    // Quiescent: nothing in use, every connection opened is either still
    // open or counted as evicted, and every checkout was counted.
    support::until(|| pool.metrics().opening == 0).await;
    support::assert_settled(&pool);
    let m = pool.metrics();
    assert_eq!(m.in_use, 0, "{m:?}");
    assert_eq!(m.acquire_count, acquired.load(Ordering::Relaxed), "{m:?}");
    assert_eq!(m.acquire_count, WORKERS * ROUNDS, "{m:?}");
    assert_eq!(
        m.creation_count,
        m.eviction_count + u64::from(m.total),
        "{m:?}"
    );
    assert!(m.evictions.broken > 0 && m.evictions.closed > 0, "{m:?}");
    assert_eq!(m.timeout_count, 0, "{m:?}");
    assert_eq!(i64::from(m.total), mock.script.alive(), "{m:?}");
    assert!(mock.script.max_alive() <= i64::from(max));
}

#[tokio::test(start_paused = true)]
async fn wait_percentiles_match_a_known_distribution() {
    // A pool of one. One caller holds the connection for 1 ms; 99 callers
    // queue at t = 0 and each holds it 1 ms in turn, so their waits are
    // exactly 1, 2, ..., 99 ms; the first caller did not wait. Sorted waits
    // are 0..=99 ms: p50 is the 50th (49 ms), p99 the 99th (98 ms).
    const WAITERS: u32 = 99;
    let (_, pool) = support::pool(config(1)).await;
    let first = pool.get().await.unwrap();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let conn = pool.get().await.expect("get");
                tokio::time::sleep(Duration::from_millis(1)).await;
                drop(conn);
            })
        })
        .collect();
    support::until(|| pool.metrics().waiting == WAITERS).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    drop(first);
    for w in waiters {
        w.await.unwrap();
    }

    let m = pool.metrics();
    assert_eq!(m.acquire_count, 100, "{m:?}");
    assert_eq!(m.creation_count, 1, "{m:?}");
    assert_eq!(m.acquire_wait_max, Duration::from_millis(99), "{m:?}");
    assert_eq!(
        m.acquire_wait_total,
        Duration::from_millis(99 * 100 / 2),
        "{m:?}"
    );
    // The histogram has 8 sub-buckets per power of two and reports a
    // bucket's midpoint: within 1/16 of the true value.
    let within = |got: Duration, want_ms: f64| {
        let got_ms = got.as_secs_f64() * 1e3;
        assert!(
            (got_ms - want_ms).abs() <= want_ms / 16.0,
            "got {got_ms} ms, want {want_ms} ms ± 6.25 %: {m:?}"
        );
    };
    within(m.acquire_wait_p50, 49.0);
    within(m.acquire_wait_p99, 98.0);
}

#[tokio::test(start_paused = true)]
async fn percentiles_of_uncontended_checkouts_are_zero() {
    let (_, pool) = support::pool(config(2)).await;
    for _ in 0..50 {
        drop(pool.get().await.unwrap());
    }
    let m = pool.metrics();
    assert_eq!(m.acquire_count, 50);
    assert_eq!(
        (m.acquire_wait_p50, m.acquire_wait_p99, m.acquire_wait_max),
        (Duration::ZERO, Duration::ZERO, Duration::ZERO),
        "{m:?}"
    );
}
