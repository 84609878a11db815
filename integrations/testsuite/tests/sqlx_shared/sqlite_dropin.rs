//! The pool as a drop-in for sqlx's `SqlitePool`: the drop-in suite
//! (`dropin_suite.rs`) on an in-memory database (`max_size(1)`: the table
//! the tests create exists only on that one connection, so finding it
//! proves the next checkout got the same connection back), and the rest of
//! `SqlitePool`'s surface.

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, SqliteConnection};
use super::probes::server_in_transaction;
use crate::support::db::{bounded, sql, unique};
use pool_core::PoolConfig;

type Conn = SqliteConnection;
type P = SqlxPool<SqliteConnection>;
type SqlitePool = P;
/// An in-memory database has no backend id: its table tells one
/// connection from another.
type Id = ();

/// Cancelled at any point, `pool.begin()` keeps the connection on SQLite:
/// closing it would lose the database.
const KEEPS_CONNECTION_ON_CANCEL: bool = true;

async fn open(config: PoolConfig) -> P {
    let manager = SqlxManager::<SqliteConnection>::from_url("sqlite::memory:").unwrap();
    SqlxPool::new(manager, config).await.unwrap()
}

/// The in-memory database is the pool's own: its one table needs no
/// unique name and goes with the connection.
struct Table;

impl Table {
    fn name(&self) -> &'static str {
        "items"
    }
}

fn new_table(_prefix: &str) -> Table {
    Table
}

async fn create_table(pool: &P, _table: &Table) {
    sqlx::query("CREATE TABLE items (tag TEXT NOT NULL)")
        .execute(pool)
        .await
        .unwrap();
}

async fn backend_id(_conn: &mut SqliteConnection) -> Id {}

/// The connection holds the table [`create_table`] made on the pool's one
/// connection: it is the same in-memory database.
async fn assert_same_backend(conn: &mut SqliteConnection, (): Id) {
    let tables: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'items'")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(tables, 1, "the same in-memory database");
}

dropin_suite! {
    name: "sqlite-dropin",
    table: "items",
    placeholders: ("?", "?"),
    int: i64,
    select_none: "SELECT 1 WHERE 0",
}

#[tokio::test]
async fn begin_records_its_caller_as_the_holder_site() {
    bounded(async {
        let (_table, pool) = single().await;
        let (tx, line) = (pool.begin().await.unwrap(), line!());
        let holders = pool.holders();
        assert_eq!(holders.len(), 1, "{holders:?}");
        let site = holders[0].location;
        assert!(
            site.file().ends_with("sqlite_dropin.rs") && site.line() == line,
            "recorded at {site}, not the caller's line {line}"
        );
        tx.rollback().await.unwrap();
        pool.close().await;
    })
    .await;
}

/// The rows tagged `tag`, through any `sqlx::Acquire`: the shape of a sqlx
/// function that takes a pool, a connection or a transaction.
async fn count_through<'c, A>(conn: A, tag: &str) -> Result<i64, sqlx::Error>
where
    A: sqlx::Acquire<'c, Database = sqlx::Sqlite>,
{
    let mut conn = conn.acquire().await?;
    sqlx::query_scalar("SELECT COUNT(*) FROM items WHERE tag = ?")
        .bind(tag)
        .fetch_one(&mut *conn)
        .await
}

/// Inserts `tag` in a transaction of its own begun through any
/// `sqlx::Acquire`, committed when `commit`, else dropped.
async fn insert_through<'c, A>(conn: A, tag: &str, commit: bool) -> Result<(), sqlx::Error>
where
    A: sqlx::Acquire<'c, Database = sqlx::Sqlite>,
{
    let mut tx = conn.begin().await?;
    sqlx::query("INSERT INTO items (tag) VALUES (?)")
        .bind(tag)
        .execute(&mut *tx)
        .await?;
    if commit {
        tx.commit().await?;
    }
    Ok(())
}

/// `pool.acquire()?` in a function that returns `sqlx::Error`, as with
/// sqlx's pool.
async fn count_with_acquire(pool: &SqlitePool, tag: &str) -> Result<i64, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    count_through(&mut conn, tag).await
}

