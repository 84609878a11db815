//! Every documented `PoolError` variant is produced, and the timeout's
//! message carries the wait, the counts and the last error.

use std::error::Error;
use std::time::Duration;

use crate::support;
use crate::support::{config, Mock};
use pool_core::{Pool, PoolError, TimeoutPhase};

#[tokio::test(start_paused = true)]
async fn timeout_names_wait_counts_and_last_error() {
    let (_, pool) = support::pool(config(1)).await;
    let held_at = line!() + 1;
    let _held = pool.get().await.unwrap();
    let err = pool
        .get_timeout(Duration::from_millis(250))
        .await
        .unwrap_err();
    let PoolError::Timeout {
        waited,
        phase,
        state,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*waited, Duration::from_millis(250));
    assert_eq!(*phase, TimeoutPhase::Wait);
    assert_eq!((state.total, state.in_use, state.max_size), (1, 1, 1));
    assert_eq!(
        err.to_string(),
        format!(
            "timed out after 250ms waiting for a connection (1 of 1 open: 0 idle, 1 in use; \
             0 opening; 1 waiting; 1 taken at {}:{held_at}:22, held up to 250ms)",
            file!()
        ),
        "the holder's site is the `get()` above"
    );
    assert_eq!(pool.metrics().timeout_count, 1);
    assert_eq!(pool.metrics().waiting, 0);
}

#[tokio::test(start_paused = true)]
async fn unreachable_database_times_out_with_the_connect_error_inside() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    let pool = Pool::new_lazy(
        mock,
        config(2)
            .acquire_timeout(Duration::from_secs(2))
            .fail_fast(false)
            .build()
            .unwrap(),
    );
    let err = pool.get().await.unwrap_err();
    assert!(err.is_timeout());
    assert!(
        err.to_string()
            .ends_with("; last error: connection refused"),
        "{err}"
    );
    assert_eq!(err.source().unwrap().to_string(), "connection refused");
}

#[tokio::test]
async fn backend_and_closed_are_produced() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    let err = Pool::new(mock, config(1).build().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, PoolError::Backend(_)));
    assert_eq!(err.to_string(), "connect failed: connection refused");
    assert_eq!(err.source().unwrap().to_string(), "connection refused");

    let (_, pool) = support::pool(config(1)).await;
    pool.close().await;
    let err = pool.get().await.unwrap_err();
    assert!(matches!(err, PoolError::Closed));
}

#[tokio::test]
async fn an_invalid_config_is_a_typed_error_not_a_panic() {
    let err = pool_core::PoolConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .max_lifetime(Duration::from_secs(30))
        .build()
        .unwrap_err();
    assert_eq!(
        (err.field(), err.rule()),
        ("idle_timeout", "must be shorter than max_lifetime")
    );
}
