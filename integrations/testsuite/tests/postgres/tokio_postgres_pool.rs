//! PostgresManager in the pool: concurrent queries under the bound, dropped
//! transactions never handed on, and a timed-out query that no longer
//! delays the next checkout.
#![cfg(feature = "tokio-postgres")]

use crate::support;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pool_core::{Pool, PoolConfig};
use pool_postgres::{PostgresManager, QueryError, ResetMode};
use tokio_postgres::NoTls;

/// A manager on `DATABASE_URL` whose connections carry
/// `application_name = tag`, so the server side can pick out this test's
/// connections.
fn manager(tag: &str) -> PostgresManager<NoTls> {
    let mut config = support::pg::config(&support::db::url("DATABASE_URL"));
    config.application_name(tag);
    PostgresManager::new(config, NoTls)
}

/// Runs `sql` on a connection checked out of `pool`, then gives it back.
async fn batch_on(pool: &Pool<PostgresManager<NoTls>>, sql: &str) {
    pool.get()
        .await
        .expect("get")
        .batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

fn config(max_size: u32) -> PoolConfig {
    crate::support::db::pool_config(max_size, 0, Duration::from_secs(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn concurrent_queries_stay_within_the_bound() {
    let url = support::db::url("DATABASE_URL");
    const MAX: u32 = 4;
    const TASKS: usize = 32;
    const QUERIES: usize = 10;
    let tag = support::db::unique("conc_tp");
    let admin = support::pg::admin(&url).await;
    let pool = Pool::new(manager(&tag), config(MAX)).await.expect("pool");

    let pids = Arc::new(Mutex::new(HashSet::new()));
    let mut peak_on_server = 0i64;
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let pool = pool.clone();
        let pids = Arc::clone(&pids);
        tasks.push(tokio::spawn(async move {
            for q in 0..QUERIES {
                let conn = pool.get().await.expect("get");
                let stmt = conn
                    .prepare_cached("SELECT pg_backend_pid(), $1::int")
                    .await
                    .expect("prepare");
                let n = (t * QUERIES + q) as i32;
                let row = conn.query_one(&stmt, &[&n]).await.expect("query");
                assert_eq!(row.get::<_, i32>(1), n);
                pids.lock().unwrap().insert(row.get::<_, i32>(0));
                let m = pool.metrics();
                assert!(m.total <= MAX, "total {} > {MAX}", m.total);
                assert_eq!(m.total, m.idle + m.in_use + m.opening, "{m:?}");
            }
        }));
    }
    // Watch from the server while the tasks run (bounded: 200 looks).
    for _ in 0..200 {
        if tasks.iter().all(|t| t.is_finished()) {
            break;
        }
        peak_on_server = peak_on_server.max(support::pg::sessions(&admin, &tag).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    crate::support::db::join_all(tasks).await;
    let pids = pids.lock().unwrap().len();
    assert!(
        (1..=MAX as usize).contains(&pids),
        "{pids} server processes served the queries"
    );
    assert!(
        peak_on_server <= i64::from(MAX),
        "the server saw {peak_on_server} connections"
    );
    assert_eq!(pool.metrics().acquire_count, (TASKS * QUERIES) as u64);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn dropped_transaction_is_never_handed_out_still_open() {
    let url = support::db::url("DATABASE_URL");
    let tag = support::db::unique("tx_tp");
    let admin = support::pg::admin(&url).await;
    // One connection, so the next checkout is surely the same one.
    let pool = Pool::new(manager(&tag).reset_mode(ResetMode::Rollback), config(1))
        .await
        .expect("pool");
    let table = support::db::Table::postgres("tx_tp_t");
    batch_on(&pool, &format!("CREATE TABLE {table} (x int)")).await;

    for round in 0..3 {
        let mut conn = pool.get().await.expect("get");
        let pid = support::pg::backend_pid(&conn).await;
        {
            let tx = conn.transaction().await.expect("begin");
            tx.execute(&*format!("INSERT INTO {table} VALUES ($1)"), &[&round])
                .await
                .expect("insert");
            if round == 2 {
                std::mem::forget(tx); // no ROLLBACK queued at all
            }
        }
        drop(conn);

        // After its return the connection does not sit idle in transaction.
        let settled = support::db::eventually(Duration::from_secs(5), || {
            let admin = &admin;
            async move { support::pg::backend_state(admin, pid).await.as_deref() == Some("idle") }
        })
        .await;
        assert!(settled, "round {round}: backend left idle in transaction");

        let conn = pool.get().await.expect("get");
        assert_eq!(
            support::pg::backend_pid(&conn).await,
            pid,
            "same connection"
        );
        conn.batch_execute(&format!("INSERT INTO {table} VALUES (-1)"))
            .await
            .expect("write");
        let txid: Option<i64> = conn
            .query_one("SELECT txid_current_if_assigned()", &[])
            .await
            .expect("txid")
            .get(0);
        assert_eq!(txid, None, "round {round}: handed out inside a transaction");
        let kept: i64 = conn
            .query_one(&*format!("SELECT count(*) FROM {table} WHERE x >= 0"), &[])
            .await
            .expect("count")
            .get(0);
        assert_eq!(kept, 0, "round {round}: uncommitted rows were rolled back");
    }
    batch_on(&pool, &format!("DROP TABLE {table}")).await;
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn timed_out_query_does_not_delay_the_next_checkout() {
    let tag = support::db::unique("abandon_tp");
    let pool = Pool::new(manager(&tag), config(1)).await.expect("pool");

    let conn = pool.get().await.expect("get");
    let err = support::pg::outlived_query(&conn, 5).await;
    assert!(matches!(err, QueryError::TimedOut { .. }), "{err:?}");
    drop(conn);

    // The pool holds one connection: without the cancel and the retirement,
    // this checkout's query would queue behind the 5 s sleep.
    let started = Instant::now();
    let conn = pool.get().await.expect("get");
    let one: i32 = conn.query_one("SELECT 1", &[]).await.expect("query").get(0);
    assert_eq!(one, 1);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the next checkout and query took {took:?}"
    );
    assert!(!conn.is_abandoned(), "a fresh connection was handed out");
    assert!(pool.metrics().total <= 1);
    drop(conn);
    pool.close().await;
}
