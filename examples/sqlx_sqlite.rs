//! The quickstart's program on sqlx: a pool of sqlx connections to an
//! embedded SQLite database, through the pool's `SqlxManager`. Needs no
//! server.
//!
//! ```text
//! cargo run -p pool-examples --features sqlx-sqlite --example sqlx_sqlite
//! ```
//!
//! It opens a pool of 4 connections, runs 32 tasks through it at once, shows a
//! committed and a rolled-back transaction, and prints the pool's metrics.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{ensure, Context};
use pool_core::PoolConfig;
use pool_sqlx::{Pool, SqlxManager};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use sqlx::{Connection, SqliteConnection};

type SqlitePool = Pool<SqliteConnection>;

const TASKS: i64 = 32;
const INSERTS_PER_TASK: i64 = 10;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // One database file that every connection shares. (A plain
    // `sqlite::memory:` database would be private to each connection.)
    let db = TempDb::new()?;
    let options = SqliteConnectOptions::new()
        .filename(&db.path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal) // readers do not block the writer
        .busy_timeout(Duration::from_secs(5)); // writers wait for each other

    let config = PoolConfig::builder()
        .name("sqlx-sqlite")
        .max_size(4)
        .acquire_timeout(Duration::from_secs(10))
        .build()?;
    let pool = Pool::new(SqlxManager::<SqliteConnection>::new(options), config).await?;
    println!(
        "pool of up to {} connections on {}",
        pool.metrics().max_size,
        db.path.display()
    );

    setup(&pool).await?;
    concurrent_inserts(&pool).await?;
    transactions(&pool).await?;

    let m = pool.metrics();
    println!(
        "metrics: {} open ({} idle, {} in use) of {} max; {} checkouts, wait p50 {:.1?} / p99 {:.1?} / max {:.1?}; {} connections created",
        m.total,
        m.idle,
        m.in_use,
        m.max_size,
        m.acquire_count,
        m.acquire_wait_p50,
        m.acquire_wait_p99,
        m.acquire_wait_max,
        m.creation_count,
    );
    pool.close().await;
    Ok(())
}

async fn setup(pool: &SqlitePool) -> anyhow::Result<()> {
    let mut conn = pool.get().await?;
    sqlx::raw_sql(
        "CREATE TABLE events (task INTEGER NOT NULL, seq INTEGER NOT NULL);
         CREATE TABLE accounts (owner TEXT PRIMARY KEY, balance INTEGER NOT NULL);
         INSERT INTO accounts VALUES ('alice', 100), ('bob', 0);",
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// 32 tasks insert at once; the pool hands out at most 4 connections.
async fn concurrent_inserts(pool: &SqlitePool) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let pool = pool.clone();
        tasks.spawn(async move {
            for seq in 0..INSERTS_PER_TASK {
                let mut conn = pool.get().await?;
                sqlx::query("INSERT INTO events (task, seq) VALUES (?, ?)")
                    .bind(task)
                    .bind(seq)
                    .execute(&mut *conn)
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("insert task panicked")??;
    }

    let mut conn = pool.get().await?;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
        .fetch_one(&mut *conn)
        .await?;
    ensure!(
        rows == TASKS * INSERTS_PER_TASK,
        "expected every insert, got {rows}"
    );
    println!(
        "{TASKS} tasks x {INSERTS_PER_TASK} inserts: {rows} rows through {} connections",
        pool.metrics().creation_count
    );
    Ok(())
}

/// Moves `amount` from one account to another inside `tx`; refuses an
/// overdraft.
async fn transfer(
    tx: &mut SqliteConnection,
    from: &str,
    to: &str,
    amount: i64,
) -> anyhow::Result<()> {
    sqlx::query("UPDATE accounts SET balance = balance - ? WHERE owner = ?")
        .bind(amount)
        .bind(from)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE accounts SET balance = balance + ? WHERE owner = ?")
        .bind(amount)
        .bind(to)
        .execute(&mut *tx)
        .await?;
    let left: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE owner = ?")
        .bind(from)
        .fetch_one(&mut *tx)
        .await?;
    ensure!(left >= 0, "{from} cannot pay {amount}");
    Ok(())
}

async fn balances(pool: &SqlitePool) -> anyhow::Result<String> {
    let mut conn = pool.get().await?;
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT owner, balance FROM accounts ORDER BY owner")
            .fetch_all(&mut *conn)
            .await?;
    let shown: Vec<String> = rows.iter().map(|(o, b)| format!("{o} {b}")).collect();
    Ok(shown.join(", "))
}

async fn transactions(pool: &SqlitePool) -> anyhow::Result<()> {
    let mut conn = pool.get().await?;
    let mut tx = conn.begin().await?;
    transfer(&mut tx, "alice", "bob", 30).await?;
    tx.commit().await?;
    drop(conn);
    println!("committed transfer of 30: {}", balances(pool).await?);

    let mut conn = pool.get().await?;
    let mut tx = conn.begin().await?;
    match transfer(&mut tx, "bob", "alice", 500).await {
        Ok(()) => tx.commit().await?,
        Err(refused) => {
            tx.rollback().await?;
            println!("rolled back ({refused}): {}", balances(pool).await?);
        }
    }
    Ok(())
}

/// A directory in the system temp dir, removed with its files at the end.
struct TempDb {
    dir: PathBuf,
    path: PathBuf,
}

impl TempDb {
    fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("pool-sqlx-sqlite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("quickstart.db");
        Ok(Self { dir, path })
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}
