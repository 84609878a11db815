//! sqlx 0.9 on PostgreSQL through the pool: concurrent queries on a small
//! pool, queries straight through `&pool` as with sqlx's `PgPool`, a
//! transaction from `pool.begin()` dropped without commit that the pool
//! rolls back before the same backend is handed out again, and the metrics.
//!
//! ```text
//! cargo run -p pool-examples --features sqlx-postgres --example sqlx_postgres
//! ```
//!
//! Reads `DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`.

use std::time::Duration;

use anyhow::{ensure, Context};
use pool_core::PoolConfig;
use pool_sqlx::{Pool, SqlxManager};
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

    // `&pool` is a sqlx executor: one checkout per query, as with `PgPool`.
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&pool)
        .await?;
    println!("server version {version}, asked through &pool");

    // A transaction dropped without commit. On a pool of one connection the
    // next checkout is sure to get the same backend, so what it sees is the
    // rollback of that very transaction.
    let single = Pool::new(
        SqlxManager::<PgConnection>::from_url(&url)?,
        PoolConfig::builder()
            .name("sqlx-example-single")
            .max_size(1)
            .acquire_timeout(Duration::from_secs(5))
            .build()?,
    )
    .await?;
    let mut tx = single.begin().await?;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("CREATE TEMP TABLE scratch (x int)")
        .execute(&mut *tx)
        .await?;
    drop(tx); // no commit: the pool rolls it back when the connection returns

    let mut conn = single.get().await?;
    let next: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?;
    ensure!(next == pid, "max_size(1) hands out the same backend");
    let scratch: Option<String> = sqlx::query_scalar("SELECT to_regclass('pg_temp.scratch')::text")
        .fetch_one(&mut *conn)
        .await?;
    ensure!(
        scratch.is_none(),
        "the table created in the dropped transaction is gone"
    );
    ensure!(!conn.is_in_transaction(), "handed out inside a transaction");
    println!(
        "dropped transaction on backend {pid}: rolled back on return; \
         the next checkout (backend {next}, the same) sees no table and no transaction"
    );
    drop(conn);
    single.close().await;

    let m = pool.metrics();
    println!(
        "metrics: {} open ({} idle) of {}; {} checkouts, wait p99 {:.1?}; evictions {}",
        m.total, m.idle, m.max_size, m.acquire_count, m.acquire_wait_p99, m.eviction_count
    );
    pool.close().await;
    Ok(())
}
