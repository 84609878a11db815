//! Start-up is bounded: `Pool::new` returns within `acquire_timeout`, its
//! connects each cut to the time left, and every timeout text counts what
//! is open and what is only being opened apart. On tokio's paused clock, so
//! the waited times are exact.

use std::error::Error;
use std::time::Duration;

use crate::support::{config, Behaviour, Mock};
use pool_core::{ConnectTimedOut, Pool, PoolError, TimeoutPhase};
use tokio::time::Instant;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A mock whose connects never finish, to `127.0.0.1:5999`: a server that
/// accepts TCP and never answers.
fn hanging_at_5999() -> Mock {
    let mock = Mock::default();
    mock.script.on_connect.set(Behaviour::Never);
    *mock.script.target.lock().unwrap() = Some("127.0.0.1:5999".into());
    mock
}

/// `Pool::new` on `mock` and `config`: its error, and how long it took.
async fn failed_start(
    mock: &Mock,
    config: pool_core::PoolConfigBuilder,
) -> (PoolError<crate::support::MockError>, Duration) {
    let started = Instant::now();
    let err = Pool::new(mock.clone(), config.build().unwrap())
        .await
        .expect_err("the start-up fails");
    (err, started.elapsed())
}

#[tokio::test(start_paused = true)]
async fn pool_new_returns_within_acquire_timeout_when_connects_hang() {
    // The default connect_timeout (10 s) is above acquire_timeout: the one
    // connect is cut at the 5 s left, and not retried past the limit.
    let mock = Mock::with_connect_delay(60_000);
    let (err, took) = failed_start(&mock, config(2).min_size(2).acquire_timeout(secs(5))).await;
    assert_eq!(took, secs(5), "{err}");
    let PoolError::Timeout { waited, phase, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!((*waited, *phase), (secs(5), TimeoutPhase::Connect));
    assert_eq!(
        err.to_string(),
        "timed out after 5s opening a connection (0 of 2 open: 0 idle, 0 in use; \
         0 opening; 0 waiting); last error: connect did not finish within 5s"
    );
    assert_eq!(mock.script.connects(), 1, "no retry once the time is up");
    assert_eq!(mock.script.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_retry_of_a_first_connect_gets_only_the_time_left() {
    // 3 s for the first connect, then the retry is cut to the 2 s left.
    let mock = Mock::with_connect_delay(60_000);
    let (err, took) = failed_start(
        &mock,
        config(1).acquire_timeout(secs(5)).connect_timeout(secs(3)),
    )
    .await;
    assert_eq!(took, secs(5), "{err}");
    assert!(matches!(err, PoolError::Timeout { waited, .. } if waited == secs(5)));
    assert!(
        err.to_string()
            .ends_with("; last error: connect did not finish within 2s"),
        "{err}"
    );
    assert_eq!(mock.script.connects(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_rest_of_min_size_opens_within_the_same_limit() {
    // Each connect takes 3 s: the first is open at 3 s, the second would
    // finish at 6 s, past the 5 s the whole start-up has.
    let mock = Mock::with_connect_delay(3_000);
    let (err, took) = failed_start(&mock, config(2).min_size(2).acquire_timeout(secs(5))).await;
    assert_eq!(took, secs(5), "{err}");
    assert_eq!(
        err.to_string(),
        "timed out after 5s opening a connection (1 of 2 open: 1 idle, 0 in use; \
         0 opening; 0 waiting); last error: connect did not finish within 2s"
    );
    assert_eq!(mock.script.alive(), 0, "what was opened is closed again");
}

#[tokio::test(start_paused = true)]
async fn a_start_up_within_the_limit_is_unchanged() {
    // Connects of 1 s each, min_size 3, two at a time: 1 s, then 1 s more.
    let mock = Mock::with_connect_delay(1_000);
    let started = Instant::now();
    let pool = Pool::new(
        mock.clone(),
        config(3)
            .min_size(3)
            .acquire_timeout(secs(5))
            .build()
            .unwrap(),
    )
    .await
    .expect("opens in 2 s");
    assert_eq!(started.elapsed(), secs(2));
    assert_eq!(pool.state().idle, 3);
}

#[tokio::test(start_paused = true)]
async fn a_wait_behind_a_hanging_connect_counts_it_as_opening_not_open() {
    let mock = Mock::with_connect_delay(60_000);
    let pool = Pool::new_lazy(mock.clone(), config(2).build().unwrap());
    let err = pool.get().await.expect_err("the connect hangs");
    assert_eq!(
        err.to_string(),
        "timed out after 5s waiting for a connection (0 of 2 open: 0 idle, 0 in use; \
         1 opening (running 5s); 1 waiting)"
    );
    assert!(err.source().is_none(), "no connect has failed yet");
}

#[tokio::test(start_paused = true)]
async fn a_wait_behind_a_hanging_connect_names_where_it_hangs_and_for_how_long() {
    // No connect has failed, so there is no last error: the connect still
    // running is the only clue to where the wait hangs.
    let pool = Pool::new_lazy(
        hanging_at_5999(),
        config(2).acquire_timeout(ms(200)).build().unwrap(),
    );
    let err = pool.get().await.expect_err("the connect never finishes");
    assert_eq!(
        err.to_string(),
        "timed out after 200ms waiting for a connection (0 of 2 open: 0 idle, 0 in use; \
         1 opening (to 127.0.0.1:5999, running 200ms); 1 waiting)"
    );
    assert!(err.source().is_none(), "no connect has failed yet");
    let PoolError::Timeout { oldest_connect, .. } = &err else {
        panic!("{err:?}");
    };
    let oldest = oldest_connect.as_deref().expect("the hanging connect");
    assert_eq!(
        (oldest.target.as_deref(), oldest.running),
        (Some("127.0.0.1:5999"), ms(200))
    );
}

#[tokio::test(start_paused = true)]
async fn of_several_hanging_connects_the_oldest_is_named() {
    let pool = Pool::new_lazy(hanging_at_5999(), config(2).build().unwrap());
    // The first caller's connect starts at 0, the second's at 100 ms.
    let first = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    tokio::time::sleep(ms(100)).await;
    let err = pool
        .get_timeout(ms(200))
        .await
        .expect_err("the connects never finish");
    assert_eq!(
        err.to_string(),
        "timed out after 200ms waiting for a connection (0 of 2 open: 0 idle, 0 in use; \
         2 opening (oldest to 127.0.0.1:5999, running 300ms); 2 waiting)"
    );
    first.abort();
}

#[tokio::test(start_paused = true)]
async fn a_hanging_connect_is_named_beside_the_last_error() {
    let mock = hanging_at_5999();
    mock.script.on_connect.set(Behaviour::Err);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(1)
            .fail_fast(false)
            .acquire_timeout(ms(200))
            .build()
            .unwrap(),
    );
    // Connects fail while the first caller waits; then they hang.
    let err = pool.get().await.expect_err("every connect fails");
    assert!(
        err.to_string().ends_with("; last error: connect failed"),
        "{err}"
    );
    mock.script.on_connect.set(Behaviour::Never);
    let err = pool.get().await.expect_err("the connect never finishes");
    assert_eq!(
        err.to_string(),
        "timed out after 200ms waiting for a connection (0 of 1 open: 0 idle, 0 in use; \
         1 opening (to 127.0.0.1:5999, running 200ms); 1 waiting); last error: connect failed"
    );
    assert_eq!(err.source().unwrap().to_string(), "connect failed");
}

#[tokio::test(start_paused = true)]
async fn a_connect_that_runs_out_of_time_names_where_it_went() {
    let mock = Mock::with_connect_delay(60_000);
    *mock.script.target.lock().unwrap() = Some("db1:5432".into());
    let (err, _) = failed_start(&mock, config(1).acquire_timeout(secs(5))).await;
    assert!(
        err.to_string()
            .ends_with("; last error: connect to db1:5432 did not finish within 5s"),
        "{err}"
    );
    let cause = err.source().expect("the timed-out connect");
    let cause = cause
        .downcast_ref::<ConnectTimedOut>()
        .expect("a ConnectTimedOut");
    assert_eq!(
        (cause.limit, cause.target.as_deref()),
        (secs(5), Some("db1:5432"))
    );

    // A lazy pool's wait past the connect's own timeout: its error is the
    // last error, with where it went.
    let pool = Pool::new_lazy(
        mock.clone(),
        config(1)
            .connect_timeout(secs(1))
            .fail_fast(false)
            .build()
            .unwrap(),
    );
    let err = pool.get_timeout(secs(3)).await.expect_err("connects hang");
    assert!(
        err.to_string()
            .ends_with("; last error: connect to db1:5432 did not finish within 1s"),
        "{err}"
    );
}
