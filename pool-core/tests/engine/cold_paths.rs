//! The engine's cold paths: a pool used on a second runtime after the
//! first one ended, a runtime shutting down with connects in flight (the
//! tasks it spawns then are dropped before their first poll), slots freed
//! on plain threads, `Pool::new` failing while another of its connects is
//! still running, a connection on its way back to the pool, and the return
//! path against a peer that never answers.
//!
//! The tests that cross runtimes run on real time (each runtime has a clock
//! of its own); the others on the paused clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::{assert_settled, assert_wait_timeout, config, Behaviour, Mock, Scripted};
use pool_core::{
    async_trait, ErrorClass, ManageConnection, Pool, PoolConfig, PoolError, PooledConnection,
};

/// A runtime of its own, as a test's `#[tokio::test]` builds one.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime with two workers.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One pool in a `static`, used by one test after another, each on its
/// own runtime: the waiters of the second are timed out by their deadline,
/// though the deadline task of the first runtime died with it.
#[test]
fn a_waiter_times_out_on_a_second_runtime() {
    let limit = Duration::from_millis(200);
    let first = runtime();
    let (_mock, pool) = first.block_on(support::pool(config(1).acquire_timeout(limit)));
    let held = first.block_on(pool.get()).unwrap();
    // A wait on the first runtime starts the pool's tasks there.
    let err = first.block_on(pool.get()).unwrap_err();
    assert_wait_timeout(&err);
    drop(first);

    let second = runtime();
    let started = Instant::now();
    let waited = second
        .block_on(async { tokio::time::timeout(Duration::from_secs(3), pool.get()).await })
        .expect("the wait on the second runtime never timed out");
    let waited_for = started.elapsed();
    assert_wait_timeout(&waited.unwrap_err());
    assert!(
        waited_for < limit * 4,
        "timed out after {waited_for:?}, the limit is {limit:?}"
    );
    drop(held);
}

/// The housekeeper of a pool whose first runtime ended starts again on the
/// runtime that uses the pool next: a connection past its lifetime is
/// retired there and `min_size` refilled, with no caller asking.
#[test]
fn the_housekeeper_refills_min_size_on_a_second_runtime() {
    let first = runtime();
    let (mock, pool) = first.block_on(support::pool(
        config(1)
            .min_size(1)
            .max_lifetime(Duration::from_millis(300))
            .housekeeping_period(Duration::from_millis(20))
            .acquire_timeout(Duration::from_millis(50)),
    ));
    drop(first);

    let second = runtime();
    second.block_on(async {
        // A caller that waits: the kind of use that starts the pool's tasks.
        let held = pool.get().await.unwrap();
        assert_wait_timeout(&pool.get().await.unwrap_err());
        drop(held);
        support::eventually("the old connection retired and min_size refilled", || {
            mock.script.connects() >= 2 && pool.state().total == 1
        })
        .await;
    });
    let m = pool.metrics();
    assert!(m.evictions.max_lifetime >= 1, "{m:?}");
}

/// A runtime shutting down with connects in flight: the connector tasks
/// are dropped mid-connect, and the connectors their freed slots ask for
/// are spawned on the closing runtime and dropped before their first poll.
/// None of them keeps its place: the next runtime connects as usual.
#[test]
fn connects_cut_off_by_a_runtime_shutdown_keep_no_connector_place() {
    let mock = Mock::with_connect_delay(60_000);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(4)
            .min_size(2)
            .max_concurrent_connects(2)
            .acquire_timeout(Duration::from_millis(500))
            .build()
            .unwrap(),
    );
    let first = runtime();
    first.block_on(async {
        let _callers = [support::spawn_get(&pool), support::spawn_get(&pool)];
        support::eventually("two connects in flight", || {
            mock.script.connecting.load(Ordering::SeqCst) == 2
        })
        .await;
    });
    drop(first);
    assert_eq!(mock.script.connecting.load(Ordering::SeqCst), 0);
    mock.script.connect_delay_ms.store(0, Ordering::SeqCst);

    let second = runtime();
    let got = second
        .block_on(async { tokio::time::timeout(Duration::from_secs(3), pool.get()).await })
        .expect("bounded");
    let conn = got.unwrap_or_else(|e| panic!("no connect on the second runtime: {e}"));
    drop(conn);
    second.block_on(support::eventually("min_size refilled", || {
        pool.state().total >= 2
    }));
}

/// A manager whose first connect succeeds and whose later ones fail for
/// good, the first of them at once and the rest after holding their
/// worker thread for 300 ms (a blocking call inside `connect`).
#[derive(Debug, Clone, Default)]
struct FailsAfterFirst {
    calls: Arc<AtomicU64>,
}

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("password authentication failed")
    }
}

