//! The pool over tokio-postgres: transactions, the statement cache, and a
//! query timeout that cancels on the server.
//!
//! Run with a PostgreSQL server:
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run -p pool-examples --features tokio-postgres --example tokio_postgres
//! ```

use std::time::Duration;

use pool_core::{Pool, PoolConfig};
use pool_postgres::{PostgresManager, ResetMode};
use tokio_postgres::NoTls;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let mut pg: tokio_postgres::Config = url.parse()?;
    pg.application_name("pool-example");

    // Roll back any transaction left unfinished (the default), cache up to
    // 128 prepared statements per connection.
    let manager = PostgresManager::new(pg, NoTls)
        .reset_mode(ResetMode::Rollback)
        .statement_cache_capacity(128);
    println!("manager: {manager:?}"); // no password in here
    let config = PoolConfig::builder()
        .name("example")
        .max_size(4)
        .min_size(1)
        .acquire_timeout(Duration::from_secs(5))
        .build()?;
    let pool = Pool::new(manager, config).await?;

    let table = format!("pool_example_{}", std::process::id());
    pool.get()
        .await?
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (id int PRIMARY KEY, note text)"
        ))
        .await?;

    // The table goes whatever happened in between (an example run against
    // a shared database leaves nothing behind).
    let worked = work(&pool, &table).await;
    let conn = pool.get().await?;
    conn.batch_execute(&format!("DROP TABLE {table}")).await?;
    drop(conn);
    worked?;

    let m = pool.metrics();
    println!(
        "metrics: {} open ({} idle), {} checkouts, {} opened, wait p99 {:?}",
        m.total,
        m.idle,
        m.acquire_count,
        m.creation_count,
        to_micros(m.acquire_wait_p99)
    );
    pool.close().await;
    Ok(())
}

/// Writes from twenty tasks, then a query cut off by its time limit.
async fn work(pool: &Pool<PostgresManager<NoTls>>, table: &str) -> anyhow::Result<()> {
    // Twenty tasks share four connections; each writes in a transaction.
    let mut tasks = Vec::new();
    for id in 0..20i32 {
        let (pool, table) = (pool.clone(), table.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get().await?;
            let insert = conn
                .prepare_cached(&format!("INSERT INTO {table} VALUES ($1, $2)"))
                .await?;
            let tx = conn.transaction().await?;
            tx.execute(&insert, &[&id, &format!("row {id}")]).await?;
            if id % 5 == 0 {
                // Dropped without commit: rolled back, and the connection
                // is reset before anyone else gets it.
                return anyhow::Ok(());
            }
            tx.commit().await?;
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let conn = pool.get().await?;
    let rows: i64 = conn
        .query_one(&*format!("SELECT count(*) FROM {table}"), &[])
        .await?
        .get(0);
    println!("committed rows: {rows} (of 20; every fifth was rolled back)");

    // A query that outlives its time limit is cancelled on the server, and
    // its connection is retired rather than reused.
    let slow = conn
        .with_timeout(
            Duration::from_millis(200),
            conn.query("SELECT pg_sleep(3)", &[]),
        )
        .await;
    match slow {
        Err(e) if e.is_timeout() => println!("slow query: {e}"),
        other => println!("slow query: unexpected {other:?}"),
    }
    drop(conn);

    Ok(())
}

/// A duration as people read it: whole microseconds (`1.234ms`, not
/// `1.234567ms`).
fn to_micros(d: Duration) -> Duration {
    Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
