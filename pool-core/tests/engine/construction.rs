//! `new` opens connections up front and fails fast; `new_lazy` opens
//! nothing until needed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support;
use crate::support::{config, Mock};
use pool_core::{Pool, PoolError, TimeoutPhase};

#[tokio::test]
async fn new_opens_min_size_or_one() {
    let (_, pool) = support::pool(config(4)).await;
    assert_eq!(pool.metrics().idle, 1);
    let mock2 = Mock::default();
    let pool2 = support::started(&mock2, config(4).min_size(3)).await;
    assert_eq!(pool2.metrics().idle, 3);
    assert_eq!(mock2.script.connects(), 3);
    drop(pool);
}

#[tokio::test]
async fn new_fails_fast_on_an_unreachable_database() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    let started = std::time::Instant::now();
    let err = Pool::new(mock.clone(), config(4).build().unwrap())
        .await
        .unwrap_err();
    support::assert_backend_error(&err, "connection refused");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it should not wait for acquire_timeout"
    );
    assert_eq!(mock.script.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn new_reports_a_connect_timeout_as_such() {
    let mock = Mock::with_connect_delay(60_000);
    let err = Pool::new(
        mock.clone(),
        config(4)
            .connect_timeout(Duration::from_millis(100))
            .build()
            .unwrap(),
    )
    .await
    .unwrap_err();
    match err {
        PoolError::Timeout { phase, waited, .. } => {
            assert_eq!(phase, TimeoutPhase::Connect);
            // The first timed-out connect is retried once at once, as any
            // first failed connect is: two connect timeouts in all.
            assert_eq!(waited, Duration::from_millis(200));
        }
        other => panic!("expected a connect timeout, got {other:?}"),
    }
    assert_eq!(mock.script.connects(), 2);
}

#[tokio::test(start_paused = true)]
async fn new_lazy_opens_nothing_until_needed() {
    let (mock, pool) = support::lazy(config(4));
    // A day on the paused clock, past every timer the pool could have set:
    // the runtime was idle throughout, and nothing was opened.
    tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
    assert_eq!(mock.script.connects(), 0);
    assert_eq!(pool.metrics().total, 0);
    let conn = pool.get().await.unwrap();
    assert_eq!(mock.script.connects(), 1);
    drop(conn);
    assert_eq!(pool.metrics().idle, 1);
}

#[test]
fn new_lazy_outside_a_runtime_does_not_panic() {
    let pool = Pool::new_lazy(Mock::default(), config(1).build().unwrap());
    assert!(pool.try_get().is_none());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let conn = rt.block_on(pool.get()).unwrap();
    drop(conn);
    assert_eq!(pool.metrics().idle, 1);
}

#[tokio::test]
async fn dropping_the_last_handle_drops_the_manager() {
    let (mock, pool) = support::pool(config(2).min_size(2)).await;
    assert_eq!(mock.script.alive(), 2);
    drop(pool);
    // The housekeeper holds only a weak reference: connections and manager go.
    assert_eq!(mock.script.alive(), 0);
    assert_eq!(std::sync::Arc::strong_count(&mock.script), 1);
}

/// A failing `Pool::new` retries its first connect once at once, then
/// gives its slot back quietly: no refill connect starts behind the error
/// it is about to return: none has started a day later on the paused
/// clock, every back-off and housekeeping tick long past.
#[tokio::test(start_paused = true)]
async fn a_failed_new_starts_no_other_connect() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    mock.script.connect_delay_ms.store(5, Ordering::SeqCst);
    let err = Pool::new(mock.clone(), config(4).min_size(3).build().unwrap()).await;
    assert!(err.is_err());
    tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
    assert_eq!(
        mock.script.connects(),
        2,
        "the first connect and its one retry"
    );
}

/// The largest valid pool works: slot indices 0..=65534 are all usable and
/// the stacks' empty marker (65535) is never one of them.
#[tokio::test]
async fn a_pool_at_max_pool_size_gets_returns_and_reports() {
    let max = pool_core::MAX_POOL_SIZE;
    let (mock, pool) = support::pool(config(max)).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(pool.get().await.unwrap());
    }
    let m = pool.metrics();
    assert_eq!((m.max_size, m.in_use, m.total), (max, 3, 3), "{m:?}");
    drop(held);
    let m = pool.metrics();
    assert_eq!((m.idle, m.in_use, m.total), (3, 0, 3), "{m:?}");
    assert_eq!(m.acquire_count, 3);
    assert_eq!(i64::from(m.total), mock.script.alive());
    let conn = pool.get().await.unwrap();
    assert!(
        conn.id < 3,
        "an idle connection is reused, got #{}",
        conn.id
    );
}