impl std::error::Error for Refused {}

#[async_trait]
impl ManageConnection for FailsAfterFirst {
    type Connection = ();
    type Error = Refused;

    async fn connect(&self) -> Result<(), Refused> {
        match self.calls.fetch_add(1, Ordering::SeqCst) {
            0 => Ok(()),
            1 => Err(Refused),
            _ => {
                std::thread::sleep(Duration::from_millis(300));
                Err(Refused)
            }
        }
    }

    async fn is_valid(&self, _: &mut ()) -> Result<(), Refused> {
        Ok(())
    }

    fn classify_error(&self, _: &Refused) -> ErrorClass {
        ErrorClass::Permanent
    }
}

/// `Pool::new` whose later initial connects fail, one at once and one
/// after blocking its worker: `new` returns the error, and the close it
/// runs before returning is woken by the slot the slow one gives back
/// after the close began.
#[test]
fn pool_new_returns_when_a_later_initial_connect_fails_while_another_runs() {
    for round in 0..5 {
        let rt = two_workers();
        let started = Instant::now();
        let built = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(3),
                Pool::new(
                    FailsAfterFirst::default(),
                    PoolConfig::builder()
                        .max_size(4)
                        .min_size(3)
                        .max_concurrent_connects(2)
                        .build()
                        .unwrap(),
                ),
            )
            .await
        });
        let Ok(built) = built else {
            panic!("round {round}: Pool::new still closing after 3 s");
        };
        assert!(
            matches!(built, Err(PoolError::Backend(Refused))),
            "{built:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}

/// A slot freed on a plain thread (no runtime there to start a connect):
/// the caller waiting is still served by a new connection, well within
/// its time limit, not left to time out beside a free slot.
#[tokio::test(start_paused = true)]
async fn a_slot_freed_on_a_plain_thread_serves_the_waiter() {
    for how in ["discarded", "broken", "expired", "detached"] {
        let (mock, pool) = support::pool(
            config(1)
                .acquire_timeout(Duration::from_millis(400))
                .max_lifetime(Duration::from_secs(60)),
        )
        .await;
        let mut held = pool.get().await.unwrap();
        let waiter = support::spawn_get(&pool);
        support::until(|| pool.state().waiting == 1).await;
        if how == "expired" {
            pool.soft_evict_all();
        }
        std::thread::spawn(move || match how {
            "discarded" => PooledConnection::discard(held),
            "broken" => {
                held.broken = true;
                drop(held);
            }
            "detached" => drop(PooledConnection::detach(held)),
            _ => drop(held),
        })
        .join()
        .unwrap();
        let got = waiter.await.unwrap();
        assert!(got.is_ok(), "{how}: {got:?}");
        assert_eq!(mock.script.connects(), 2, "{how}");
        assert_settled(&pool);
    }
}

/// A connection on its way back (its `after_release` hook running in a
/// task) is the one the next caller gets: the caller waits for it rather
/// than open a second connection beside it.
#[tokio::test(start_paused = true)]
async fn a_caller_arriving_during_a_return_gets_that_connection() {
    let hooks = Scripted::default();
    hooks.0.after_release.set(Behaviour::Slow);
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(mock.clone(), config(4).build().unwrap(), hooks.clone())
        .await
        .unwrap();
    for _ in 0..5 {
        let conn = pool.get().await.unwrap();
        let id = conn.id;
        drop(conn);
        let next = pool.get().await.unwrap();
        assert_eq!(next.id, id, "a second connection was opened");
        drop(next);
    }
    assert_eq!(mock.script.connects(), 1);
}

/// The reported shape: two workers, a `before_acquire` hook (and the
/// default `after_release`, which sends every return through a task), a
/// `get()` right after dropping the only connection, many times over.
#[test]
fn an_idle_connection_is_reused_on_two_workers() {
    #[derive(Debug, Clone)]
    struct BeforeAcquireOnly;
    #[async_trait]
    impl pool_core::Hooks<Mock> for BeforeAcquireOnly {
        async fn before_acquire(
            &self,
            _: &mut support::Conn,
            _: pool_core::ConnectionInfo,
        ) -> Result<bool, support::MockError> {
            Ok(true)
        }
    }
    let rt = two_workers();
    let mock = Mock::default();
    rt.block_on(async {
        let pool =
            Pool::new_with_hooks(mock.clone(), config(4).build().unwrap(), BeforeAcquireOnly)
                .await
                .unwrap();
        // Load on the other worker.
        let busy = tokio::spawn(async {
            let until = tokio::time::Instant::now() + Duration::from_millis(400);
            while tokio::time::Instant::now() < until {
                tokio::task::yield_now().await;
            }
        });
        tokio::spawn(async move {
            for round in 0..400 {
                let conn = pool.get().await.unwrap();
                drop(conn);
                let again = pool.get().await.unwrap();
                drop(again);
                assert_eq!(
                    pool.manager().script.connects(),
                    1,
                    "round {round}: a second connection was opened beside an idle one"
                );
            }
        })
        .await
        .unwrap();
        busy.await.unwrap();
    });
}

/// A return whose step never finishes (an `after_release` hook that hangs)
/// holds its connection only briefly as the next caller's supply: past a
/// short grace the caller is served by a new connection, long before its
/// own time limit or the step's.
#[tokio::test(start_paused = true)]
async fn a_return_that_hangs_does_not_hold_the_next_caller() {
    let hooks = Scripted::default();
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(
        mock.clone(),
        config(4)
            .acquire_timeout(Duration::from_secs(1))
            .validation_timeout(Duration::from_secs(5))
            .build()
            .unwrap(),
        hooks.clone(),
    )
    .await
    .unwrap();
    let conn = pool.get().await.unwrap();
    hooks.0.after_release.set(Behaviour::Never);
    drop(conn);
    let started = tokio::time::Instant::now();
    let next = pool.get().await.expect("served by a new connection");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "waited {:?}",
        started.elapsed()
    );
    drop(next);
}

