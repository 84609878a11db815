//! The return path: broken connections are closed, dirty ones reset eagerly
//! before anyone else gets them, and a failed reset closes the connection.

use crate::support;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::{config, Mock};
use pool_core::Pool;

/// Waits for the return path to finish (bounded; see `support::eventually`).
async fn settle(pool: &Pool<Mock>) {
    support::eventually("the return completes", || pool.metrics().in_use == 0).await;
}

#[tokio::test]
async fn broken_return_is_closed() {
    let (mock, pool) = support::pool(config(2)).await;
    let mut conn = pool.get().await.unwrap();
    let id = conn.id;
    conn.broken = true;
    drop(conn);
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.broken), (0, 1));
    assert_eq!(mock.script.alive(), 0);
    assert_ne!(pool.get().await.unwrap().id, id);
}

#[tokio::test(start_paused = true)]
async fn dirty_return_is_reset_eagerly_before_reuse() {
    let mock = Mock::with_reset_delay(5);
    let pool = support::started(&mock, config(1)).await;
    let mut conn = pool.get().await.unwrap();
    let id = conn.id;
    conn.dirty = true;
    drop(conn);
    // Not idle while dirty: nobody can take it before the reset.
    assert!(pool.try_get().is_none());
    // Reset runs without anyone asking for the connection (the paused
    // clock jumps over its 5 ms once every task waits on a timer).
    settle(&pool).await;
    assert_eq!(mock.script.resets.load(Ordering::SeqCst), 1);
    support::eventually("the reset connection is idle", || pool.metrics().idle == 1).await;
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.id, id, "a reset connection is kept");
    assert!(!conn.dirty);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_gets_the_connection_only_after_its_reset() {
    let mock = Mock::with_reset_delay(10);
    let pool = support::started(&mock, config(1)).await;
    let mut conn = pool.get().await.unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let c = pool.get().await.unwrap();
            c.dirty
        })
    };
    support::until(|| pool.metrics().waiting > 0).await;
    conn.dirty = true;
    drop(conn);
    assert!(
        !waiter.await.unwrap(),
        "the waiter was handed a dirty connection"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_reset_closes_the_connection() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_reset, true);
    let pool = support::started(&mock, config(1)).await;
    let mut conn = pool.get().await.unwrap();
    let id = conn.id;
    conn.dirty = true;
    drop(conn);
    settle(&pool).await;
    support::eventually("the failed reset is counted", || {
        pool.metrics().evictions.reset_failed == 1
    })
    .await;
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.reset_failed), (0, 1), "{m:?}");
    assert_eq!(mock.script.alive(), 0);
    let conn = pool.get().await.unwrap();
    assert_ne!(conn.id, id);
}

#[tokio::test(start_paused = true)]
async fn reset_that_hangs_is_cut_off_by_validation_timeout() {
    let mock = Mock::with_reset_delay(60_000);
    let pool = support::started(
        &mock,
        config(1).validation_timeout(Duration::from_millis(100)),
    )
    .await;
    let mut conn = pool.get().await.unwrap();
    conn.dirty = true;
    drop(conn);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.reset_failed), (0, 1), "{m:?}");
}

#[test]
fn dirty_return_outside_a_runtime_is_closed_not_lost() {
    let mock = Mock::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = rt
        .block_on(Pool::new(mock.clone(), config(1).build().unwrap()))
        .unwrap();
    let mut conn = rt.block_on(pool.get()).unwrap();
    conn.dirty = true;
    drop(conn); // no runtime entered here: no task can run the reset
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.reset_failed), (0, 1));
    assert_eq!(mock.script.alive(), 0);
}
