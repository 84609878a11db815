//! Fail fast: a second connect failure in a row (the first is retried at
//! once), or a permanent one, with nothing open that could come back
//! reaches the callers at once, not after `acquire_timeout`; the pool
//! recovers at the first `get()` after the database is back. On tokio's
//! paused clock, so the times are exact.

use crate::support;
use std::error::Error;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::{config, until, Mock};
use pool_core::{Pool, PoolError, TimeoutPhase};

const THIRTY_S: Duration = Duration::from_secs(30);

fn is_connect_failed(e: &PoolError<support::MockError>) -> bool {
    matches!(e, PoolError::ConnectFailed(cause) if cause.0 == "connection refused")
}

#[tokio::test(start_paused = true)]
async fn waiting_callers_get_the_connect_error_at_once_and_the_pool_recovers() {
    let mock = Mock::default();
    let pool = Pool::new_lazy(
        mock.clone(),
        config(4).acquire_timeout(THIRTY_S).build().unwrap(),
    );
    mock.script.set(&mock.script.fail_connect, true);

    let started = tokio::time::Instant::now();
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.get().await.map(|_| ()) })
        })
        .collect();
    for caller in callers {
        let err = caller.await.unwrap().unwrap_err();
        assert!(is_connect_failed(&err), "{err:?}");
        assert_eq!(err.to_string(), "connect failed: connection refused");
        assert_eq!(err.source().unwrap().to_string(), "connection refused");
    }
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(1),
        "failed after {waited:?}, not at once"
    );

    // Known down: a new get() fails fast too, after at most its own attempt.
    let started = tokio::time::Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(is_connect_failed(&err), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(pool.state().waiting, 0);
    assert_eq!(pool.state().total, 0);

    // The database is back: the very first get() succeeds, without
    // waiting for a back-off timer.
    mock.script.set(&mock.script.fail_connect, false);
    let started = tokio::time::Instant::now();
    let conn = pool
        .get()
        .await
        .expect("the first get() after recovery succeeds");
    assert!(started.elapsed() < Duration::from_millis(100));
    drop(conn);
    // And the failed state is gone for good.
    mock.script.set(&mock.script.fail_connect, true);
    let _again = pool.get().await.expect("the idle connection serves it");
}