/// The return path against a peer that never answers: a reset that never
/// ends and a close that never ends. Each step is cut off by
/// `validation_timeout`, so the slot comes back within twice that, and the
/// next caller gets a new connection.
#[tokio::test(start_paused = true)]
async fn a_return_to_a_silent_peer_gives_the_slot_back_in_bounded_time() {
    let limit = Duration::from_millis(100);
    let (mock, pool) = support::pool(config(1).validation_timeout(limit)).await;
    mock.script.on_reset.set(Behaviour::Never);
    mock.script.set(&mock.script.await_close, true);
    mock.script.on_close.set(Behaviour::Never);
    let mut conn = pool.get().await.unwrap();
    conn.dirty = true;
    let started = tokio::time::Instant::now();
    drop(conn);
    support::eventually("the slot came back", || pool.state().total == 0).await;
    assert!(started.elapsed() <= limit * 2 + Duration::from_millis(5));
    assert_eq!(mock.script.alive(), 0);
    let m = pool.metrics();
    assert_eq!(m.evictions.reset_failed, 1, "{m:?}");
    mock.script.on_reset.set(Behaviour::Ok);
    mock.script.on_close.set(Behaviour::Ok);
    drop(pool.get().await.expect("a new connection"));
}

/// The same with an `after_release` hook that never ends.
#[tokio::test(start_paused = true)]
async fn a_hook_that_never_ends_gives_the_slot_back_in_bounded_time() {
    let limit = Duration::from_millis(100);
    let hooks = Scripted::default();
    hooks.0.after_release.set(Behaviour::Never);
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(
        mock.clone(),
        config(1).validation_timeout(limit).build().unwrap(),
        hooks,
    )
    .await
    .unwrap();
    let started = tokio::time::Instant::now();
    drop(pool.get().await.unwrap());
    support::eventually("the slot came back", || pool.state().total == 0).await;
    assert!(started.elapsed() <= limit + Duration::from_millis(5));
    assert_eq!(pool.metrics().evictions.hook, 1);
}

/// A runtime shutting down mid-reset and mid-close: the tasks holding the
/// connections are dropped, each closing its connection and freeing its
/// slot; the pool works on the next runtime.
#[test]
fn a_runtime_shutting_down_mid_return_frees_the_slots() {
    let mock = Mock::default();
    mock.script.on_reset.set(Behaviour::Never);
    mock.script.set(&mock.script.await_close, true);
    mock.script.on_close.set(Behaviour::Never);
    let first = runtime();
    let pool = first.block_on(async {
        let pool = support::started(&mock, config(2).min_size(2)).await;
        let mut dirty = pool.get().await.unwrap();
        let broken = pool.get().await.unwrap();
        dirty.dirty = true;
        drop(dirty); // reset in a task, never ends
        let mut broken = broken;
        broken.broken = true;
        drop(broken); // closed in a task, never ends
        tokio::task::yield_now().await;
        assert_eq!(mock.script.resets.load(Ordering::SeqCst), 1);
        assert_eq!(pool.state().total, 2, "both steps still hold their slots");
        pool
    });
    drop(first);
    assert_eq!(pool.state().total, 0, "{:?}", pool.state());
    assert_eq!(mock.script.alive(), 0);
    mock.script.on_reset.set(Behaviour::Ok);
    mock.script.on_close.set(Behaviour::Ok);
    let second = runtime();
    second.block_on(async {
        drop(
            pool.get()
                .await
                .expect("the pool works on the next runtime"),
        );
    });
}
