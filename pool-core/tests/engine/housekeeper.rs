//! The housekeeper: idle retirement down to `min_size`, max lifetime with
//! jitter, refill after losses, keepalive, `soft_evict_all`, its end when the
//! last handle goes, and checkout not depending on it. All on tokio's paused
//! clock: sleeps advance virtual time, so nothing depends on machine speed.

use crate::support;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{config, Mock};
use pool_core::{Pool, PooledConnection};

const SEC: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Takes `n` connections at once (so they are all open together).
async fn take(pool: &Pool<Mock>, n: usize) -> Vec<PooledConnection<Mock>> {
    let gets = (0..n).map(|_| pool.get());
    futures::future::join_all(gets)
        .await
        .into_iter()
        .map(|r| r.expect("get"))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn idle_connections_retire_down_to_min_size_and_never_below() {
    let (mock, pool) = support::pool(
        config(5)
            .min_size(2)
            .idle_timeout(10 * SEC)
            .max_lifetime(None)
            .housekeeping_period(SEC),
    )
    .await;
    drop(take(&pool, 5).await);
    assert_eq!(pool.metrics().idle, 5);

    // Half way: one connection is used again, so it is the hot one on top.
    tokio::time::sleep(5 * SEC).await;
    let hot = pool.get().await.unwrap().id;
    tokio::time::sleep(ms(4_500)).await; // t = 9.5 s: nobody idle 10 s yet
    assert_eq!(pool.metrics().total, 5, "retired before idle_timeout");

    tokio::time::sleep(SEC).await; // t = 10.5 s: four idle > 10 s, min 2
    let m = pool.metrics();
    assert_eq!((m.total, m.idle), (2, 2), "{m:?}");
    assert_eq!(m.evictions.idle_timeout, 3, "{m:?}");
    assert_eq!(mock.script.alive(), 2);

    // Everyone is now idle far past the timeout, and the pool stays at 2
    // without closing and reopening.
    tokio::time::sleep(60 * SEC).await;
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.idle_timeout), (2, 3), "{m:?}");
    assert_eq!(m.creation_count, 5, "{m:?}");
    // The hot connection was kept: the coldest go first.
    let ids: Vec<u64> = take(&pool, 2).await.iter().map(|c| c.id).collect();
    assert!(
        ids.contains(&hot),
        "hot connection {hot} retired; kept {ids:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lifetimes_are_jittered_and_none_outlives_max_lifetime() {
    let mock = Mock::default();
    let life = 100 * SEC;
    let tick = ms(100);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(10)
            .max_concurrent_connects(10)
            .idle_timeout(None)
            .max_lifetime(life)
            .max_lifetime_jitter(0.2)
            .housekeeping_period(tick)
            .build()
            .unwrap(),
    );
    drop(take(&pool, 10).await);
    assert_eq!(pool.metrics().creation_count, 10);

    // Lifetime is shortened by at most 20 %: nobody goes before 80 s.
    tokio::time::sleep(ms(79_900)).await;
    assert_eq!(mock.script.alive(), 10, "{:?}", pool.metrics());
    // Nobody lives past max_lifetime (plus one housekeeping tick).
    tokio::time::sleep(ms(20_300)).await;
    let m = pool.metrics();
    assert_eq!(mock.script.alive(), 0, "{m:?}");
    assert_eq!(m.evictions.max_lifetime, 10, "{m:?}");

    let lived = mock.script.lifetimes();
    assert_eq!(lived.len(), 10);
    for l in &lived {
        assert!(*l >= life.mul_f64(0.8) && *l <= life + tick, "{lived:?}");
    }
    // Opened together, they expire spread over the jitter window (ten
    // uniform draws in 200 ticks land on fewer than 5 distinct ticks with
    // probability below 1e-9).
    let distinct: BTreeSet<u128> = lived.iter().map(|l| l.as_millis() / 100).collect();
    assert!(distinct.len() >= 5, "expired together: {lived:?}");
}

