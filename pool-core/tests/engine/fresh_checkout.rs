//! A connection opened for the caller that waits for it is handed over
//! without any checkout check (`has_broken`, validation, `before_acquire`).
//! Every connection taken from idle, whoever opened it (`Pool::new`'s
//! first one, a `min_size` refill), goes through `before_acquire`, before
//! validation; validation skips one opened moments ago and never checked
//! out. On tokio's paused clock.

use crate::support;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{config, Conn, Mock, MockError};
use pool_core::{async_trait, ConnectionInfo, Hooks, Pool, ValidationMode};

fn validating(max: u32) -> pool_core::PoolConfigBuilder {
    config(max)
        .validation_mode(ValidationMode::IsValid)
        .validation_bypass(Duration::ZERO)
}

#[tokio::test(start_paused = true)]
async fn a_fresh_connection_is_not_validated_at_its_first_checkout() {
    let (mock, pool) = support::pool(validating(2)).await;
    let conn = pool.get().await.unwrap();
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 0);
    drop(conn);
    // Used once: validated from now on (the bypass is zero).
    let _conn = pool.get().await.unwrap();
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_connection_opened_for_a_waiter_is_not_validated_even_if_checks_fail() {
    // A manager whose check always fails still yields connections: the
    // ones opened for the caller are handed over unchecked.
    let (mock, pool) = support::lazy(validating(2));
    mock.script.set(&mock.script.fail_valid, true);
    let conn = pool
        .get()
        .await
        .expect("a new connection is handed over unchecked");
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 0);
    drop(conn);
}

#[tokio::test(start_paused = true)]
async fn a_connection_idle_since_long_ago_is_validated_even_if_never_used() {
    let (mock, pool) = support::pool(validating(2)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _conn = pool.get().await.unwrap();
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 1);
}

/// Records, at each `before_acquire`, how many validations had run.
#[derive(Debug, Clone, Default)]
struct Before {
    calls: Arc<AtomicU64>,
    valid_calls_seen: Arc<Mutex<Vec<u64>>>,
    mock: Mock,
}

impl Before {
    /// Hooks that read `mock`'s validation count.
    fn on(mock: &Mock) -> Self {
        Before {
            mock: mock.clone(),
            ..Before::default()
        }
    }
}

#[async_trait]
impl Hooks<Mock> for Before {
    async fn before_acquire(&self, _c: &mut Conn, _i: ConnectionInfo) -> Result<bool, MockError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let seen = self.mock.script.valid_calls.load(Ordering::SeqCst);
        self.valid_calls_seen.lock().unwrap().push(seen);
        Ok(true)
    }
}

#[tokio::test(start_paused = true)]
async fn before_acquire_runs_on_every_idle_connection_and_before_validation() {
    let mock = Mock::default();
    let hooks = Before::on(&mock);
    let pool = Pool::new_with_hooks(mock.clone(), validating(2).build().unwrap(), hooks.clone())
        .await
        .unwrap();
    // `Pool::new`'s connection sat idle: the hook sees it, although it
    // was opened moments ago (validation still skips it).
    let conn = pool.get().await.unwrap();
    assert_eq!(hooks.calls.load(Ordering::SeqCst), 1, "idle: hook");
    assert_eq!(
        mock.script.valid_calls.load(Ordering::SeqCst),
        0,
        "fresh: no validation"
    );
    drop(conn);
    let _conn = pool.get().await.unwrap();
    assert_eq!(
        hooks.calls.load(Ordering::SeqCst),
        2,
        "idle in the pool: hook"
    );
    assert_eq!(
        *hooks.valid_calls_seen.lock().unwrap(),
        [0, 0],
        "the hook ran before the validation"
    );
    assert_eq!(mock.script.valid_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_connection_opened_for_the_waiting_caller_skips_before_acquire() {
    let mock = Mock::default();
    let hooks = Before::on(&mock);
    let pool =
        Pool::new_lazy_with_hooks(mock.clone(), validating(2).build().unwrap(), hooks.clone());
    let conn = pool.get().await.unwrap();
    assert_eq!(
        hooks.calls.load(Ordering::SeqCst),
        0,
        "opened for this caller: no hook"
    );
    drop(conn);
    drop(pool.get().await.unwrap());
    assert_eq!(hooks.calls.load(Ordering::SeqCst), 1, "idle since: hook");
}

#[tokio::test(start_paused = true)]
async fn a_connection_opened_for_the_waiting_caller_skips_has_broken() {
    // A manager whose `has_broken` says yes to everything: the connection
    // opened for the caller is not thrown away before anyone used it; it is
    // closed when it comes back, and the next caller gets a new one.
    let mock = Mock::default();
    mock.script.on_has_broken.set(support::Behaviour::Err);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(2)
            .acquire_timeout(Duration::from_secs(5))
            .build()
            .unwrap(),
    );
    for round in 1..=3u64 {
        let conn = pool.get().await.expect("handed over without has_broken");
        assert_eq!(mock.script.connects(), round);
        drop(conn);
        assert_eq!(pool.metrics().evictions.broken, round, "closed on return");
    }
}
