//! The pool as a drop-in for sqlx's `SqlitePool`: `&pool` as an executor
//! (one checkout per query) and `pool.begin()` with commit, rollback and
//! drop, on one in-memory database (`max_size(1)`: the table the tests
//! create exists only on that one connection, so finding it proves the next
//! checkout got the same connection back).

use std::time::Duration;

use crate::common::bounded;
use crate::drivers::pool_sqlx::{SqlxManager, Transaction};
use crate::drivers::sqlx;
use crate::drivers::sqlx::{Connection, Executor, SqliteConnection};
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
