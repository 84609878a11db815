//! What the behaviour tests do with the mock ([`super::mock`]): a config,
//! scripted hooks, the bound and settle checks, waiting for a condition,
//! building and using pools, and reading their errors.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pool_core::{
    async_trait, ConnectionInfo, Hooks, ManageConnection, Pool, PoolConfig, PoolError,
    TimeoutPhase, ValidationMode,
};

use super::mock::*;

/// A config for tests: no validation, no housekeeping surprises.
pub fn config(max: u32) -> pool_core::PoolConfigBuilder {
    PoolConfig::builder()
        .max_size(max)
        .validation_mode(ValidationMode::None)
        .acquire_timeout(Duration::from_secs(5))
}

/// Hooks whose every call plays a scripted [`Behaviour`] (`Ok` keeps the
/// connection).
#[derive(Debug, Default)]
pub struct ScriptedHooks {
    pub after_connect: Act,
    pub before_acquire: Act,
    pub after_release: Act,
    /// Calls started, all hooks together.
    pub calls: AtomicU64,
}

/// A shareable handle on [`ScriptedHooks`], to give to the pool.
#[derive(Debug, Clone, Default)]
pub struct Scripted(pub Arc<ScriptedHooks>);

impl Scripted {
    /// Counts a hook call and plays `act` (`Ok` keeps the connection).
    async fn call(&self, act: &Act, what: &'static str) -> Result<bool, MockError> {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        act.play(what).await.map(|()| true)
    }
}

#[async_trait]
impl Hooks<Mock> for Scripted {
    async fn after_connect(&self, _conn: &mut Conn) -> Result<(), MockError> {
        let hooks = &self.0;
        self.call(&hooks.after_connect, "after_connect failed")
            .await
            .map(drop)
    }

    async fn before_acquire(&self, _: &mut Conn, _: ConnectionInfo) -> Result<bool, MockError> {
        self.call(&self.0.before_acquire, "before_acquire failed")
            .await
    }

    async fn after_release(&self, _: &mut Conn, _: ConnectionInfo) -> Result<bool, MockError> {
        self.call(&self.0.after_release, "after_release failed")
            .await
    }
}

/// Checks what must hold at any instant, even while tasks run on other
/// threads, comparing the pool's snapshot with what the manager saw:
///
/// * the manager never had more than `max_size` connections alive at once,
///   nor more connects in flight than the larger of `max_concurrent_connects`
///   and `max_concurrent_reconnects`;
/// * every connection alive through the whole snapshot is counted in its
///   `total` (a slot is freed only after its connection was dropped);
/// * `total <= max_size`.
pub fn assert_bounds(pool: &Pool<Mock>) {
    assert_bounds_with_detached(pool, 0);
}

/// [`assert_bounds`] for a pool that handed `detached` connections over for
/// good (they stay alive outside it, so the manager's high-water mark says
/// nothing about the bound then and is not checked).
pub fn assert_bounds_with_detached(pool: &Pool<Mock>, detached: i64) {
    let config = pool.config();
    assert_bounds_within(pool, detached, pool.state().max_size, config.max_size());
}

/// [`assert_bounds_with_detached`] for a pool whose bound moves at run time
/// (`resize`): `total` may stand above the live `max_size` by connections
/// kept from before a shrink, but never above `total_bound`, and the
/// manager never had more than `alive_bound` (the highest bound in force)
/// alive at once.
pub fn assert_bounds_within(pool: &Pool<Mock>, detached: i64, total_bound: u32, alive_bound: u32) {
    let s = &pool.manager().script;
    let config = pool.config();
    // Read in this order: `closed` before `alive`, then the snapshot, then
    // `closed` again. A connection in `alive_before` whose drop finished
    // before `closed_after` is discounted; any other one finished dropping
    // (and so had its slot freed) after the snapshot, so the snapshot counts
    // it.
    let closed_before = s.closed();
    let alive_before = s.alive();
    let m = pool.metrics();
    let closed_after = s.closed();
    let surely_alive = alive_before - detached - (closed_after - closed_before) as i64;
    assert!(
        i64::from(m.total) >= surely_alive,
        "{surely_alive} connections alive through the snapshot, but total is {}: {m:?}",
        m.total
    );
    assert!(
        m.total <= total_bound,
        "total above its bound {total_bound}: {m:?}"
    );
    assert!(
        detached > 0 || s.max_alive() <= i64::from(alive_bound),
        "the manager saw {} connections alive at once, the bound is {alive_bound}",
        s.max_alive(),
    );
    // After failed connects the pool reopens within the larger bound.
    let connect_bound = config
        .max_concurrent_connects()
        .max(config.max_concurrent_reconnects());
    assert!(
        s.max_connecting() <= i64::from(connect_bound),
        "the manager saw {} connects at once, the bound is {connect_bound}",
        s.max_connecting(),
    );
}

