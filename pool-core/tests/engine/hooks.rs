//! Application hooks: `after_connect` on every new connection,
//! `before_acquire` at checkout and `after_release` at return, each able to
//! reject the connection.

use crate::support;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{config, Conn, Mock, MockError};
use pool_core::{async_trait, ConnectionInfo, Hooks, Pool};

#[derive(Debug, Default)]
struct Recorder {
    connected: AtomicU64,
    acquired: AtomicU64,
    released: AtomicU64,
    fail_connect: AtomicBool,
    reject_acquire: AtomicBool,
    error_acquire: AtomicBool,
    reject_release: AtomicBool,
    last_info: std::sync::Mutex<Option<ConnectionInfo>>,
}

#[derive(Debug, Clone, Default)]
struct Recording(Arc<Recorder>);

#[async_trait]
impl Hooks<Mock> for Recording {
    async fn after_connect(&self, conn: &mut Conn) -> Result<(), MockError> {
        self.0.connected.fetch_add(1, Ordering::SeqCst);
        if self.0.fail_connect.load(Ordering::SeqCst) {
            return Err(MockError("SET search_path failed"));
        }
        conn.uses.push(u64::MAX); // a marker the session setup ran
        Ok(())
    }

    async fn before_acquire(
        &self,
        conn: &mut Conn,
        info: ConnectionInfo,
    ) -> Result<bool, MockError> {
        self.0.acquired.fetch_add(1, Ordering::SeqCst);
        *self.0.last_info.lock().unwrap() = Some(info);
        assert_eq!(
            conn.uses.first(),
            Some(&u64::MAX),
            "after_connect ran first"
        );
        if self.0.error_acquire.load(Ordering::SeqCst) {
            return Err(MockError("checkout check failed"));
        }
        Ok(!self.0.reject_acquire.load(Ordering::SeqCst))
    }

    async fn after_release(
        &self,
        _conn: &mut Conn,
        _info: ConnectionInfo,
    ) -> Result<bool, MockError> {
        self.0.released.fetch_add(1, Ordering::SeqCst);
        Ok(!self.0.reject_release.load(Ordering::SeqCst))
    }
}

async fn settle(pool: &Pool<Mock>) {
    support::until(|| pool.metrics().in_use == 0).await;
}

#[tokio::test]
async fn every_hook_runs_at_its_point() {
    let hooks = Recording::default();
    let pool = Pool::new_with_hooks(Mock::default(), config(2).build().unwrap(), hooks.clone())
        .await
        .unwrap();
    assert_eq!(hooks.0.connected.load(Ordering::SeqCst), 1);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.uses, [u64::MAX]);
    // `Pool::new`'s connection waited idle for this caller: the hook runs,
    // whoever opened it.
    assert_eq!(hooks.0.acquired.load(Ordering::SeqCst), 1);
    drop(conn);
    settle(&pool).await;
    assert_eq!(hooks.0.released.load(Ordering::SeqCst), 1);
    // Idle in the pool since: the hook runs again.
    drop(pool.get().await.unwrap());
    settle(&pool).await;
    assert_eq!(hooks.0.acquired.load(Ordering::SeqCst), 2);
    assert_eq!(
        pool.metrics().idle,
        1,
        "a connection the hook kept goes back"
    );
    assert!(hooks.0.last_info.lock().unwrap().is_some());
}

#[tokio::test]
async fn after_connect_failure_is_a_connect_failure() {
    let hooks = Recording::default();
    hooks.0.fail_connect.store(true, Ordering::SeqCst);
    let mock = Mock::default();
    let err = Pool::new_with_hooks(mock.clone(), config(2).build().unwrap(), hooks.clone())
        .await
        .unwrap_err();
    support::assert_backend_error(&err, "SET search_path failed");
    assert_eq!(
        mock.script.alive(),
        0,
        "the half-set-up connection was closed"
    );
}

#[tokio::test]
async fn before_acquire_can_reject_and_the_caller_gets_another() {
    let hooks = Recording::default();
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(
        mock.clone(),
        config(2).min_size(2).build().unwrap(),
        hooks.clone(),
    )
    .await
    .unwrap();
    support::use_each(&pool, 2).await;
    hooks.0.reject_acquire.store(true, Ordering::SeqCst);
    let handle = {
        let hooks = hooks.clone();
        tokio::spawn(async move {
            // Accept again once both warm connections were turned down.
            for _ in 0..10_000 {
                if hooks.0.acquired.load(Ordering::SeqCst) >= 2 {
                    hooks.0.reject_acquire.store(false, Ordering::SeqCst);
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let conn = pool.get().await.unwrap();
    handle.await.unwrap();
    assert!(conn.id >= 2, "a new connection, got #{}", conn.id);
    assert_eq!(pool.metrics().evictions.hook, 2);
}

/// A hook error closes the idle connection it ran on and the caller gets
/// the one opened in its place, unchecked (fresh).
#[tokio::test(start_paused = true)]
async fn before_acquire_errors_close_the_connection_and_the_caller_gets_a_new_one() {
    let hooks = Recording::default();
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(
        mock.clone(),
        config(1)
            .acquire_timeout(Duration::from_millis(100))
            .build()
            .unwrap(),
        hooks.clone(),
    )
    .await
    .unwrap();
    support::use_each(&pool, 1).await;
    hooks.0.error_acquire.store(true, Ordering::SeqCst);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.id, 1, "the replacement");
    assert_eq!(pool.metrics().evictions.hook, 1);
}

/// A hook that turns every connection down costs one connect per idle
/// connection it rejects: a replacement opened for the waiting caller is
/// handed to it without the hook, so nothing churns.
#[tokio::test(start_paused = true)]
async fn a_hook_rejecting_everything_does_not_churn_connections() {
    let hooks = Recording::default();
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(
        mock.clone(),
        config(1)
            .acquire_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
        hooks.clone(),
    )
    .await
    .unwrap();
    support::use_each(&pool, 1).await;
    hooks.0.reject_acquire.store(true, Ordering::SeqCst);
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.id, 1);
    assert_eq!(mock.script.connects(), 2);
    // Once while `use_each` took the idle connection, once to reject it;
    // its replacement went straight to the caller.
    assert_eq!(hooks.0.acquired.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn after_release_can_reject_at_return() {
    let hooks = Recording::default();
    hooks.0.reject_release.store(true, Ordering::SeqCst);
    let mock = Mock::default();
    let pool = Pool::new_with_hooks(mock.clone(), config(1).build().unwrap(), hooks.clone())
        .await
        .unwrap();
    drop(pool.get().await.unwrap());
    settle(&pool).await;
    for _ in 0..1_000 {
        if pool.metrics().evictions.hook == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let m = pool.metrics();
    assert_eq!((m.total, m.evictions.hook), (0, 1), "{m:?}");
    assert_eq!(mock.script.alive(), 0);
}
