//! `SqlxPool<PgConnection>` against a real PostgreSQL
//! (`DATABASE_URL`): the bound holds under concurrent queries, and a
//! connection given back inside a transaction is rolled back eagerly and
//! never handed out still inside it.

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, ResetMode, SqlxManager};
use super::drivers::sqlx;
use super::drivers::sqlx::postgres::PgConnectOptions;
use super::drivers::sqlx::{Connection, Executor, PgConnection};
use super::probes::{backend_pid, server_in_transaction, server_state};
use crate::support::db::{bounded, unique};
use futures::FutureExt;
use pool_core::PoolConfig;

type PgPool = SqlxPool<PgConnection>;

fn options() -> PgConnectOptions {
    let url = crate::support::db::url("DATABASE_URL");
    url.parse().expect("DATABASE_URL parses")
}

/// A pool of one connection, so every checkout gets the same backend.
async fn single(options: PgConnectOptions, mode: ResetMode) -> PgPool {
    let config = crate::support::db::named_config("pg-reset", 1, Duration::from_secs(10));
    SqlxPool::new(SqlxManager::new(options).reset_mode(mode), config)
        .await
        .expect("PostgreSQL is reachable")
}

/// Waits (bounded) until the single connection is idle in the pool again,
/// i.e. its reset has finished without anyone asking for it.
async fn until_idle(pool: &PgPool) {
    for _ in 0..500 {
        if pool.metrics().idle == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "the connection did not come back idle: {:?}",
        pool.metrics()
    );
}

