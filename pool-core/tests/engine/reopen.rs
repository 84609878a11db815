//! Reopening after an outage: the callers queued while connects failed are
//! served together once the database is back (up to
//! `max_concurrent_reconnects` connects at once, no more than the pool is
//! short of its size at the failures), and the bound is
//! `max_concurrent_connects` again once the pool is back to that size, and
//! while connects fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{self, config, Conn, Mock, MockError};
use pool_core::{async_trait, Hooks, Pool, PooledConnection};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Each connect takes this long, failed or not.
const CONNECT_MS: u64 = 50;

/// `n` callers that each take a connection and keep it until the test
/// drops the handle's result; `get()` waits up to 10 s.
fn queue(pool: &Pool<Mock>, n: usize) -> Vec<JoinHandle<PooledConnection<Mock>>> {
    (0..n)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.get().await.expect("served after the outage") })
        })
        .collect()
}

/// A lazy pool of `max`, connects failing, and `callers` queued through
/// 300 ms of the outage; the connect high-water mark is zeroed before the
/// database comes back.
async fn outage(
    max: u32,
    callers: usize,
    builder: pool_core::PoolConfigBuilder,
) -> (Mock, Pool<Mock>, Vec<JoinHandle<PooledConnection<Mock>>>) {
    let mock = Mock::with_connect_delay(CONNECT_MS);
    let pool = Pool::new_lazy(
        mock.clone(),
        builder
            .max_size(max)
            .acquire_timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
    );
    mock.script.set(&mock.script.fail_connect, true);
    let held = queue(&pool, callers);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = pool.metrics();
    assert!(m.creation_error_count >= 2, "connects failed: {m:?}");
    assert_eq!(m.waiting as usize, callers, "{m:?}");
    assert!(
        mock.script.max_connecting() <= 2,
        "two at a time while failing"
    );
    mock.script.max_connecting.store(0, Ordering::SeqCst);
    (mock, pool, held)
}

/// Watches the pool every millisecond of tokio's clock until `n`
/// connections are in use; when the first and the `n`th were.
async fn served(pool: &Pool<Mock>, n: u32) -> (Instant, Instant) {
    let mut first = None;
    for _ in 0..5_000 {
        let in_use = pool.metrics().in_use;
        if in_use > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if in_use >= n {
            return (first.unwrap_or_else(Instant::now), Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{n} callers not served within 5 s: {:?}", pool.metrics());
}

/// A lazy pool of twelve whose twelve connections, all in use, are found
/// broken at their return (the server restarted under them); with
/// `failing`, connects fail from then on.
async fn all_found_broken(failing: bool) -> (Mock, Pool<Mock>) {
    let mock = Mock::with_connect_delay(CONNECT_MS);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(12)
            .acquire_timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
    );
    let before = queue(&pool, 12);
    served(&pool, 12).await;
    mock.script.set(&mock.script.fail_connect, failing);
    mock.script.close_all_open();
    for h in before {
        drop(h.await.unwrap());
    }
    assert_eq!(pool.metrics().total, 0, "every connection was broken");
    (mock, pool)
}

/// Sixteen callers queued through an outage are served within about one
/// connect of the first success, not eight rounds of two connects.
#[tokio::test(start_paused = true)]
async fn the_callers_queued_through_an_outage_are_served_together() {
    let (mock, pool, held) = outage(16, 16, config(16).fail_fast(false)).await;
    mock.script.set(&mock.script.fail_connect, false);
    let (first, all) = served(&pool, 16).await;
    let gap = all - first;
    assert!(
        gap <= Duration::from_millis(CONNECT_MS + 15),
        "the last caller was served {gap:?} after the first"
    );
    let at_once = mock.script.max_connecting();
    assert!(
        (8..=16).contains(&at_once),
        "{at_once} connects at once while reopening"
    );
    support::assert_bounds(&pool);
    for h in held {
        drop(h.await.unwrap());
    }
}

/// Once the pool is back to its size at the outage the reopening is over:
/// the next burst of demand is opened two at a time, as before it.
#[tokio::test(start_paused = true)]
async fn the_reopening_ends_at_the_size_the_pool_had() {
    let (mock, pool, first_wave) = outage(40, 12, config(40).fail_fast(false)).await;
    mock.script.set(&mock.script.fail_connect, false);
    served(&pool, 12).await;
    assert!(mock.script.max_connecting() > 2, "the outage's callers");
    support::eventually("the reopening's connectors stopped", || {
        pool.metrics().opening == 0
    })
    .await;
    mock.script.max_connecting.store(0, Ordering::SeqCst);
    let second_wave = queue(&pool, 20);
    served(&pool, 32).await;
    assert_eq!(
        mock.script.max_connecting(),
        2,
        "a burst without failures keeps to max_concurrent_connects"
    );
    for h in first_wave.into_iter().chain(second_wave) {
        drop(h.await.unwrap());
    }
    support::assert_settled(&pool);
}

/// A connect failing again ends the reopening: the connects it started
/// finish, and no new one starts above `max_concurrent_connects`.
#[tokio::test(start_paused = true)]
async fn a_failure_while_reopening_ends_it() {
    let (mock, pool, held) = outage(16, 16, config(16).fail_fast(false)).await;
    mock.script.set(&mock.script.fail_connect, false);
    let (_, _) = served(&pool, 1).await;
    // The database goes away again while the reopening's connects run.
    mock.script.set(&mock.script.fail_connect, true);
    tokio::time::sleep(Duration::from_millis(CONNECT_MS + 5)).await;
    mock.script.max_connecting.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let m = pool.metrics();
    assert!(m.waiting > 0, "callers still wait: {m:?}");
    assert!(
        mock.script.max_connecting() <= 2,
        "{} connects at once after the failure",
        mock.script.max_connecting()
    );
    // Back for good: the callers still queued are served.
    mock.script.set(&mock.script.fail_connect, false);
    served(&pool, 16).await;
    for h in held {
        drop(h.await.unwrap());
    }
}

/// `max_concurrent_reconnects(1)` keeps the reopening to
/// `max_concurrent_connects`: the larger of the two applies.
#[tokio::test(start_paused = true)]
async fn a_reconnect_bound_below_the_connect_bound_changes_nothing() {
    let builder = config(8).fail_fast(false).max_concurrent_reconnects(1);
    let (mock, pool, held) = outage(8, 8, builder).await;
    mock.script.set(&mock.script.fail_connect, false);
    let (first, all) = served(&pool, 8).await;
    assert_eq!(mock.script.max_connecting(), 2);
    assert!(
        all - first >= Duration::from_millis(3 * CONNECT_MS),
        "two at a time: four rounds of connects, {:?}",
        all - first
    );
    for h in held {
        drop(h.await.unwrap());
    }
}

/// With fail fast on, the callers of an outage got its error at once; a
/// service retrying them once the database is back is served by one burst
/// of connects, up to the size the pool had: twelve connections in use
/// when the server went away, found broken at their return.
#[tokio::test(start_paused = true)]
async fn fail_fast_callers_retrying_after_an_outage_are_served_together() {
    let (mock, pool) = all_found_broken(true).await;
    let err = pool.get().await.expect_err("the database is down");
    assert!(err.to_string().contains("connection refused"), "{err}");
    mock.script.set(&mock.script.fail_connect, false);
    mock.script.max_connecting.store(0, Ordering::SeqCst);
    let started = Instant::now();
    let callers: Vec<_> = (0..12)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for _ in 0..200 {
                    match pool.get().await {
                        Ok(conn) => return conn,
                        Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                    }
                }
                panic!("not served in 200 tries");
            })
        })
        .collect();
    served(&pool, 12).await;
    let took = started.elapsed();
    assert!(
        took <= Duration::from_millis(3 * CONNECT_MS),
        "twelve callers served in {took:?}"
    );
    assert!(mock.script.max_connecting() > 2);
    support::assert_bounds(&pool);
    for h in callers {
        drop(h.await.unwrap());
    }
    support::assert_settled(&pool);
}

