//! `pg_terminate_backend` on every pool connection: with validation on, no
//! dead connection is handed out and the pool recovers; with validation off,
//! a connection whose query failed is not handed out again.
#![cfg(feature = "tokio-postgres")]

use crate::support;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pool_core::{Pool, PoolConfig, PoolConfigBuilder, ValidationMode};
use pool_postgres::PostgresManager;
use tokio_postgres::NoTls;

/// The pool bound in both tests.
const MAX: u32 = 4;
/// The tasks that share the pool in both tests.
const TASKS: usize = 12;

/// A pool of [`MAX`] validating by `mode`, whose checkouts wait 10 s at
/// most.
fn pool_config(mode: ValidationMode) -> PoolConfigBuilder {
    PoolConfig::builder()
        .max_size(MAX)
        .validation_mode(mode)
        .acquire_timeout(Duration::from_secs(10))
}

fn manager(url: &str, tag: &str) -> PostgresManager<NoTls> {
    let mut config = support::pg::config(url);
    config.application_name(tag);
    PostgresManager::new(config, NoTls)
}

/// Terminates every backend of this test's pool; returns their pids.
///
/// The call sits in the select list, which is evaluated only for rows that
/// passed the filter (in a WHERE clause, the planner may call it first and
/// terminate every backend on the server).
async fn terminate_all(admin: &tokio_postgres::Client, tag: &str) -> Vec<i32> {
    admin
        .query(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&tag],
        )
        .await
        .expect("pg_terminate_backend")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Waits (bounded) until none of `pids` is left on the server.
async fn wait_gone(admin: &tokio_postgres::Client, pids: &[i32]) {
    let gone = support::db::eventually(Duration::from_secs(5), || async move {
        let left: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                &[&pids],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        left == 0
    })
    .await;
    assert!(gone, "terminated backends did not exit");
}

/// One checkout and query: when it started, when it ended, whether the
/// query worked.
#[derive(Debug, Clone, Copy)]
struct Op {
    start: Instant,
    end: Instant,
    ok: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn with_validation_no_dead_connection_is_handed_out() {
    let url = support::db::url("DATABASE_URL");
    const OPS_PER_TASK: usize = 150;
    const WAVES: usize = 3;
    let tag = support::db::unique("kill_v");
    let admin = support::pg::admin(&url).await;
    let config = pool_config(ValidationMode::IsValid)
        .validation_bypass(Duration::ZERO)
        .build()
        .expect("config");
    let pool = Pool::new(manager(&url, &tag), config).await.expect("pool");

    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (pool, stop, ops) = (pool.clone(), Arc::clone(&stop), Arc::clone(&ops));
        tasks.push(tokio::spawn(async move {
            for _ in 0..OPS_PER_TASK {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let start = Instant::now();
                let conn = pool.get().await.expect("get() itself never fails here");
                let ok = conn.query_one("SELECT pg_sleep(0.002)", &[]).await.is_ok();
                drop(conn);
                ops.lock().unwrap().push(Op {
                    start,
                    end: Instant::now(),
                    ok,
                });
            }
        }));
    }

    // Kill every pool connection, three times, while the tasks run.
    let mut waves = Vec::new();
    let mut killed = 0;
    for _ in 0..WAVES {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let start = Instant::now();
        let pids = terminate_all(&admin, &tag).await;
        wait_gone(&admin, &pids).await;
        killed += pids.len();
        waves.push((start, Instant::now()));
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    stop.store(true, Ordering::Relaxed);
    crate::support::db::join_all(tasks).await;
    assert!(
        killed >= WAVES,
        "the waves found connections to kill ({killed})"
    );

    // A query may fail only if a kill overlapped it (it was in flight, or
    // its connection died between validation and use). A failure with no
    // kill anywhere near it means a dead connection was handed out.
    let ops: Vec<Op> = std::mem::take(&mut *ops.lock().unwrap());
    let failed: Vec<&Op> = ops.iter().filter(|op| !op.ok).collect();
    let unexplained: Vec<&&Op> = failed
        .iter()
        .filter(|op| !waves.iter().any(|&(ws, we)| op.start <= we && ws <= op.end))
        .collect();
    assert!(
        unexplained.is_empty(),
        "{} of {} failed queries overlapped no kill: {unexplained:?}",
        unexplained.len(),
        failed.len()
    );
    eprintln!(
        "{} queries, {} failed during a kill, {killed} backends killed",
        ops.len(),
        failed.len()
    );
    let after_last_wave = ops
        .iter()
        .filter(|op| op.start > waves[WAVES - 1].1)
        .count();
    assert!(after_last_wave > 0, "load continued after the last kill");

    // Recovered: every query works, within the bound.
    for _ in 0..10 {
        let conn = pool.get().await.expect("get");
        conn.simple_query("SELECT 1")
            .await
            .expect("query after recovery");
    }
    let m = pool.metrics();
    assert!(m.total <= MAX, "{m:?}");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn without_validation_a_failed_connection_is_not_reused() {
    let url = support::db::url("DATABASE_URL");
    const OPS_PER_TASK: usize = 10;
    let tag = support::db::unique("kill_nv");
    let admin = support::pg::admin(&url).await;
    let config = pool_config(ValidationMode::None).build().expect("config");
    let pool = Pool::new(manager(&url, &tag), config).await.expect("pool");

    // Open all MAX connections, then leave them idle.
    let mut held = Vec::new();
    for _ in 0..MAX {
        held.push(pool.get().await.expect("get"));
    }
    for conn in &held {
        conn.simple_query("SELECT 1").await.expect("warm up");
    }
    drop(held);
    let pids = terminate_all(&admin, &tag).await;
    assert_eq!(pids.len(), MAX as usize, "all pool connections killed");
    wait_gone(&admin, &pids).await;

    let failures = Arc::new(Mutex::new(0usize));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (pool, failures) = (pool.clone(), Arc::clone(&failures));
        tasks.push(tokio::spawn(async move {
            for _ in 0..OPS_PER_TASK {
                let conn = pool.get().await.expect("get");
                if conn.simple_query("SELECT 1").await.is_err() {
                    *failures.lock().unwrap() += 1;
                    assert!(conn.is_closed(), "a failed client is marked closed");
                }
            }
        }));
    }
    crate::support::db::join_all(tasks).await;
    let failures = *failures.lock().unwrap();
    eprintln!("{failures} failed queries, {} dead connections", pids.len());
    // Unvalidated, each dead connection may be handed out once; its failed
    // query marks it closed, so has_broken retires it on return.
    assert!(
        failures <= pids.len(),
        "{failures} failed queries from {} dead connections: one was reused",
        pids.len()
    );
    for _ in 0..10 {
        let conn = pool.get().await.expect("get");
        conn.simple_query("SELECT 1")
            .await
            .expect("query after recovery");
    }
    assert!(pool.metrics().total <= MAX);
    pool.close().await;
}