#[tokio::test]
async fn acquire_checks_out_with_sqlx_errors() {
    bounded(async {
        let config =
            crate::support::db::named_config("sqlite-acquire", 1, Duration::from_millis(50));
        let manager = SqlxManager::<SqliteConnection>::from_url("sqlite::memory:").unwrap();
        let pool = SqlxPool::new(manager, config).await.unwrap();
        sqlx::query("CREATE TABLE items (tag TEXT NOT NULL)")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO items (tag) VALUES ('a')")
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(count_with_acquire(&pool, "a").await.unwrap(), 1);

        let (held, line) = (pool.acquire().await.unwrap(), line!());
        let site = pool.holders()[0].location;
        assert!(
            site.file().ends_with("sqlite_dropin.rs") && site.line() == line,
            "recorded at {site}, not the caller's line {line}"
        );
        let timed_out = pool.acquire().await;
        assert!(
            matches!(timed_out, Err(sqlx::Error::PoolTimedOut)),
            "{timed_out:?}"
        );
        drop(held);
        pool.close().await;
        let closed = pool.acquire().await;
        assert!(matches!(closed, Err(sqlx::Error::PoolClosed)), "{closed:?}");
    })
    .await;
}

#[tokio::test]
async fn size_num_idle_and_is_closed_count_as_sqlx_does() {
    bounded(async {
        let (_table, pool) = single().await;
        assert_eq!((pool.size(), pool.num_idle()), (1, 1));
        let held = pool.acquire().await.unwrap();
        assert_eq!((pool.size(), pool.num_idle()), (1, 0));
        drop(held);
        assert_eq!((pool.size(), pool.num_idle()), (1, 1));
        assert!(!pool.is_closed());
        pool.close().await;
        assert!(pool.is_closed());
        assert_eq!((pool.size(), pool.num_idle()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn close_event_resolves_when_the_pool_closes() {
    bounded(async {
        // Nothing open, so no connection's close wakes it: only the close.
        let manager = SqlxManager::<SqliteConnection>::from_url("sqlite::memory:").unwrap();
        let pool = SqlxPool::new_lazy(manager, PoolConfig::builder().build().unwrap());
        let mut event = Box::pin(pool.close_event());
        assert!(futures::poll!(&mut event).is_pending());
        let waiter = tokio::spawn(event);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        pool.close().await;
        waiter.await.unwrap();
        // Asked for after the close, it is ready at once.
        assert!(futures::poll!(Box::pin(pool.close_event())).is_ready());

        // Dropping the last handle closes the pool too.
        let (_table, pool) = single().await;
        let event = pool.close_event();
        drop(pool);
        event.await;
    })
    .await;
}

#[tokio::test]
async fn a_checked_out_connection_is_an_acquire() {
    bounded(async {
        let (_table, pool) = single().await;
        let mut conn = pool.acquire().await.unwrap();
        insert_through(&mut conn, "kept", true).await.unwrap();
        insert_through(&mut conn, "dropped", false).await.unwrap();
        assert_eq!(count_through(&mut conn, "kept").await.unwrap(), 1);
        assert_eq!(count_through(&mut conn, "dropped").await.unwrap(), 0);
        // `&mut *conn` (the sqlx connection itself) is one as well.
        assert_eq!(count_through(&mut *conn, "kept").await.unwrap(), 1);
        drop(conn);
        assert_next_checkout_clean(&pool, ()).await;
        pool.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_transaction_is_an_acquire_whose_begin_is_a_savepoint() {
    bounded(async {
        let (table, pool) = single().await;
        let mut tx = pool.begin().await.unwrap();
        insert_through(&mut tx, "inner", true).await.unwrap();
        insert_through(&mut tx, "undone", false).await.unwrap();
        assert!(
            tx.is_in_transaction(),
            "the outer transaction is still open"
        );
        assert_eq!(count_through(&mut tx, "inner").await.unwrap(), 1);
        assert_eq!(count_through(&mut tx, "undone").await.unwrap(), 0);
        tx.rollback().await.unwrap();
        // The savepoint's commit was inside the outer transaction.
        assert_eq!(rows(&pool, table.name(), "inner").await, 0);
        let mut tx = pool.begin().await.unwrap();
        insert_through(&mut tx, "inner", true).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(rows(&pool, table.name(), "inner").await, 1);
        assert_next_checkout_clean(&pool, ()).await;
        pool.close().await;
    })
    .await;
}
