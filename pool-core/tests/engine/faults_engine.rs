//! The engine's side of database faults, on the scriptable mock
//! and tokio's paused clock: a dead connection is not handed out (the
//! manager's `has_broken` at every checkout, the failure epoch that
//! overrides the validation bypass), a caller arriving while connects fail
//! cuts the back-off short, and a closed connection keeps its slot until
//! the manager's `close` ends. The same properties against real PostgreSQL
//! clusters are in `fault_pg.rs`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support;
use crate::support::{assert_settled, config, Behaviour, Mock, SLOW};
use pool_core::{Pool, PooledConnection, ValidationMode};

const MINUTE: Duration = Duration::from_secs(60);

/// Opens `n` connections and returns them all; their ids, oldest first.
async fn warm(pool: &Pool<Mock>, n: usize) -> Vec<u64> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(pool.get().await.expect("connect"));
    }
    let ids = held.iter().map(|c| c.id).collect();
    drop(held);
    ids
}

#[tokio::test(start_paused = true)]
async fn a_broken_idle_connection_is_not_handed_out_with_validation_off() {
    let (mock, pool) = support::lazy(config(3));
    let old = warm(&pool, 2).await;
    // The client noticed both sockets closed while they sat idle.
    mock.script.close_all_open();

    assert!(pool.try_get().is_none(), "try_get handed out a broken one");
    let conn = pool.get().await.expect("a fresh connection");
    assert!(!old.contains(&conn.id), "handed out broken {}", conn.id);
    assert_eq!(pool.metrics().evictions.broken, 2);
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 0);
    drop(conn);
    assert_settled(&pool);
}

#[tokio::test(start_paused = true)]
async fn a_failure_seen_anywhere_validates_every_connection_inside_the_bypass_window() {
    let (mock, pool) = support::lazy(
        config(3)
            .validation_mode(ValidationMode::IsValid)
            .validation_bypass(MINUTE),
    );
    let old = warm(&pool, 3).await;
    let valid = || mock.script.valid_calls.load(Ordering::SeqCst);
    tokio::time::advance(Duration::from_millis(5)).await;

    // Quiet times: inside the bypass window, no round trip.
    drop(pool.get().await.unwrap());
    assert_eq!(valid(), 0);

    // The server ends every session; the client notices on one of them
    // only (the one it was reading from when the socket closed).
    mock.script.kill_all_open();
    tokio::time::advance(Duration::from_millis(5)).await;
    let mut noticed = pool.get().await.unwrap();
    noticed.broken = true;
    drop(noticed);
    assert_eq!(pool.metrics().evictions.broken, 1);

    // The other two were used a moment ago, well inside the window, and
    // their `has_broken` knows nothing: the epoch has them validated, and
    // the caller gets a new connection, not a dead one.
    let conn = pool.get().await.expect("a replacement");
    assert!(!old.contains(&conn.id), "handed out dead {}", conn.id);
    assert_eq!(pool.metrics().evictions.validation, 2);
    assert_eq!(valid(), 2);
    drop(conn);

    // Quiet again: connections checked (or opened) after the failure are
    // inside the window once more.
    tokio::time::advance(Duration::from_millis(5)).await;
    drop(pool.get().await.unwrap());
    drop(pool.get().await.unwrap());
    assert_eq!(valid(), 2, "validated again after the epoch was passed");
    assert_settled(&pool);
}

#[tokio::test(start_paused = true)]
async fn a_validated_connection_passes_the_epoch_once() {
    let (mock, pool) = support::lazy(
        config(2)
            .validation_mode(ValidationMode::IsValid)
            .validation_bypass(MINUTE),
    );
    let old = warm(&pool, 2).await;
    tokio::time::advance(Duration::from_millis(5)).await;
    // One session reported broken at its return; the other survived.
    let held = pool.get().await.unwrap();
    let other = pool.get().await.unwrap();
    let mut broken = held;
    broken.broken = true;
    drop(broken);
    drop(other);
    tokio::time::advance(Duration::from_millis(5)).await;
    let valid = || mock.script.valid_calls.load(Ordering::SeqCst);

    // The survivor is checked once, then trusted inside the window.
    let survivor = pool.get().await.unwrap();
    assert!(old.contains(&survivor.id));
    assert_eq!(valid(), 1);
    drop(survivor);
    tokio::time::advance(Duration::from_millis(5)).await;
    let again = pool.get().await.unwrap();
    assert_eq!(valid(), 1, "checked twice for one failure");
    drop(again);
}