/// An `after_connect` hook refusing every connection is an outage too: the
/// reopening starts once it accepts them again.
#[tokio::test(start_paused = true)]
async fn a_hook_that_refused_connections_then_accepts_them_reopens_together() {
    #[derive(Debug)]
    struct Refusing(Arc<AtomicBool>);

    #[async_trait]
    impl Hooks<Mock> for Refusing {
        async fn after_connect(&self, _: &mut Conn) -> Result<(), MockError> {
            if self.0.load(Ordering::SeqCst) {
                return Err(MockError("SET search_path failed"));
            }
            Ok(())
        }
    }

    let refusing = Arc::new(AtomicBool::new(true));
    let mock = Mock::with_connect_delay(CONNECT_MS);
    let pool = Pool::new_lazy_with_hooks(
        mock.clone(),
        config(16)
            .fail_fast(false)
            .acquire_timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        Refusing(refusing.clone()),
    );
    let held = queue(&pool, 16);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(pool.metrics().creation_error_count >= 2);
    mock.script.max_connecting.store(0, Ordering::SeqCst);
    refusing.store(false, Ordering::SeqCst);
    let (first, all) = served(&pool, 16).await;
    assert!(
        all - first <= Duration::from_millis(CONNECT_MS + 15),
        "{:?}",
        all - first
    );
    assert!(mock.script.max_connecting() >= 8);
    for h in held {
        drop(h.await.unwrap());
    }
}

/// A pool resized below its size at the outage reopens to its new
/// `max_size`: no more connects at once than it has slots, and the callers
/// queued through the outage are served in turn by those connections.
#[tokio::test(start_paused = true)]
async fn a_pool_resized_during_an_outage_reopens_to_its_new_size() {
    let (mock, pool, held) = outage(16, 16, config(16).fail_fast(false)).await;
    pool.resize(4).unwrap();
    mock.script.set(&mock.script.fail_connect, false);
    served(&pool, 4).await;
    assert!(
        mock.script.max_connecting() <= 4,
        "{} connects at once for four slots",
        mock.script.max_connecting()
    );
    assert!(mock.script.max_connecting() > 2, "the four opened together");
    // Each caller gives its connection back in turn: sixteen served by four.
    for h in held {
        drop(h.await.unwrap());
    }
    let m = pool.metrics();
    assert!(m.total <= 4, "{m:?}");
    assert_eq!(m.waiting, 0, "{m:?}");
    support::assert_bounds_within(&pool, 0, 4, 16);
}

/// A server restart no connect saw fail (it was back before any connect
/// was tried): every connection is found broken, and their replacements
/// are opened together, up to the size the pool had.
#[tokio::test(start_paused = true)]
async fn connections_found_broken_are_replaced_together() {
    let (mock, pool) = all_found_broken(false).await;
    assert_eq!(pool.metrics().creation_error_count, 0, "no connect failed");
    mock.script.max_connecting.store(0, Ordering::SeqCst);
    let started = Instant::now();
    let after = queue(&pool, 12);
    served(&pool, 12).await;
    assert!(
        started.elapsed() <= Duration::from_millis(CONNECT_MS + 15),
        "twelve replacements in {:?}",
        started.elapsed()
    );
    assert!(mock.script.max_connecting() > 2);
    for h in after {
        drop(h.await.unwrap());
    }
    support::assert_settled(&pool);
}
