//! Timeouts by phase: `Wait` when no connection came in time, `Validation`
//! when checking one ran past the deadline, `Connect` when `Pool::new`'s
//! first connect ran past `connect_timeout`. On tokio's paused clock, so
//! the waited times are exact.

use crate::support;
use std::error::Error;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::{config, Mock, MockError};
use pool_core::{ConnectTimedOut, Pool, PoolError, TimeoutPhase, ValidationMode};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn wait_phase_when_every_connection_is_busy() {
    let (pool, _held) = support::held_one().await;
    let err = pool.get_timeout(ms(100)).await.unwrap_err();
    let PoolError::Timeout {
        waited,
        phase,
        state,
        last_error,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*phase, TimeoutPhase::Wait);
    assert_eq!(*waited, ms(100));
    assert_eq!((state.in_use, state.total, state.max_size), (1, 1, 1));
    assert!(last_error.is_none(), "{err:?}");
    assert!(
        err.to_string().contains("waiting for a connection"),
        "{err}"
    );
    assert_eq!(pool.metrics().timeout_count, 1);
}

#[tokio::test(start_paused = true)]
async fn wait_phase_with_the_connect_error_when_the_database_refuses() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    // Fail fast off: with it on (the default) the error comes at once.
    let pool = Pool::new_lazy(mock.clone(), config(2).fail_fast(false).build().unwrap());
    let err = pool.get_timeout(ms(200)).await.unwrap_err();
    match &err {
        PoolError::Timeout { phase, waited, .. } => {
            assert_eq!(*phase, TimeoutPhase::Wait);
            assert_eq!(*waited, ms(200));
        }
        other => panic!("{other:?}"),
    }
    let source = err.source().expect("the connect error as source");
    assert_eq!(
        source.downcast_ref::<MockError>().map(|e| e.0),
        Some("connection refused")
    );
    assert!(
        err.to_string()
            .ends_with("; last error: connection refused"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn wait_phase_when_a_connect_hangs() {
    // The connect runs apart from the caller: the caller's own time ran out
    // while waiting for it.
    let mock = Mock::with_connect_delay(60_000);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(1)
            .connect_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let err = pool.get_timeout(ms(500)).await.unwrap_err();
    support::assert_wait_timeout(&err);
    let m = pool.metrics();
    assert_eq!(
        m.opening, 1,
        "the connect carries on for the next caller: {m:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn validation_phase_when_is_valid_hangs_past_the_deadline() {
    let (mock, pool) = support::pool(
        config(2)
            .validation_mode(ValidationMode::IsValid)
            .validation_bypass(Duration::ZERO)
            .validation_timeout(Duration::from_secs(30))
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await;
    // Used once, so it is checked at its next checkout (only a fresh one
    // skips the check).
    support::use_each(&pool, 1).await;
    mock.script.valid_delay_ms.store(60_000, Ordering::SeqCst);
    let err = pool.get().await.unwrap_err();
    match &err {
        PoolError::Timeout { phase, waited, .. } => {
            assert_eq!(*phase, TimeoutPhase::Validation, "{err:?}");
            assert_eq!(*waited, Duration::from_secs(1));
        }
        other => panic!("{other:?}"),
    }
    // The check's limit was the 1 s the caller had left, not the 30 s of
    // `validation_timeout`: the text says which.
    assert_eq!(
        err.to_string(),
        "timed out after 1s validating a connection (0 of 2 open: 0 idle, 0 in use; \
         0 opening; 0 waiting); last error: validation did not finish within 1s"
    );
    assert_eq!(
        err.source().map(|e| e.to_string()).as_deref(),
        Some("validation did not finish within 1s")
    );
    // The connection caught mid-ping is closed; its slot is free.
    let m = pool.metrics();
    assert_eq!(
        (m.total, m.evictions.validation, m.timeout_count),
        (0, 1, 1),
        "{m:?}"
    );
    assert_eq!(mock.script.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn validation_phase_when_the_before_acquire_hook_hangs_says_its_limit() {
    let mock = Mock::default();
    let hooks = support::Scripted::default();
    let pool = Pool::new_with_hooks(
        mock.clone(),
        config(2)
            .validation_timeout(Duration::from_secs(30))
            .acquire_timeout(ms(400))
            .build()
            .unwrap(),
        hooks.clone(),
    )
    .await
    .unwrap();
    support::use_each(&pool, 1).await;
    hooks.0.before_acquire.set(support::Behaviour::Never);
    let err = pool.get().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "timed out after 400ms validating a connection (0 of 2 open: 0 idle, 0 in use; \
         0 opening; 0 waiting); last error: before_acquire hook did not finish within 400ms"
    );
}

#[tokio::test(start_paused = true)]
async fn a_check_timing_out_is_replaced_by_a_fresh_unchecked_connection() {
    // The idle connection's check times out after 100 ms and it is closed;
    // the connection opened in its place is fresh, so it is handed over
    // without a check (it is fresh) within the same `get()`.
    let (mock, pool) = support::lazy(
        config(1)
            .validation_mode(ValidationMode::IsValid)
            .validation_bypass(Duration::ZERO)
            .validation_timeout(ms(100))
            .acquire_timeout(ms(1_050)),
    );
    support::use_each(&pool, 1).await;
    mock.script.valid_delay_ms.store(60_000, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let conn = pool.get().await.expect("the replacement is handed over");
    // The check's 100 ms, then the replacement's connect after the short
    // back-off a rejection starts (5 ms, jittered).
    let waited = started.elapsed();
    assert!(waited >= ms(100) && waited < ms(110), "{waited:?}");
    assert_eq!(conn.id, 1);
    let m = pool.metrics();
    assert_eq!(m.evictions.validation, 1, "{m:?}");
    assert_eq!(m.creation_count, 2, "{m:?}");
}

#[tokio::test(start_paused = true)]
async fn connect_phase_from_pool_new() {
    let mock = Mock::with_connect_delay(60_000);
    let err = Pool::new(
        mock.clone(),
        config(2)
            .min_size(2)
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    )
    .await
    .unwrap_err();
    match &err {
        PoolError::Timeout { phase, waited, .. } => {
            assert_eq!(*phase, TimeoutPhase::Connect);
            // The first connect timed out and was retried once at once.
            assert_eq!(*waited, Duration::from_secs(4));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("opening a connection"), "{err}");
    let source = err.source().expect("source");
    assert_eq!(
        source.downcast_ref::<ConnectTimedOut>(),
        Some(&ConnectTimedOut::new(Duration::from_secs(2), None))
    );
    assert_eq!(mock.script.alive(), 0);
}
