//! Wait deadlines are kept by one sweeper per pool instead of a timer per
//! waiter: each waiter still times out at its own deadline, whatever the
//! order in which they queued.

use crate::support;
use std::time::Duration;

use crate::support::{config, until, Mock};
use pool_core::{PoolError, TimeoutPhase};

fn waited(r: Result<pool_core::PooledConnection<Mock>, PoolError<support::MockError>>) -> Duration {
    match r {
        Err(PoolError::Timeout {
            waited,
            phase: TimeoutPhase::Wait,
            ..
        }) => waited,
        other => panic!("expected a wait timeout, got {:?}", other.map(|c| c.id)),
    }
}

/// A short deadline queued behind a long one (and behind one with no
/// deadline at all) still fires on time: the sweeper re-arms for it.
#[tokio::test(start_paused = true)]
async fn an_earlier_deadline_queued_later_fires_first() {
    let (pool, _held) = support::held_one().await;
    let forever = support::spawn_on(&pool, |pool| async move {
        pool.get_timeout(Duration::MAX).await.map(|c| c.id)
    });
    until(|| pool.metrics().waiting == 1).await;
    let long = support::spawn_on(&pool, |pool| async move {
        waited(pool.get_timeout(Duration::from_secs(10)).await)
    });
    until(|| pool.metrics().waiting == 2).await;
    let short = support::spawn_on(&pool, |pool| async move {
        waited(pool.get_timeout(Duration::from_millis(100)).await)
    });
    assert_eq!(short.await.unwrap(), Duration::from_millis(100));
    assert_eq!(pool.metrics().waiting, 2, "the others still wait");
    assert_eq!(long.await.unwrap(), Duration::from_secs(10));
    assert_eq!(pool.metrics().waiting, 1);
    assert!(!forever.is_finished(), "no deadline: waits until served");
    drop(_held);
    assert!(forever.await.unwrap().is_ok());
}

/// Many waiters with staggered deadlines each time out at their own.
#[tokio::test(start_paused = true)]
async fn each_waiter_times_out_at_its_own_deadline() {
    let (pool, _held) = support::held_one().await;
    let mut waiters = Vec::new();
    for i in (1..=20u64).rev() {
        let pool = pool.clone();
        let limit = Duration::from_millis(7 * i);
        waiters.push((
            limit,
            tokio::spawn(async move { waited(pool.get_timeout(limit).await) }),
        ));
    }
    for (limit, w) in waiters {
        assert_eq!(w.await.unwrap(), limit);
    }
    let m = pool.metrics();
    assert_eq!((m.waiting, m.timeout_count), (0, 20), "{m:?}");
}

/// A waiter served before its deadline is not timed out later, and the
/// next caller can still use the pool at once.
#[tokio::test(start_paused = true)]
async fn a_served_waiter_is_not_timed_out() {
    let (pool, held) = support::held_one().await;
    let waiter = support::spawn_on(&pool, |pool| async move {
        let c = pool.get_timeout(Duration::from_millis(100)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.id
    });
    until(|| pool.metrics().waiting == 1).await;
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(waiter.await.unwrap(), 0);
    assert_eq!(pool.metrics().timeout_count, 0);
}

/// Dropping the pool ends the sweeper, and the manager is dropped with it.
#[tokio::test(start_paused = true)]
async fn dropping_the_pool_ends_the_sweeper() {
    let (mock, pool) = support::pool(config(1)).await;
    let held = pool.get().await.unwrap();
    // Arms the sweeper for 60 s.
    let r = tokio::time::timeout(
        Duration::from_millis(10),
        pool.get_timeout(Duration::from_secs(60)),
    )
    .await;
    assert!(r.is_err());
    drop(held);
    drop(pool);
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        std::sync::Arc::strong_count(&mock.script),
        1,
        "the manager is still held"
    );
}