/// After a dirty return: the server holds no transaction for `pid` while
/// the connection sits idle in the pool, and the next checkout gets the same
/// backend outside any transaction.
async fn assert_returned_clean(pool: &PgPool, monitor: &mut PgConnection, pid: i32) {
    until_idle(pool).await;
    assert_eq!(server_state(monitor, pid).await, "idle");
    let mut conn = pool.get().await.unwrap();
    assert_eq!(backend_pid(&mut conn).await, pid, "same backend reused");
    assert!(!server_in_transaction(&mut conn).await);
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_queries_stay_within_max_size() {
    let options = options();
    let app = unique("pool-core-concurrency");
    let options = options.application_name(&app);
    bounded(async {
        let mut monitor = PgConnection::connect_with(&options).await.unwrap();
        let config = crate::support::db::named_config("pg-concurrency", 4, Duration::from_secs(30));
        let pool = SqlxPool::new(SqlxManager::<PgConnection>::new(options.clone()), config)
            .await
            .unwrap();

        let tasks: Vec<_> = (0..32i64)
            .map(|task| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    let mut sum = 0;
                    for round in 0..10i64 {
                        let mut conn = pool.get().await.unwrap();
                        let m = pool.metrics();
                        assert!(m.total <= m.max_size, "{m:?}");
                        let echoed: i64 =
                            sqlx::query_scalar("SELECT $1::int8 + 0 * pg_backend_pid()")
                                .bind(task * 100 + round)
                                .fetch_one(&mut *conn)
                                .await
                                .unwrap();
                        sum += echoed;
                    }
                    sum
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.unwrap();
        }
        // Every query came back with its own argument.
        let expected: i64 = (0..32i64)
            .flat_map(|t| (0..10i64).map(move |r| t * 100 + r))
            .sum();
        assert_eq!(total, expected);

        let m = pool.metrics();
        assert!(m.total <= 4 && m.in_use == 0, "{m:?}");
        let on_server: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
                .bind(&app)
                .fetch_one(&mut monitor)
                .await
                .unwrap();
        // The monitor shares the application name.
        assert!(on_server - 1 <= 4, "{on_server} backends for a pool of 4");
        pool.close().await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn dropped_transaction_is_rolled_back_on_return() {
    let options = options();
    bounded(async {
        let mut monitor = PgConnection::connect_with(&options).await.unwrap();
        let pool = single(options, ResetMode::Tracked).await;
        let mut conn = pool.get().await.unwrap();
        let pid = backend_pid(&mut conn).await;
        let mut tx = conn.begin().await.unwrap();
        tx.execute("SELECT txid_current()").await.unwrap();
        drop(tx);
        drop(conn);
        assert_returned_clean(&pool, &mut monitor, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn begin_cancelled_on_a_busy_server_is_rolled_back_in_tracked_mode() {
    let options = options();
    bounded(async {
        let mut monitor = PgConnection::connect_with(&options).await.unwrap();
        let pool = single(options, ResetMode::Tracked).await;
        let mut conn = pool.get().await.unwrap();
        let pid = backend_pid(&mut conn).await;
        // One poll puts the BEGIN on the wire; the reply takes 300 ms.
        let finished = conn
            .begin_with("BEGIN; SELECT pg_sleep(0.3)")
            .now_or_never()
            .is_some();
        assert!(!finished);
        drop(conn);
        assert_returned_clean(&pool, &mut monitor, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn cancelled_begins_and_raw_begins_are_rolled_back_in_strict_mode() {
    let options = options();
    bounded(async {
        let mut monitor = PgConnection::connect_with(&options).await.unwrap();
        let pool = single(options, ResetMode::Strict).await;
        let pid = backend_pid(&mut pool.get().await.unwrap()).await;
        for round in 0..30u64 {
            match round % 3 {
                0 => {
                    let mut conn = pool.get().await.unwrap();
                    let _ = conn.begin().now_or_never();
                }
                1 => {
                    // Cancelled anywhere in checkout or BEGIN.
                    let limit = Duration::from_micros(40 * round);
                    let _ = tokio::time::timeout(limit, async {
                        let mut conn = pool.get().await.unwrap();
                        let _tx = conn.begin().await.unwrap();
                        std::future::pending::<()>().await;
                    })
                    .await;
                }
                _ => {
                    let mut conn = pool.get().await.unwrap();
                    conn.execute("BEGIN").await.unwrap();
                    conn.execute("SELECT txid_current()").await.unwrap();
                }
            }
            assert_returned_clean(&pool, &mut monitor, pid).await;
        }
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn terminated_backends_are_not_reused_without_validation() {
    let options = options();
    let app = unique("pool-core-terminate");
    let options = options.application_name(&app);
    bounded(async {
        let mut monitor = PgConnection::connect_with(&options).await.unwrap();
        let monitor_pid = backend_pid(&mut monitor).await;
        let config = PoolConfig::builder()
            .name("pg-terminate")
            .max_size(3)
            .validation_mode(pool_core::ValidationMode::None)
            .acquire_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let pool = SqlxPool::new(SqlxManager::<PgConnection>::new(options), config)
            .await
            .unwrap();
        // Open all three, then kill their backends while they sit idle.
        let held = futures::future::join_all((0..3).map(|_| pool.get())).await;
        drop(held);
        let killed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> $2) AS t",
        )
        .bind(&app)
        .bind(monitor_pid)
        .fetch_one(&mut monitor)
        .await
        .unwrap();
        assert_eq!(killed, 3);

        // Nothing checks a connection at checkout, so each dead one fails one
        // query; coming back with its failure unread or its socket closed, it
        // is reset, the reset fails, and the pool closes it.
        let mut failures = 0;
        for _ in 0..12 {
            let mut conn = pool.get().await.unwrap();
            if conn.execute("SELECT 1").await.is_err() {
                failures += 1;
            }
        }
        assert!(
            failures <= 3,
            "{failures} failed queries for 3 dead connections"
        );
        // The last failed connection's reset runs in a task: let it finish.
        let mut m = pool.metrics();
        for _ in 0..200 {
            if m.evictions.reset_failed + m.evictions.broken >= failures {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            m = pool.metrics();
        }
        assert!(
            m.evictions.reset_failed + m.evictions.broken >= failures,
            "{m:?}"
        );
        let mut conn = pool.get().await.unwrap();
        conn.execute("SELECT 1").await.unwrap();
    })
    .await;
}
