//! Quickstart: a pool of SQLite connections (rusqlite, with SQLite compiled
//! in) shared by async tasks. Needs no server, and builds only the pool,
//! tokio and SQLite.
//!
//! ```text
//! cargo run -p pool-examples --example quickstart
//! ```
//!
//! It opens a pool of 4 connections, runs 32 tasks through it at once, shows a
//! committed and a rolled-back transaction, and prints the pool's metrics.
//!
//! `Sqlite` below is the manager: what the pool needs to know about a kind
//! of connection (open one, check one, clean one that comes back inside a
//! transaction). The same program on sqlx's SQLite driver, whose manager
//! the pool ships, is the `sqlx_sqlite` example.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{ensure, Context};
use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
use rusqlite::{params, Connection, Transaction};

/// Opens connections to one SQLite database file.
#[derive(Debug)]
struct Sqlite {
    path: PathBuf,
}

#[async_trait]
impl ManageConnection for Sqlite {
    type Connection = Connection;
    type Error = rusqlite::Error;

    async fn connect(&self) -> Result<Connection, rusqlite::Error> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(Duration::from_secs(5))?; // writers wait for each other
        conn.pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))?; // readers do not block the writer
        Ok(conn)
    }

    async fn is_valid(&self, conn: &mut Connection) -> Result<(), rusqlite::Error> {
        conn.query_row("SELECT 1", [], |_| Ok(()))
    }

    /// A connection given back inside a transaction (a task that panicked
    /// half-way, say) ...
    fn needs_reset(&self, conn: &mut Connection) -> bool {
        !conn.is_autocommit()
    }

    /// ... is rolled back before anyone gets it again.
    async fn reset(&self, conn: &mut Connection) -> Result<(), rusqlite::Error> {
        conn.execute_batch("ROLLBACK")
    }
}

type SqlitePool = Pool<Sqlite>;

const TASKS: i64 = 32;
const INSERTS_PER_TASK: i64 = 10;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // One database file that every connection shares.
    let db = TempDb::new()?;
    let config = PoolConfig::builder()
        .name("quickstart")
        .max_size(4)
        .acquire_timeout(Duration::from_secs(10))
        .build()?;
    let manager = Sqlite {
        path: db.path.clone(),
    };
    let pool = Pool::new(manager, config).await?;
    println!(
        "pool of up to {} connections on {}",
        pool.metrics().max_size,
        db.path.display()
    );

    with_conn(&pool, |conn| {
        conn.execute_batch(
            "CREATE TABLE events (task INTEGER NOT NULL, seq INTEGER NOT NULL);
             CREATE TABLE accounts (owner TEXT PRIMARY KEY, balance INTEGER NOT NULL);
             INSERT INTO accounts VALUES ('alice', 100), ('bob', 0);",
        )?;
        Ok(())
    })
    .await?;
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

/// Checks a connection out and runs `work` on it on tokio's blocking
/// threads (SQLite calls block; the runtime's workers stay free), then
/// gives it back.
async fn with_conn<T, F>(pool: &SqlitePool, work: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> anyhow::Result<T> + Send + 'static,
{
    let mut conn = pool.get().await?;
    let (conn, done) = tokio::task::spawn_blocking(move || {
        let done = work(&mut conn);
        (conn, done)
    })
    .await
    .context("the SQLite call panicked")?;
    drop(conn); // back to the pool
    done
}

/// 32 tasks insert at once; the pool hands out at most 4 connections.
async fn concurrent_inserts(pool: &SqlitePool) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let pool = pool.clone();
        tasks.spawn(async move {
            for seq in 0..INSERTS_PER_TASK {
                with_conn(&pool, move |conn| {
                    conn.execute(
                        "INSERT INTO events (task, seq) VALUES (?1, ?2)",
                        params![task, seq],
                    )?;
                    Ok(())
                })
                .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("insert task panicked")??;
    }

    let rows: i64 = with_conn(pool, |conn| {
        Ok(conn.query_row("SELECT COUNT(*) FROM events", [], |row| row.get(0))?)
    })
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
fn transfer(tx: &Transaction<'_>, from: &str, to: &str, amount: i64) -> anyhow::Result<()> {
    tx.execute(
        "UPDATE accounts SET balance = balance - ?1 WHERE owner = ?2",
        params![amount, from],
    )?;
    tx.execute(
        "UPDATE accounts SET balance = balance + ?1 WHERE owner = ?2",
        params![amount, to],
    )?;
    let left: i64 = tx.query_row(
        "SELECT balance FROM accounts WHERE owner = ?1",
        params![from],
        |row| row.get(0),
    )?;
    ensure!(left >= 0, "{from} cannot pay {amount}");
    Ok(())
}

async fn balances(pool: &SqlitePool) -> anyhow::Result<String> {
    with_conn(pool, |conn| {
        let mut query = conn.prepare("SELECT owner, balance FROM accounts ORDER BY owner")?;
        let rows = query.query_map([], |row| {
            Ok(format!(
                "{} {}",
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?
            ))
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?.join(", "))
    })
    .await
}

async fn transactions(pool: &SqlitePool) -> anyhow::Result<()> {
    with_conn(pool, |conn| {
        let tx = conn.transaction()?;
        transfer(&tx, "alice", "bob", 30)?;
        tx.commit()?;
        Ok(())
    })
    .await?;
    println!("committed transfer of 30: {}", balances(pool).await?);

    let refused = with_conn(pool, |conn| {
        let tx = conn.transaction()?;
        match transfer(&tx, "bob", "alice", 500) {
            Ok(()) => {
                tx.commit()?;
                Ok(None)
            }
            Err(refused) => {
                tx.rollback()?;
                Ok(Some(refused))
            }
        }
    })
    .await?;
    if let Some(refused) = refused {
        println!("rolled back ({refused}): {}", balances(pool).await?);
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
        let dir = std::env::temp_dir().join(format!("pool-quickstart-{}", std::process::id()));
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
