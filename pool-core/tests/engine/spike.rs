//! Demand-driven creation: a burst against short queries is served by
//! returns, not by a connection per request (HikariCP's "spike demand").

use std::time::Duration;

use crate::support;
use crate::support::{config, Mock};
use pool_core::Pool;

/// Connect takes 150 ms, queries 2 ms, max 50, min 5, 50 simultaneous
/// requests: the five warm connections serve the burst in ~20 ms, long
/// before a new connect could finish, so only the connects already started
/// (at most `max_concurrent_connects`) are opened.
/// Spawns `n` tasks that each check out a connection and hold it for
/// `hold`.
fn hold_each(pool: &Pool<Mock>, n: usize, hold: Duration) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let conn = pool.get().await.unwrap();
                tokio::time::sleep(hold).await;
                drop(conn);
            })
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_burst_opens_a_handful_not_one_per_request() {
    let mock = Mock::with_connect_delay(150);
    let pool = support::started(&mock, config(50).min_size(5)).await;
    assert_eq!(pool.metrics().total, 5);
    let started = tokio::time::Instant::now();
    let tasks = hold_each(&pool, 50, Duration::from_millis(2));
    for t in tasks {
        t.await.unwrap();
    }
    let served_in = started.elapsed();
    // Let the connects already in flight finish.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let opened = mock.script.connects();
    assert!(
        opened <= 8,
        "opened {opened} connections for a 50-request burst"
    );
    assert!(
        served_in < Duration::from_millis(150),
        "served in {served_in:?}"
    );
    assert!(pool.metrics().total <= 8);
}

/// A caller that gives up does not abort the connect it asked for: the new
/// connection serves the next caller or goes idle.
#[tokio::test(start_paused = true)]
async fn a_connect_outlives_the_caller_that_asked_for_it() {
    let mock = Mock::with_connect_delay(100);
    let pool = Pool::new_lazy(mock.clone(), config(2).build().unwrap());
    let r = pool.get_timeout(Duration::from_millis(10)).await;
    assert!(r.is_err());
    assert_eq!(pool.metrics().opening, 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let m = pool.metrics();
    assert_eq!((m.idle, m.opening, m.creation_count), (1, 0, 1), "{m:?}");
    let conn = pool.try_get().expect("the connect went idle");
    assert_eq!(conn.id, 0);
}

/// Never more than `max_concurrent_connects` connects at once.
#[tokio::test(start_paused = true)]
async fn connects_are_bounded() {
    let mock = Mock::with_connect_delay(50);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(20).max_concurrent_connects(3).build().unwrap(),
    );
    let tasks = hold_each(&pool, 20, Duration::from_millis(1_000));
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let m = pool.metrics();
        assert!(m.opening <= 3, "{m:?}");
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(mock.script.connects(), 20);
}

/// A database that comes back is picked up by itself, within about a
/// second of backoff.
#[tokio::test(start_paused = true)]
async fn recovers_when_the_database_comes_back() {
    let (mock, pool) = support::lazy(
        config(2)
            .acquire_timeout(Duration::from_millis(300))
            .fail_fast(false),
    );
    mock.script.set(&mock.script.fail_connect, true);
    let err = pool.get().await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("connection refused"), "{text}");
    assert!(pool.metrics().creation_error_count > 1, "it retried");
    mock.script.set(&mock.script.fail_connect, false);
    let started = tokio::time::Instant::now();
    let conn = pool.get_timeout(Duration::from_secs(5)).await.unwrap();
    assert!(
        started.elapsed() <= Duration::from_millis(1_100),
        "{:?}",
        started.elapsed()
    );
    drop(conn);
}
