//! Pool suspension: while suspended, `get()` waits within its
//! time limit and nothing is opened or retired; connections in use keep
//! working and come back to the idle set; `resume()` serves the waiters;
//! `close()` works while suspended.

use std::time::Duration;

use crate::support;
use crate::support::{config, until};
use pool_core::PoolError;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn suspend_blocks_new_connects_and_resume_serves_the_waiter() {
    let (mock, pool) = support::pool(config(4)).await;
    assert_eq!(mock.script.connects(), 1);
    let held = pool.get().await.unwrap();

    pool.suspend();
    assert!(pool.is_suspended());
    assert!(
        pool.try_get().is_none(),
        "nothing handed out while suspended"
    );
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get_timeout(ms(10_000)).await.map(|c| c.id) })
    };
    until(|| pool.state().waiting == 1).await;
    // Time passes: the waiter's demand opens nothing.
    tokio::time::sleep(ms(3_000)).await;
    assert_eq!(mock.script.connects(), 1, "no connect while suspended");
    assert!(!waiter.is_finished(), "the waiter waits");

    // A connection in use keeps working and comes back to the idle set,
    // not to the waiter.
    let id = held.id;
    drop(held);
    tokio::time::sleep(ms(100)).await;
    assert!(
        !waiter.is_finished(),
        "not handed to the waiter while suspended"
    );
    let m = pool.metrics();
    assert_eq!((m.idle, m.in_use, m.waiting), (1, 0, 1), "{m:?}");

    pool.resume();
    assert!(!pool.is_suspended());
    let got = waiter.await.unwrap().expect("served on resume");
    assert_eq!(got, id, "the idle connection, not a new one");
    assert_eq!(mock.script.connects(), 1);
}

#[tokio::test(start_paused = true)]
async fn resume_opens_the_connections_the_waiters_need() {
    let (mock, pool) = support::lazy(config(2));
    pool.suspend();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get_timeout(ms(10_000)).await.map(drop) })
    };
    until(|| pool.state().waiting == 1).await;
    tokio::time::sleep(ms(2_000)).await;
    assert_eq!(
        mock.script.connects(),
        0,
        "lazy and suspended: nothing opened"
    );
    pool.resume();
    waiter
        .await
        .unwrap()
        .expect("a new connection after resume");
    assert_eq!(mock.script.connects(), 1);
}

#[tokio::test(start_paused = true)]
async fn get_times_out_while_suspended() {
    let (mock, pool) = support::pool(config(2)).await;
    pool.suspend();
    let err = pool.get_timeout(ms(500)).await.unwrap_err();
    assert_eq!(support::assert_wait_timeout(&err), ms(500), "{err:?}");
    pool.resume();
    let conn = pool.get().await.expect("the idle connection after resume");
    drop(conn);
    assert_eq!(mock.script.connects(), 1, "the parked connection came back");
    assert_eq!(pool.metrics().idle, 1);
}

#[tokio::test(start_paused = true)]
async fn the_housekeeper_retires_nothing_while_suspended() {
    let (_, pool) = support::pool(
        config(2)
            .idle_timeout(ms(1_000))
            .max_lifetime(ms(5_000))
            .housekeeping_period(ms(200)),
    )
    .await;
    pool.suspend();
    tokio::time::sleep(ms(10_000)).await;
    assert_eq!(pool.metrics().idle, 1, "kept while suspended");
    assert_eq!(pool.metrics().eviction_count, 0);
    pool.resume();
    tokio::time::sleep(ms(1_000)).await;
    assert_eq!(pool.metrics().idle, 0, "retired once resumed");
    assert!(pool.metrics().eviction_count >= 1);
}

#[tokio::test(start_paused = true)]
async fn close_works_while_suspended() {
    let (mock, pool) = support::pool(config(3).min_size(2)).await;
    let held = pool.get().await.unwrap();
    pool.suspend();
    // A waiter parks the idle connection it finds, then waits.
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get_timeout(ms(10_000)).await.map(drop) })
    };
    until(|| pool.state().waiting == 1).await;
    let closing = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.close().await })
    };
    let err = waiter.await.unwrap().unwrap_err();
    assert!(matches!(err, PoolError::Closed), "{err:?}");
    // The connection in use still works, and closing waits for it.
    assert!(!closing.is_finished());
    drop(held);
    closing.await.unwrap();
    assert_eq!(mock.script.alive(), 0, "every connection closed");
    assert_eq!(pool.metrics().total, 0);
}
