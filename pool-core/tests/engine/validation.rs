//! Checkout validation: skipped inside the bypass window; a connection that
//! fails is closed and the caller gets another one within its timeout.

use crate::support;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::config;
use pool_core::{PoolError, TimeoutPhase, ValidationMode};

fn validating(max: u32, bypass: Duration) -> pool_core::PoolConfigBuilder {
    config(max)
        .validation_mode(ValidationMode::IsValid)
        .validation_bypass(bypass)
}

#[tokio::test(start_paused = true)]
async fn recently_used_connections_skip_validation() {
    let (mock, pool) = support::pool(validating(1, Duration::from_millis(500))).await;
    for _ in 0..10 {
        drop(pool.get().await.unwrap());
    }
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 0);
    tokio::time::sleep(Duration::from_millis(600)).await;
    drop(pool.get().await.unwrap());
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn zero_bypass_validates_every_checkout() {
    let (mock, pool) = support::pool(validating(1, Duration::ZERO)).await;
    for _ in 0..5 {
        drop(pool.get().await.unwrap());
    }
    // All but the first: a fresh connection skips it.
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn invalid_connection_is_replaced_within_the_same_get() {
    let (mock, pool) = support::pool(validating(2, Duration::ZERO).min_size(2)).await;
    support::use_each(&pool, 2).await;
    mock.script.set(&mock.script.fail_valid, true);
    let handle = {
        let mock = mock.clone();
        tokio::spawn(async move {
            // Heal once both stale connections were rejected.
            for _ in 0..10_000 {
                if mock.script.valid_calls.load(Ordering::SeqCst) >= 2 {
                    mock.script.set(&mock.script.fail_valid, false);
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let conn = pool.get().await.unwrap();
    handle.await.unwrap();
    assert!(conn.id >= 2, "a fresh connection, got #{}", conn.id);
    let m = pool.metrics();
    assert_eq!(m.evictions.validation, 2, "{m:?}");
}

/// A server that accepts connections and then fails every ping: the stale
/// connection is closed and the one opened in its place is handed over
/// unchecked (fresh): one connect per stale connection, no churn.
#[tokio::test(start_paused = true)]
async fn failing_every_ping_costs_one_connect_per_stale_connection() {
    let (mock, pool) =
        support::pool(validating(1, Duration::ZERO).acquire_timeout(Duration::from_millis(300)))
            .await;
    support::use_each(&pool, 1).await;
    mock.script.set(&mock.script.fail_valid, true);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.id, 1, "the replacement");
    assert_eq!(mock.script.connects(), 2);
    assert_eq!(pool.metrics().evictions.validation, 1);
}

#[tokio::test(start_paused = true)]
async fn hanging_validation_times_out_in_the_validation_phase() {
    let (mock, pool) = support::pool(validating(1, Duration::ZERO)).await;
    support::use_each(&pool, 1).await;
    mock.script.valid_delay_ms.store(60_000, Ordering::SeqCst);
    let err = pool
        .get_timeout(Duration::from_millis(200))
        .await
        .unwrap_err();
    match &err {
        PoolError::Timeout {
            phase, last_error, ..
        } => {
            assert_eq!(*phase, TimeoutPhase::Validation);
            assert!(last_error.is_some());
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("validating a connection"), "{err}");
}

/// A restart seen from the pool: the idle connection fails its check (a
/// rejection, which paces the connectors by the back-off) and connects
/// fail. The pause for rejected connections belongs to the server before
/// the restart: the first failed connect ends it, so the first `get()`
/// after the server is back connects at once, not after the 4-6 ms pause
/// (and one more for each connector round reopening the pool).
#[tokio::test(start_paused = true)]
async fn a_failed_connect_ends_the_pause_for_rejected_connections() {
    let (mock, pool) =
        support::pool(validating(1, Duration::ZERO).acquire_timeout(Duration::from_secs(30))).await;
    support::use_each(&pool, 1).await;
    mock.script.set(&mock.script.fail_valid, true);
    mock.script.set(&mock.script.fail_connect, true);
    assert!(pool.get().await.is_err(), "the database is down");
    assert_eq!(pool.metrics().evictions.validation, 1);
    // Back, healthy: connects and pings work again.
    mock.script.set(&mock.script.fail_connect, false);
    mock.script.set(&mock.script.fail_valid, false);
    let started = tokio::time::Instant::now();
    let conn = pool.get().await.unwrap();
    // On the paused clock a connect without a pause takes no time at all.
    assert!(
        started.elapsed() < Duration::from_millis(1),
        "the first get() after the restart waited {:?}",
        started.elapsed()
    );
    drop(conn);
}