#[tokio::test(start_paused = true)]
async fn with_a_connection_in_use_callers_keep_waiting_and_are_served_by_its_return() {
    let (mock, pool) = support::pool(config(1).acquire_timeout(THIRTY_S)).await;
    let held = pool.get().await.unwrap();
    mock.script.set(&mock.script.fail_connect, true);
    let waiters: Vec<_> = (0..3).map(|_| support::spawn_get(&pool)).collect();
    until(|| pool.state().waiting == 3).await;
    // Time passes with connects failing (max_size 1 is taken, so none even
    // starts): nobody is failed while a connection could come back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(pool.state().waiting, 3);
    let id = held.id;
    drop(held);
    for w in waiters {
        assert_eq!(
            w.await.unwrap().unwrap(),
            id,
            "served by the returned connection"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn with_room_to_connect_and_one_in_use_callers_still_wait() {
    let (mock, pool) = support::pool(config(4).acquire_timeout(THIRTY_S)).await;
    let held = pool.get().await.unwrap();
    mock.script.set(&mock.script.fail_connect, true);
    let waiter = support::spawn_get(&pool);
    // Connects fail and back off meanwhile, but a connection is in use.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(mock.script.connects() > 2, "connects were retried");
    assert_eq!(pool.state().waiting, 1, "still waiting, not failed");
    let id = held.id;
    drop(held);
    assert_eq!(waiter.await.unwrap().unwrap(), id);
}

#[tokio::test(start_paused = true)]
async fn fail_fast_false_waits_until_the_timeout() {
    let (mock, pool) = support::lazy(config(2).acquire_timeout(THIRTY_S).fail_fast(false));
    mock.script.set(&mock.script.fail_connect, true);
    let started = tokio::time::Instant::now();
    let err = pool.get().await.unwrap_err();
    assert_eq!(started.elapsed(), THIRTY_S);
    let PoolError::Timeout {
        phase, last_error, ..
    } = &err
    else {
        panic!("expected a timeout, got {err:?}")
    };
    assert_eq!(*phase, TimeoutPhase::Wait);
    assert_eq!(
        last_error.as_ref().unwrap().to_string(),
        "connection refused"
    );
}

#[tokio::test(start_paused = true)]
async fn a_capacity_refusal_keeps_callers_waiting_until_a_connect_succeeds() {
    let mock = Mock::default();
    let pool = Pool::new_lazy(
        mock.clone(),
        config(2).acquire_timeout(THIRTY_S).build().unwrap(),
    );
    mock.script.set(&mock.script.refuse_capacity, true);
    let waiter = support::spawn_get(&pool);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pool.state().waiting,
        1,
        "a capacity refusal does not fail callers"
    );
    assert!(
        mock.script.connects() > 3,
        "the connect is retried with back-off"
    );
    mock.script.set(&mock.script.refuse_capacity, false);
    waiter.await.unwrap().expect("served once a ticket is free");
}

#[tokio::test(start_paused = true)]
async fn a_capacity_refusal_times_out_naming_it() {
    let (mock, pool) = support::lazy(config(2).acquire_timeout(Duration::from_secs(2)));
    mock.script.set(&mock.script.refuse_capacity, true);
    let err = pool.get().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(err.to_string().contains("fleet budget"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn the_connect_back_off_is_jittered() {
    // With a connection in use, the connectors retry with back-off; over
    // many runs the retry counts in a window ending where the eighth
    // attempt falls on average (5 + 10 + ... + 320 ms) differ, which they could
    // not with a fixed schedule.
    let mut counts = std::collections::BTreeSet::new();
    for _ in 0..16 {
        let (mock, pool) = support::pool(
            config(4)
                .max_concurrent_connects(1)
                .acquire_timeout(THIRTY_S),
        )
        .await;
        let _held = pool.get().await.unwrap();
        mock.script.set(&mock.script.fail_connect, true);
        let pool2 = pool.clone();
        let waiter = tokio::spawn(async move { pool2.get().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(635)).await;
        counts.insert(mock.script.connects.load(Ordering::SeqCst));
        waiter.abort();
    }
    assert!(counts.len() > 1, "every run retried in step: {counts:?}");
}

/// One failed connect alone (a dropped packet, a listener restarting) is
/// retried at once, before any caller sees it: a lazy pool's first
/// `get()` succeeds, with no back-off wait, and the database is not
/// marked down.
#[tokio::test(start_paused = true)]
async fn one_failed_connect_is_retried_at_once_before_any_caller_sees_it() {
    let mock = Mock::default();
    let pool = Pool::new_lazy(
        mock.clone(),
        config(4).acquire_timeout(THIRTY_S).build().unwrap(),
    );
    mock.script.fail_next_connects.store(1, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let conn = pool.get().await.expect("the retry serves the caller");
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no back-off before the retry"
    );
    assert_eq!(mock.script.connects(), 2);
    assert_eq!(pool.metrics().creation_error_count, 1);
    drop(conn);
}

/// `Pool::new` follows the same rule: one failed connect is retried, the
/// pool is built.
#[tokio::test(start_paused = true)]
async fn pool_new_retries_one_failed_connect() {
    let mock = Mock::default();
    mock.script.fail_next_connects.store(1, Ordering::SeqCst);
    let pool = Pool::new(mock.clone(), config(4).build().unwrap())
        .await
        .expect("built on the second connect");
    assert_eq!((mock.script.connects(), pool.metrics().total), (2, 1));
}

/// Two failed connects in a row: the database is down, and the waiting
/// callers fail fast with the cause (the retry did not hide it).
#[tokio::test(start_paused = true)]
async fn two_failed_connects_in_a_row_fail_the_callers_fast() {
    let mock = Mock::default();
    let pool = Pool::new_lazy(
        mock.clone(),
        config(4).acquire_timeout(THIRTY_S).build().unwrap(),
    );
    mock.script.fail_next_connects.store(2, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(is_connect_failed(&err), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(mock.script.connects(), 2, "the first and its retry");
    // Back: the next get() connects at once.
    drop(pool.get().await.expect("the database is back"));
}

/// An error the manager calls permanent (a refused login) is not retried:
/// the first one fails the caller, and `Pool::new`, at once.
#[tokio::test(start_paused = true)]
async fn a_permanent_connect_error_fails_at_the_first_attempt() {
    let mock = Mock::default();
    mock.script.set(&mock.script.fail_connect, true);
    mock.script.set(&mock.script.permanent_failure, true);
    let err = Pool::new(mock.clone(), config(4).build().unwrap())
        .await
        .unwrap_err();
    support::assert_backend_error(&err, support::PERMANENT);
    assert_eq!(mock.script.connects(), 1, "not retried");

    let pool = Pool::new_lazy(
        mock.clone(),
        config(4).acquire_timeout(THIRTY_S).build().unwrap(),
    );
    let started = tokio::time::Instant::now();
    let err = pool.get().await.unwrap_err();
    assert!(
        matches!(&err, PoolError::ConnectFailed(e) if e.0 == support::PERMANENT),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(mock.script.connects(), 2, "one attempt for the lazy pool");
}

#[tokio::test(start_paused = true)]
async fn connects_that_time_out_fail_callers_fast_naming_the_connects_still_running() {
    let mock = Mock::default();
    mock.script.on_connect.set(support::Behaviour::Never);
    *mock.script.target.lock().unwrap() = Some("db1:5432".into());
    let pool = Pool::new_lazy(
        mock.clone(),
        config(2)
            .connect_timeout(Duration::from_secs(1))
            .max_concurrent_connects(2)
            .acquire_timeout(THIRTY_S)
            .build()
            .unwrap(),
    );
    // Its connect times out at 1 s, the retry at 2 s: the database is
    // down, and the caller is told then, not at 30 s.
    let err = pool.get().await.expect_err("connects time out");
    assert_eq!(
        err.to_string(),
        "timed out after 2s opening a connection (0 of 2 open: 0 idle, 0 in use; \
         0 opening; 0 waiting); last error: connect to db1:5432 did not finish within 1s"
    );
    // Two callers queue and start a connect each; half a second later
    // every connector place is mid-connect, so a third caller fails at
    // once, told where those connects go and for how long they have run.
    let queued: Vec<_> = (0..2)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.get().await.map(drop) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let err = pool.get().await.expect_err("still down");
    assert_eq!(
        err.to_string(),
        "timed out after 0ns opening a connection (0 of 2 open: 0 idle, 0 in use; \
         2 opening (oldest to db1:5432, running 500ms); 2 waiting); \
         last error: connect to db1:5432 did not finish within 1s"
    );
    let PoolError::Timeout { phase, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*phase, TimeoutPhase::Connect);
    for caller in queued {
        caller.abort();
    }
}