/// Checks the pool at quiescence (nothing in flight: no waiter, no connect):
/// [`assert_bounds`], and the pool counts exactly the connections the
/// manager has alive, less `detached` ones it handed over for good.
pub fn assert_settled_with_detached(pool: &Pool<Mock>, detached: i64) {
    let m = pool.metrics();
    assert_eq!(m.waiting, 0, "a waiter is left: {m:?}");
    assert_eq!(m.opening, 0, "a connect is still in flight: {m:?}");
    let alive = pool.manager().script.alive();
    assert_eq!(
        i64::from(m.total),
        alive - detached,
        "the pool counts {} connections, the manager has {alive} alive ({detached} detached): {m:?}",
        m.total
    );
    assert_bounds_with_detached(pool, detached);
}

/// [`assert_settled_with_detached`] with none detached.
pub fn assert_settled(pool: &Pool<Mock>) {
    assert_settled_with_detached(pool, 0);
}

/// Yields until `cond` holds; panics after 10 000 rounds (bounded).
pub async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached after 10 000 yields");
}

/// Polls `cond` every millisecond of tokio's clock; panics with `what` after
/// 10 000 polls (bounded). On a paused clock each poll lets the clock jump
/// to the next timer, so timed work in the pool (resets, back-off) runs.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{what}: not reached after 10 000 polls 1 ms apart");
}

/// Checks out `n` connections together and returns them, so none is fresh
/// any more: a fresh connection's first checkout skips validation and
/// `before_acquire`, which tests of those checks must get past.
pub async fn use_each<M: ManageConnection>(pool: &pool_core::Pool<M>, n: usize) {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(pool.get().await.expect("warm-up checkout"));
    }
    drop(held);
    until(|| pool.state().in_use == 0).await;
}

/// A pool over a fresh [`Mock`], built from `config` and opened as
/// `Pool::new` opens it (its `min_size` connections first); the mock to
/// script and watch it with.
///
/// # Panics
///
/// When the config is invalid or the pool fails to open.
pub async fn pool(config: pool_core::PoolConfigBuilder) -> (Mock, Pool<Mock>) {
    let mock = Mock::default();
    let pool = started(&mock, config).await;
    (mock, pool)
}

/// A [`pool`] of one whose only connection is checked out, so the next
/// caller waits; the pool and that connection.
///
/// # Panics
///
/// When the pool fails to open or to hand out its connection.
pub async fn held_one() -> (Pool<Mock>, pool_core::PooledConnection<Mock>) {
    let (_, pool) = pool(config(1)).await;
    let held = pool.get().await.unwrap();
    (pool, held)
}

/// [`pool`] over a manager the test made (a [`Mock`] it scripted first, or
/// a manager of its own).
///
/// # Panics
///
/// When the config is invalid or the pool fails to open.
pub async fn started<M: ManageConnection + Clone>(
    manager: &M,
    config: pool_core::PoolConfigBuilder,
) -> Pool<M> {
    Pool::new(manager.clone(), config.build().unwrap())
        .await
        .unwrap()
}

/// A lazy pool (`Pool::new_lazy`: nothing opened until a checkout asks)
/// over a fresh [`Mock`], and the mock.
///
/// # Panics
///
/// When the config is invalid.
pub fn lazy(config: pool_core::PoolConfigBuilder) -> (Mock, Pool<Mock>) {
    let mock = Mock::default();
    let pool = Pool::new_lazy(mock.clone(), config.build().unwrap());
    (mock, pool)
}

/// Asserts `err` is the mock's own error with the text `what`.
pub fn assert_backend_error(err: &PoolError<MockError>, what: &str) {
    assert!(
        matches!(err, PoolError::Backend(e) if e.0 == what),
        "{err:?}"
    );
}

/// Asserts `err` is a timeout of the wait phase, and returns how long it
/// waited.
pub fn assert_wait_timeout<E: fmt::Debug>(err: &PoolError<E>) -> Duration {
    match err {
        PoolError::Timeout {
            phase: TimeoutPhase::Wait,
            waited,
            ..
        } => *waited,
        other => panic!("expected a wait timeout, got {other:?}"),
    }
}

/// Spawns `task` with a handle of its own on `pool`.
pub fn spawn_on<M, F, Fut>(pool: &Pool<M>, task: F) -> tokio::task::JoinHandle<Fut::Output>
where
    M: ManageConnection,
    F: FnOnce(Pool<M>) -> Fut,
    Fut: std::future::Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    tokio::spawn(task(pool.clone()))
}

/// A `get()` in a task of its own (a caller that waits while the test goes
/// on); the task gives back the id of the connection it got, having
/// returned it.
pub fn spawn_get(
    pool: &Pool<Mock>,
) -> tokio::task::JoinHandle<Result<u64, pool_core::PoolError<MockError>>> {
    let pool = pool.clone();
    tokio::spawn(async move { pool.get().await.map(|c| c.id) })
}
