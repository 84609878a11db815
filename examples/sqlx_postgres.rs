//! sqlx on PostgreSQL through the pool: concurrent queries on a small pool,
//! a transaction dropped without commit that the pool rolls back before
//! anyone else gets the connection, and the metrics.
//!
//! ```text
//! cargo run -p pool-examples --example sqlx_postgres
//! ```
//!
//! Reads `DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`.

use std::time::Duration;

use anyhow::{ensure, Context};
use pool_core::managers::sqlx::SqlxManager;
use pool_core::{Pool, PoolConfig};
use sqlx::{Connection, PgConnection};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let config = PoolConfig::builder()
        .name("sqlx-example")
        .max_size(4)
        .min_size(1)
        .acquire_timeout(Duration::from_secs(5))
        .build()?;
    let manager = SqlxManager::<PgConnection>::from_url(&url).context("parsing DATABASE_URL")?;
    // The manager's Debug shows host, port, database and user: never a password.
    println!("manager: {manager:?}");
    let pool = Pool::new(manager, config)
        .await
        .context("connecting (is PostgreSQL running?)")?;

    // 64 queries from 16 tasks through at most 4 connections.
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..16i32 {
        let pool = pool.clone();
        tasks.spawn(async move {
            let mut sum = 0i64;
            for i in 0..4i32 {
                let mut conn = pool.get().await?;
                let (n,): (i32,) = sqlx::query_as("SELECT $1::int4 * $2::int4")
                    .bind(task)
                    .bind(i)
                    .fetch_one(&mut *conn)
                    .await?;
                sum += i64::from(n);
            }
            anyhow::Ok(sum)
        });
    }
    let mut total = 0;
    while let Some(done) = tasks.join_next().await {
        total += done.context("query task panicked")??;
    }
    println!(
        "16 tasks x 4 queries through {} connections: sum {total}",
        pool.metrics().creation_count
    );

    // A transaction dropped without commit: sqlx queues a ROLLBACK, and the
    // pool sends it when the connection comes back, before anyone else can
    // take it.
    let pid = {
        let mut conn = pool.get().await?;
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await?;
        let mut tx = conn.begin().await?;
        sqlx::query("CREATE TEMP TABLE scratch (x int)")
            .execute(&mut *tx)
            .await?;
        drop(tx); // no commit
        pid
    };
    let mut conn = pool.get().await?;
    let next: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?;
    let in_tx: Option<i64> = sqlx::query_scalar("SELECT txid_current_if_assigned()::text::int8")
        .fetch_one(&mut *conn)
        .await?;
    ensure!(in_tx.is_none(), "handed out inside a transaction");
    println!(
        "dropped transaction on backend {pid}: rolled back on return; next checkout (backend {next}) is clean"
    );
    drop(conn);

    let m = pool.metrics();
    println!(
        "metrics: {} open ({} idle) of {}; {} checkouts, wait p99 {:.1?}; evictions {}",
        m.total, m.idle, m.max_size, m.acquire_count, m.acquire_wait_p99, m.eviction_count
    );
    pool.close().await;
    Ok(())
}
