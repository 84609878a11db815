//! Runtime control, in part: `retain` closes the idle connections a predicate
//! rejects; `add` puts a connection made elsewhere in the pool, or gives it
//! back when the pool is full.

use crate::support;
use std::time::Duration;

use crate::support::{assert_bounds, config};
use pool_core::ManageConnection;

#[tokio::test(start_paused = true)]
async fn retain_closes_the_idle_connections_the_predicate_rejects() {
    let (_, pool) = support::pool(config(4).min_size(4)).await;
    let held = pool.get().await.unwrap();
    let held_id = held.id;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut seen = Vec::new();
    let closed = pool.retain(|conn, info| {
        assert_eq!(info.age, Duration::from_secs(2));
        seen.push(conn.id);
        conn.id % 2 == 0
    });
    seen.sort_unstable();
    assert!(
        !seen.contains(&held_id),
        "connections in use are not visited"
    );
    assert_eq!(seen.len(), 3);
    let rejected = seen.iter().filter(|id| *id % 2 == 1).count();
    assert_eq!(closed, rejected);
    let m = pool.metrics();
    assert_eq!(m.idle as usize, 3 - closed, "{m:?}");
    assert_eq!(m.evictions.soft_evict as usize, closed, "{m:?}");
    assert_bounds(&pool);
    drop(held);
    assert_eq!(pool.retain(|_, _| true), 0);
}

#[tokio::test(start_paused = true)]
async fn add_fills_a_free_slot_and_gives_the_connection_back_when_full() {
    let (mock, pool) = support::pool(config(2)).await;
    let made = mock.connect().await.unwrap();
    let made_id = made.id;
    pool.add(made).expect("room for one more");
    let s = pool.state();
    assert_eq!((s.idle, s.total), (2, 2), "{s:?}");

    let extra = mock.connect().await.unwrap();
    let back = pool.add(extra).expect_err("full");
    assert_eq!(back.id, made_id + 1, "the same connection comes back");
    assert_eq!(pool.state().total, 2);

    // The added connection is handed out like any other, and a caller
    // waiting for one is served by a return as usual.
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    let ids = [a.id, b.id];
    assert!(ids.contains(&made_id), "{ids:?}");
    let waiter = support::spawn_get(&pool);
    support::until(|| pool.state().waiting == 1).await;
    drop(a);
    waiter.await.unwrap().unwrap();
    drop(b);
    pool.close().await;
    let back = pool.add(back).expect_err("closed");
    drop(back);
}

#[tokio::test(start_paused = true)]
async fn resize_down_with_every_connection_in_use_keeps_the_bound_and_serves_every_waiter() {
    let (mock, pool) = support::pool(config(4).acquire_timeout(Duration::from_secs(30))).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pool.get().await.unwrap());
    }
    let waiters: Vec<_> = (0..6)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let conn = pool.get().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(conn);
            })
        })
        .collect();
    support::until(|| pool.state().waiting == 6).await;
    pool.resize(2).unwrap();
    assert_eq!(pool.state().max_size, 2);
    // Returned one by one: the first two are retired, the rest serve the
    // waiters; never more than the bound open once it is reached.
    for conn in held.drain(..) {
        drop(conn);
        tokio::task::yield_now().await;
    }
    assert!(pool.state().total <= 2, "{:?}", pool.state());
    assert!(mock.script.alive() <= 2, "retired connections are closed");
    for w in waiters {
        w.await.unwrap();
        assert!(pool.state().total <= 2, "{:?}", pool.state());
        assert!(mock.script.alive() <= 2);
    }
    let m = pool.metrics();
    assert!(m.total <= 2 && m.waiting == 0, "{m:?}");
    assert_eq!(mock.script.connects(), 4, "no connect was needed");
    assert_bounds(&pool);
}

#[tokio::test(start_paused = true)]
async fn resize_up_beyond_the_initial_size_and_errors() {
    let (_, pool) = support::pool(config(2).max_size_ceiling(8)).await;
    let mut held = vec![pool.get().await.unwrap(), pool.get().await.unwrap()];
    assert!(pool
        .get_timeout(Duration::from_millis(10))
        .await
        .is_err_and(|e| e.is_timeout()));
    pool.resize(6).unwrap();
    for _ in 0..4 {
        held.push(pool.get().await.expect("room after growing"));
    }
    let s = pool.state();
    assert_eq!((s.in_use, s.max_size), (6, 6), "{s:?}");
    assert!(pool
        .get_timeout(Duration::from_millis(10))
        .await
        .is_err_and(|e| e.is_timeout()));
    assert_eq!(pool.resize(9).unwrap_err().field(), "max_size");
    assert_eq!(pool.resize(0).unwrap_err().field(), "max_size");
    assert_eq!(pool.state().max_size, 6, "a refused resize changes nothing");
    assert_eq!(
        pool_core::PoolConfig::builder()
            .max_size(4)
            .build()
            .unwrap()
            .max_size_ceiling(),
        16
    );
}