#[tokio::test(start_paused = true)]
async fn a_caller_arriving_while_connects_fail_cuts_the_back_off_short() {
    let (mock, pool) = support::lazy(
        config(3)
            .acquire_timeout(MINUTE)
            // The one connector place is the one backing off: nobody
            // else will connect for the new caller.
            .max_concurrent_connects(1),
    );
    // One connection stays in use, so the pool is not "down" (fail fast
    // would end the callers' waits): a waiter and a connector backing off.
    let held = pool.get().await.unwrap();
    mock.script.set(&mock.script.fail_connect, true);
    let first = support::spawn_get(&pool);
    // Failures in a row: the back-off grows to its 1 s ceiling.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let failed = mock.script.connects();
    assert!(
        (5..=16).contains(&failed),
        "{failed} connects in 4 s: the back-off did not pace them"
    );

    // The database is back. A new caller does not wait for the timer.
    mock.script.set(&mock.script.fail_connect, false);
    let started = tokio::time::Instant::now();
    let second = pool.get().await.expect("served");
    assert!(
        started.elapsed() < Duration::from_millis(5),
        "waited {:?} for the back-off",
        started.elapsed()
    );
    let first = first.await.unwrap().expect("the first caller is served");
    assert_ne!(first, second.id);
    drop((held, second));
    assert_settled(&pool);
}

#[tokio::test(start_paused = true)]
async fn a_closing_connection_keeps_its_slot_until_the_close_ends() {
    let mock = Mock::default();
    mock.script.set(&mock.script.await_close, true);
    mock.script.on_close.set(Behaviour::Slow);
    let pool = Pool::new_lazy(mock.clone(), config(1).build().unwrap());
    let conn = pool.get().await.unwrap();
    PooledConnection::discard(conn);
    let m = pool.metrics();
    assert_eq!((m.closing, m.total, m.in_use), (1, 1, 0), "{m:?}");

    // The replacement waits for the close: the "server" never holds two.
    let started = tokio::time::Instant::now();
    let next = pool.get().await.unwrap();
    assert!(
        started.elapsed() >= SLOW,
        "opened after {:?}",
        started.elapsed()
    );
    assert_eq!(mock.script.max_alive(), 1);
    assert_eq!(mock.script.close_calls.load(Ordering::SeqCst), 1);
    assert_eq!(pool.metrics().closing, 0);
    drop(next);
    assert_settled(&pool);
}

#[tokio::test(start_paused = true)]
async fn a_close_that_never_ends_frees_its_slot_at_the_validation_timeout() {
    let mock = Mock::default();
    mock.script.set(&mock.script.await_close, true);
    mock.script.on_close.set(Behaviour::Never);
    const LIMIT: Duration = Duration::from_millis(200);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(1).validation_timeout(LIMIT).build().unwrap(),
    );
    PooledConnection::discard(pool.get().await.unwrap());
    let started = tokio::time::Instant::now();
    let next = pool.get().await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= LIMIT && waited < LIMIT * 2,
        "freed after {waited:?}"
    );
    // Dropped at the timeout, before the replacement was opened.
    assert_eq!(mock.script.max_alive(), 1);
    drop(next);
}

#[tokio::test(start_paused = true)]
async fn pool_close_waits_for_the_closes() {
    let mock = Mock::default();
    mock.script.set(&mock.script.await_close, true);
    mock.script.on_close.set(Behaviour::Slow);
    let pool = Pool::new_lazy(mock.clone(), config(4).build().unwrap());
    warm(&pool, 3).await;
    let started = tokio::time::Instant::now();
    pool.close().await;
    assert!(started.elapsed() >= SLOW);
    assert_eq!(mock.script.alive(), 0);
    assert_eq!(mock.script.close_calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_connect_in_new_reaches_its_caller_and_frees_the_slot() {
    let mock = Mock::default();
    mock.script.on_connect.set(Behaviour::Panic);
    let failed = tokio::spawn({
        let mock = mock.clone();
        async move { Pool::new(mock, config(2).min_size(1).build().unwrap()).await }
    })
    .await;
    assert!(failed.is_err_and(|e| e.is_panic()));
}

#[tokio::test(start_paused = true)]
async fn a_panicking_connect_is_retried_with_back_off_not_in_a_loop() {
    let mock = Mock::default();
    mock.script.on_connect.set(Behaviour::Panic);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(2)
            .acquire_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    );
    let err = pool.get().await.expect_err("every connect panics");
    assert!(
        err.to_string().contains("connect panicked"),
        "the timeout names the panic: {err}"
    );
    // 5 ms doubling to 1 s: about nine attempts in 2 s, not thousands.
    let connects = mock.script.connects();
    assert!((3..=16).contains(&connects), "{connects} connects in 2 s");
    mock.script.on_connect.set(Behaviour::Ok);
    drop(pool.get().await.expect("recovered"));
    assert_settled(&pool);
}
