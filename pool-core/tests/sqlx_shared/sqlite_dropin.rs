//! The pool as a drop-in for sqlx's `SqlitePool`: `&pool` as an executor
//! (one checkout per query) and `pool.begin()` with commit, rollback and
//! drop, on one in-memory database (`max_size(1)`: the table the tests
//! create exists only on that one connection, so finding it proves the next
//! checkout got the same connection back).

use std::time::Duration;

use super::drivers::pool_sqlx::{SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, Executor, SqliteConnection};
use crate::common::bounded;
use pool_core::{Pool, PoolConfig};

type SqlitePool = Pool<SqlxManager<SqliteConnection>>;

async fn single() -> SqlitePool {
    let config = PoolConfig::builder()
        .name("sqlite-dropin")
        .max_size(1)
        .acquire_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let manager = SqlxManager::<SqliteConnection>::from_url("sqlite::memory:").unwrap();
    let pool = Pool::new(manager, config).await.unwrap();
    sqlx::query("CREATE TABLE items (tag TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

async fn rows(pool: &SqlitePool, tag: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM items WHERE tag = ?")
        .bind(tag)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn insert(conn: &mut SqliteConnection, tag: &str) {
    sqlx::query("INSERT INTO items (tag) VALUES (?)")
        .bind(tag)
        .execute(conn)
        .await
        .unwrap();
}

/// SQLite refuses a `BEGIN` inside a transaction.
async fn in_transaction(conn: &mut SqliteConnection) -> bool {
    match conn.execute(sqlx::raw_sql("BEGIN")).await {
        Ok(_) => {
            conn.execute(sqlx::raw_sql("ROLLBACK")).await.unwrap();
            false
        }
        Err(_) => true,
    }
}

/// The next checkout gets the same connection (its table is there) outside
/// any transaction.
async fn assert_next_checkout_clean(pool: &SqlitePool) {
    let mut conn = pool.get().await.unwrap();
    let tables: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'items'")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(tables, 1, "the same in-memory database");
    assert!(!conn.is_in_transaction());
    assert!(!in_transaction(&mut conn).await);
}

fn owned<T: Send + 'static>(value: T) -> T {
    value
}

#[tokio::test]
async fn pool_is_an_executor_with_one_checkout_per_query() {
    bounded(async {
        let pool = single().await;
        let one: i64 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(one, 1);
        let done = sqlx::query("INSERT INTO items (tag) VALUES ('a'), ('a')")
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 2);
        let all = sqlx::query("SELECT tag FROM items WHERE tag = 'a'")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        let none: Option<i64> = sqlx::query_scalar("SELECT 1 WHERE 0")
            .fetch_optional(&pool)
            .await
            .unwrap();
        assert_eq!(none, None);
        assert_eq!(pool.state().idle, 1);
        assert_eq!(pool.state().in_use, 0);
        let failed = sqlx::query("SELECT * FROM no_such_table_here")
            .execute(&pool)
            .await;
        assert!(
            matches!(failed, Err(sqlx::Error::Database(_))),
            "{failed:?}"
        );
        assert_eq!(rows(&pool, "a").await, 2);
        pool.close().await;
    })
    .await;
}

#[tokio::test]
async fn begin_then_commit_keeps_the_rows() {
    bounded(async {
        let pool = single().await;
        let mut tx: Transaction<SqliteConnection> = owned(pool.begin().await.unwrap());
        assert!(tx.is_in_transaction());
        insert(&mut tx, "commit").await;
        tx.commit().await.unwrap();
        assert_eq!(rows(&pool, "commit").await, 1);
        assert_next_checkout_clean(&pool).await;
        pool.close().await;
    })
    .await;
}

#[tokio::test]
async fn begin_records_its_caller_as_the_holder_site() {
    bounded(async {
        let pool = single().await;
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

#[tokio::test]
async fn begin_then_rollback_drops_the_rows() {
    bounded(async {
        let pool = single().await;
        let mut tx = pool.begin().await.unwrap();
        insert(&mut tx, "rollback").await;
        tx.rollback().await.unwrap();
        assert_eq!(rows(&pool, "rollback").await, 0);
        assert_next_checkout_clean(&pool).await;
        pool.close().await;
    })
    .await;
}

#[tokio::test]
async fn transaction_dropped_in_another_task_is_rolled_back_before_reuse() {
    bounded(async {
        let pool = single().await;
        let tx = pool.begin().await.unwrap();
        tokio::spawn(async move {
            let mut tx = tx;
            insert(&mut tx, "dropped").await;
            drop(tx);
        })
        .await
        .unwrap();
        assert_next_checkout_clean(&pool).await;
        assert_eq!(rows(&pool, "dropped").await, 0);
        pool.close().await;
    })
    .await;
}

/// Cancelled at any point, `pool.begin()` leaves no transaction, and on
/// SQLite keeps the connection (closing it would lose the database).
#[tokio::test]
async fn begin_cancelled_at_any_point_leaves_no_transaction() {
    bounded(async {
        let pool = single().await;
        for polls in 0..6 {
            let mut begin = Box::pin(pool.begin());
            for _ in 0..polls {
                if futures::poll!(&mut begin).is_ready() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            drop(begin);
            assert_next_checkout_clean(&pool).await;
        }
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
        let config = PoolConfig::builder()
            .name("sqlite-acquire")
            .max_size(1)
            .acquire_timeout(Duration::from_millis(50))
            .build()
            .unwrap();
        let manager = SqlxManager::<SqliteConnection>::from_url("sqlite::memory:").unwrap();
        let pool = Pool::new(manager, config).await.unwrap();
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
        let pool = single().await;
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
        let pool = Pool::new_lazy(manager, PoolConfig::builder().build().unwrap());
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
        let pool = single().await;
        let event = pool.close_event();
        drop(pool);
        event.await;
    })
    .await;
}

#[tokio::test]
async fn a_checked_out_connection_is_an_acquire() {
    bounded(async {
        let pool = single().await;
        let mut conn = pool.acquire().await.unwrap();
        insert_through(&mut conn, "kept", true).await.unwrap();
        insert_through(&mut conn, "dropped", false).await.unwrap();
        assert_eq!(count_through(&mut conn, "kept").await.unwrap(), 1);
        assert_eq!(count_through(&mut conn, "dropped").await.unwrap(), 0);
        // `&mut *conn` (the sqlx connection itself) is one as well.
        assert_eq!(count_through(&mut *conn, "kept").await.unwrap(), 1);
        drop(conn);
        assert_next_checkout_clean(&pool).await;
        pool.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_transaction_is_an_acquire_whose_begin_is_a_savepoint() {
    bounded(async {
        let pool = single().await;
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
        assert_eq!(rows(&pool, "inner").await, 0);
        let mut tx = pool.begin().await.unwrap();
        insert_through(&mut tx, "inner", true).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(rows(&pool, "inner").await, 1);
        assert_next_checkout_clean(&pool).await;
        pool.close().await;
    })
    .await;
}
