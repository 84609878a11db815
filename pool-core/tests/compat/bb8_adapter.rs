//! Bb8Manager: bb8 managers run unchanged in the pool, their
//! connect / is_valid / has_broken mapped one to one.
#![cfg(feature = "bb8")]

use crate::support;
use std::collections::HashSet;
use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bb8_postgres::PostgresConnectionManager;
use pool_core::compat::bb8::{Bb8Error, Bb8Manager};
use pool_core::{ManageConnection, Pool, PoolConfig, PoolError, ValidationMode};
use tokio_postgres::NoTls;

/// A bb8 manager with its own error type.
#[derive(Debug, Default)]
struct Fake {
    connects: AtomicUsize,
    checks: AtomicUsize,
    fail_connect: bool,
}

#[derive(Debug)]
struct FakeConn {
    broken: bool,
}

#[derive(Debug)]
struct FakeError(&'static str);

impl std::fmt::Display for FakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for FakeError {}

impl bb8::ManageConnection for Fake {
    type Connection = FakeConn;
    type Error = FakeError;

    async fn connect(&self) -> Result<FakeConn, FakeError> {
        self.connects.fetch_add(1, Ordering::SeqCst);
        if self.fail_connect {
            return Err(FakeError("refused"));
        }
        Ok(FakeConn { broken: false })
    }

    async fn is_valid(&self, _conn: &mut FakeConn) -> Result<(), FakeError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn has_broken(&self, conn: &mut FakeConn) -> bool {
        conn.broken
    }
}

fn config(max: u32, mode: ValidationMode) -> PoolConfig {
    PoolConfig::builder()
        .max_size(max)
        .validation_mode(mode)
        .validation_bypass(Duration::ZERO)
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .expect("config")
}

/// How many `is_valid` calls three checkouts of one connection make under
/// `mode`.
async fn checks_over_three_checkouts(mode: ValidationMode) -> usize {
    let pool = Pool::new(Bb8Manager::new(Fake::default()), config(1, mode))
        .await
        .expect("pool");
    for _ in 0..3 {
        drop(pool.get().await.expect("get"));
    }
    pool.manager().get_ref().checks.load(Ordering::SeqCst)
}

#[tokio::test]
async fn is_valid_runs_at_checkout_only_when_validation_is_on() {
    // Not the first checkout: the connection was opened moments ago.
    assert_eq!(
        checks_over_three_checkouts(ValidationMode::IsValid).await,
        2
    );
    assert_eq!(checks_over_three_checkouts(ValidationMode::None).await, 0);
}

#[tokio::test]
async fn has_broken_retires_the_connection() {
    let pool = Pool::new(
        Bb8Manager::new(Fake::default()),
        config(1, ValidationMode::None),
    )
    .await
    .expect("pool");
    let mut conn = pool.get().await.expect("get");
    conn.broken = true;
    drop(conn);
    let conn = pool.get().await.expect("get");
    assert!(!conn.broken, "a new connection, not the broken one");
    assert_eq!(pool.manager().get_ref().connects.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn errors_are_wrapped_and_displayed() {
    let m = Bb8Manager::new(Fake {
        fail_connect: true,
        ..Fake::default()
    });
    let err: Bb8Error<FakeError> = m.connect().await.expect_err("refused");
    assert_eq!(err.to_string(), "bb8 manager failed: refused");
    assert_eq!(
        err.source().map(|e| e.to_string()).as_deref(),
        Some("refused")
    );
    assert_eq!(err.into_inner().0, "refused");

    match Pool::new(m, config(1, ValidationMode::None)).await {
        Err(PoolError::Backend(e)) => assert_eq!(e.get_ref().0, "refused"),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn bb8_postgres_runs_concurrent_queries_within_the_bound() {
    let url = support::db::url("DATABASE_URL");
    const MAX: u32 = 3;
    let pg = PostgresConnectionManager::new(support::pg::config(&url), NoTls);
    let pool = Pool::new(Bb8Manager::new(pg), config(MAX, ValidationMode::IsValid))
        .await
        .expect("pool");
    let pids = Arc::new(Mutex::new(HashSet::new()));
    let mut tasks = Vec::new();
    for t in 0..16i32 {
        let (pool, pids) = (pool.clone(), Arc::clone(&pids));
        tasks.push(tokio::spawn(async move {
            for q in 0..10i32 {
                let conn = pool.get().await.expect("get");
                let row = conn
                    .query_one("SELECT pg_backend_pid(), $1::int", &[&(t * 10 + q)])
                    .await
                    .expect("query");
                assert_eq!(row.get::<_, i32>(1), t * 10 + q);
                pids.lock().unwrap().insert(row.get::<_, i32>(0));
                assert!(pool.metrics().total <= MAX);
            }
        }));
    }
    crate::support::db::join_all(tasks).await;
    let distinct = pids.lock().unwrap().len();
    assert!(
        (1..=MAX as usize).contains(&distinct),
        "{distinct} backends"
    );
    pool.close().await;
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn bb8_postgres_terminated_connection_is_replaced() {
    let (pg_config, admin) = support::pg::server().await;
    let pg = PostgresConnectionManager::new(pg_config, NoTls);
    let pool = Pool::new(Bb8Manager::new(pg), config(1, ValidationMode::IsValid))
        .await
        .expect("pool");
    let conn = pool.get().await.expect("get");
    let pid = support::pg::backend_pid(&conn).await;
    drop(conn);
    support::pg::terminate(&admin, pid).await;
    // bb8-postgres's is_valid (an empty query) fails at checkout; the pool
    // opens another connection.
    let conn = pool.get().await.expect("get");
    assert_ne!(support::pg::backend_pid(&conn).await, pid);
}

#[tokio::test]
async fn bb8_postgres_debug_and_errors_hide_the_password() {
    const SECRET: &str = "bb8-secret-do-not-print";
    let mut pg = tokio_postgres::Config::new();
    pg.host("127.0.0.1")
        .port(1)
        .user("app")
        .password(SECRET)
        .connect_timeout(Duration::from_secs(2));
    let manager = Bb8Manager::new(PostgresConnectionManager::new(pg, NoTls));
    let debug = format!("{manager:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    let err = manager
        .connect()
        .await
        .expect_err("nothing listens on port 1");
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains(SECRET), "{text}");
    }
}
