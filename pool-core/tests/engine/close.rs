//! `close()`: new and waiting `get()`s fail with `Closed`, idle connections
//! close at once, and it returns once the in-use ones came back.

use crate::support;
use std::time::Duration;

use crate::support::{config, Mock};
use pool_core::{Pool, PoolError};

/// Past every deadline the pool has (acquire timeout, housekeeping, idle
/// timeout, lifetime): on the paused clock the runtime sits idle all that
/// while, so a `close()` still running then waits on the returns alone.
const PAST_EVERY_DEADLINE: Duration = Duration::from_secs(24 * 3600);

#[tokio::test(start_paused = true)]
async fn close_fails_waiters_and_new_gets_and_waits_for_in_use() {
    let (mock, pool) = support::pool(config(2).min_size(2)).await;
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    drop(b); // one idle, one in use
    let _c = pool.get().await.unwrap(); // now both in use
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get().await })
    };
    support::until(|| pool.metrics().waiting > 0).await;
    drop(_c); // goes to the waiter, who keeps it
    let waiter_conn = waiter.await.unwrap().unwrap();

    let waiter2 = support::spawn_get(&pool);
    support::until(|| pool.metrics().waiting > 0).await;
    let closing = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.close().await })
    };
    assert!(matches!(waiter2.await.unwrap(), Err(PoolError::Closed)));
    assert!(pool.is_closed());
    assert!(matches!(pool.get().await, Err(PoolError::Closed)));
    assert!(pool.try_get().is_none());
    tokio::time::sleep(PAST_EVERY_DEADLINE).await;
    assert!(
        !closing.is_finished(),
        "close returned while connections were in use"
    );
    assert_eq!(mock.script.alive(), 2);
    drop(a);
    tokio::time::sleep(PAST_EVERY_DEADLINE).await;
    assert!(
        !closing.is_finished(),
        "close returned while a connection was in use"
    );
    drop(waiter_conn);
    closing.await.unwrap();
    assert_eq!(mock.script.alive(), 0);
    let m = pool.metrics();
    assert_eq!(m.total, 0, "{m:?}");
}

#[tokio::test]
async fn close_with_nothing_in_use_returns_at_once_and_is_idempotent() {
    let (mock, pool) = support::pool(config(3).min_size(3)).await;
    pool.close().await;
    assert_eq!(mock.script.alive(), 0);
    pool.close().await;
    assert!(pool.is_closed());
}

#[tokio::test]
async fn a_connect_finishing_after_close_is_closed() {
    let mock = Mock::default();
    mock.script
        .connect_delay_ms
        .store(20, std::sync::atomic::Ordering::SeqCst);
    let pool = Pool::new_lazy(mock.clone(), config(1).build().unwrap());
    let getter = support::spawn_get(&pool);
    support::until(|| pool.metrics().opening > 0).await;
    pool.close().await; // waits for the connect in flight
    assert!(matches!(getter.await.unwrap(), Err(PoolError::Closed)));
    assert_eq!(mock.script.alive(), 0);
    assert_eq!(pool.metrics().total, 0);
}