#[tokio::test(start_paused = true)]
async fn an_in_use_connection_past_its_lifetime_is_retired_at_its_return() {
    let (mock, pool) = support::pool(
        config(2)
            .idle_timeout(None)
            .max_lifetime(10 * SEC)
            .max_lifetime_jitter(0.0)
            .housekeeping_period(ms(100)),
    )
    .await;
    let mut conn = pool.get().await.unwrap();
    tokio::time::sleep(30 * SEC).await; // many housekeeping passes
    conn.uses.push(1); // still ours
    let m = pool.metrics();
    assert_eq!((m.in_use, m.evictions.max_lifetime), (1, 0), "{m:?}");
    assert_eq!(mock.script.alive(), 1);
    drop(conn);
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.max_lifetime), (0, 1), "{m:?}");
    assert_eq!(mock.script.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn losses_are_refilled_to_min_size() {
    let (mock, pool) = support::pool(config(5).min_size(3).housekeeping_period(SEC)).await;
    assert_eq!(pool.metrics().idle, 3);
    let mut broken = pool.get().await.unwrap();
    broken.broken = true;
    drop(broken);
    PooledConnection::discard(pool.get().await.unwrap());
    support::until(|| pool.metrics().idle == 3).await;
    let m = pool.metrics();
    assert_eq!(
        (m.creation_count, m.evictions.broken, m.evictions.closed),
        (5, 1, 1),
        "{m:?}"
    );

    // While the database refuses, the refill backs off and keeps trying;
    // once it is back, the pool is whole again without anyone asking.
    mock.script.set(&mock.script.fail_connect, true);
    PooledConnection::discard(pool.get().await.unwrap());
    tokio::time::sleep(3 * SEC).await;
    let m = pool.metrics();
    assert_eq!(m.total, 2, "{m:?}");
    assert!(m.creation_error_count >= 2, "{m:?}");
    mock.script.set(&mock.script.fail_connect, false);
    tokio::time::sleep(2 * SEC).await;
    let m = pool.metrics();
    assert_eq!((m.total, m.idle), (3, 3), "{m:?}");
    assert_eq!(mock.script.alive(), 3);
}

#[tokio::test(start_paused = true)]
async fn keepalive_pings_idle_connections_at_its_interval_and_retires_failures() {
    let (mock, pool) = support::pool(
        config(2)
            .idle_timeout(None)
            .max_lifetime(None)
            .keepalive_interval(5 * SEC)
            // The default period, far longer than the keepalive interval.
            .housekeeping_period(30 * SEC),
    )
    .await;
    let pings = || mock.script.valid_calls.load(Ordering::SeqCst);
    tokio::time::sleep(ms(4_500)).await;
    assert_eq!(pings(), 0, "pinged before the interval");
    tokio::time::sleep(ms(2_000)).await; // t = 6.5 s
    assert_eq!(pings(), 1, "not pinged at the keepalive interval");
    assert_eq!(pool.metrics().idle, 1, "a good ping keeps the connection");

    // A connection in use is never pinged.
    let held = pool.get().await.unwrap();
    tokio::time::sleep(20 * SEC).await;
    assert_eq!(pings(), 1, "an in-use connection was pinged");
    drop(held);

    mock.script.set(&mock.script.fail_valid, true);
    tokio::time::sleep(ms(6_500)).await;
    let m = pool.metrics();
    assert_eq!(pings(), 2);
    assert_eq!((m.total, m.evictions.validation), (0, 1), "{m:?}");
    assert_eq!(mock.script.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn soft_evict_all_retires_idle_now_in_use_at_return_and_opening_at_checkout() {
    let (mock, pool) = support::lazy(config(3));
    let mut conns = take(&pool, 3).await;
    let in_use = conns.pop().unwrap();
    let old_ids: Vec<u64> = conns.iter().map(|c| c.id).chain([in_use.id]).collect();
    drop(conns);
    assert_eq!(pool.metrics().idle, 2);

    pool.soft_evict_all();
    let m = pool.metrics();
    assert_eq!(
        (m.idle, m.in_use, m.evictions.soft_evict),
        (0, 1, 2),
        "{m:?}"
    );
    assert_eq!(mock.script.alive(), 1, "the in-use one is not taken away");
    drop(in_use);
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.soft_evict), (0, 3), "{m:?}");
    assert_eq!(m.eviction_count, 3, "{m:?}");

    // A connect already under way when the eviction comes is retired at its
    // first checkout; the caller gets a connection opened afterwards.
    mock.script.connect_delay_ms.store(100, Ordering::SeqCst);
    let getter = support::spawn_get(&pool);
    support::until(|| pool.metrics().opening == 1).await;
    pool.soft_evict_all();
    let id = getter.await.unwrap().unwrap();
    assert!(!old_ids.contains(&id));
    let m = pool.metrics();
    assert_eq!((m.creation_count, m.evictions.soft_evict), (5, 4), "{m:?}");
}

/// The tasks alive on the test's runtime.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

#[tokio::test(start_paused = true)]
async fn housekeeper_ends_with_the_last_handle_and_the_manager_is_dropped() {
    let before = alive_tasks();
    let (mock, pool) = support::pool(config(4).min_size(2).housekeeping_period(3_600 * SEC)).await;
    let handle = pool.clone();
    assert_eq!(alive_tasks(), before + 1, "one housekeeper task");
    // Two idle connections and the manager each hold the script.
    assert_eq!(Arc::strong_count(&mock.script), 4);

    // A connection still out keeps the engine, not the housekeeper.
    let out = pool.get().await.unwrap();
    drop(pool);
    tokio::time::sleep(SEC).await;
    assert_eq!(
        alive_tasks(),
        before + 1,
        "stopped while a handle was alive"
    );
    drop(handle);
    tokio::time::sleep(ms(1_100)).await;
    assert_eq!(
        alive_tasks(),
        before,
        "housekeeper still running with no handle"
    );
    assert!(Arc::strong_count(&mock.script) > 1);
    drop(out);
    assert_eq!(
        Arc::strong_count(&mock.script),
        1,
        "manager or connections outlived the pool"
    );
    assert_eq!(mock.script.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn housekeeper_ends_when_the_pool_is_closed() {
    let before = alive_tasks();
    let (mock, pool) = support::pool(config(2).housekeeping_period(3_600 * SEC)).await;
    assert_eq!(alive_tasks(), before + 1);
    pool.close().await;
    tokio::time::sleep(ms(1_100)).await;
    assert_eq!(alive_tasks(), before);
    drop(pool);
    assert_eq!(Arc::strong_count(&mock.script), 1);
}

#[tokio::test(start_paused = true)]
async fn checkout_serves_and_refuses_expired_connections_with_the_housekeeper_stalled() {
    let (mock, pool) = support::pool(
        config(2)
            .idle_timeout(None)
            .max_lifetime(10 * SEC)
            .max_lifetime_jitter(0.0)
            // No retirement pass after the first for an hour.
            .housekeeping_period(3_600 * SEC),
    )
    .await;
    let first = pool.get().await.unwrap().id;
    tokio::time::sleep(11 * SEC).await;
    assert_eq!(mock.script.alive(), 1, "the housekeeper was not stalled");
    assert!(
        pool.try_get().is_none(),
        "try_get handed out an expired one"
    );
    assert_eq!(pool.metrics().evictions.max_lifetime, 1);

    let conn = pool.get().await.unwrap();
    assert_ne!(conn.id, first);
    drop(conn);
    tokio::time::sleep(11 * SEC).await;
    let second = pool.metrics();
    let conn = pool.get().await.unwrap();
    let m = pool.metrics();
    assert_eq!(second.evictions.max_lifetime, 1, "{second:?}");
    assert_eq!(m.evictions.max_lifetime, 2, "{m:?}");
    assert_eq!((m.in_use, m.creation_count), (1, 3), "{m:?}");
    drop(conn);
}

#[tokio::test(start_paused = true)]
async fn refill_does_not_race_pool_new_past_min_size() {
    // `Pool::new` opens min_size connections itself; the housekeeper's
    // refill, running while those connects are under way, must not open
    // more on top of them.
    let mock = Mock::with_connect_delay(10);
    let pool = support::started(
        &mock,
        config(10)
            .min_size(3)
            .max_concurrent_connects(2)
            .housekeeping_period(ms(100)),
    )
    .await;
    tokio::time::sleep(SEC).await;
    let m = pool.metrics();
    assert_eq!((m.total, m.creation_count), (3, 3), "{m:?}");
    assert_eq!(mock.script.connects(), 3);
}
