//! The pool as a drop-in for sqlx's `MySqlPool`: `&pool` as an executor (one
//! checkout per query) and `pool.begin()` with commit, rollback and drop.

use std::time::Duration;

use super::drivers::pool_sqlx::{SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, MySqlConnection};
use crate::common::{bounded, unique_tag};
use pool_core::{Pool, PoolConfig};

type MyPool = Pool<SqlxManager<MySqlConnection>>;

/// A pool of one connection, so every checkout gets the same backend, with
/// the table the tests write to.
async fn single() -> MyPool {
    let url = super::require::url("MYSQL_URL");
    let config = PoolConfig::builder()
        .name("mysql-dropin")
        .max_size(1)
        .acquire_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let pool = Pool::new(SqlxManager::from_url(&url).unwrap(), config)
        .await
        .expect("MariaDB is reachable");
    sqlx::query("CREATE TABLE IF NOT EXISTS pool_core_sqlx_dropin (tag VARCHAR(128) NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

async fn rows(pool: &MyPool, tag: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM pool_core_sqlx_dropin WHERE tag = ?")
        .bind(tag)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn insert(conn: &mut MySqlConnection, tag: &str) {
    sqlx::query("INSERT INTO pool_core_sqlx_dropin (tag) VALUES (?)")
        .bind(tag)
        .execute(conn)
        .await
        .unwrap();
}

async fn backend_pid(conn: &mut MySqlConnection) -> u64 {
    sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Whether the server has a transaction open on `conn`.
async fn server_in_transaction(conn: &mut MySqlConnection) -> bool {
    let flag: u64 = sqlx::query_scalar("SELECT @@in_transaction")
        .fetch_one(conn)
        .await
        .unwrap();
    flag != 0
}

/// The next checkout gets the backend `pid` outside any transaction.
async fn assert_next_checkout_clean(pool: &MyPool, pid: u64) {
    let mut conn = pool.get().await.unwrap();
    assert_eq!(backend_pid(&mut conn).await, pid, "the same backend");
    assert!(!conn.is_in_transaction());
    assert!(!server_in_transaction(&mut conn).await);
}

fn owned<T: Send + 'static>(value: T) -> T {
    value
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn pool_is_an_executor_with_one_checkout_per_query() {
    bounded(async {
        let pool = single().await;
        let one: i64 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(one, 1);
        let tag = unique_tag("mysql-executor");
        let done = sqlx::query("INSERT INTO pool_core_sqlx_dropin (tag) VALUES (?), (?)")
            .bind(&tag)
            .bind(&tag)
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 2);
        let all = sqlx::query("SELECT tag FROM pool_core_sqlx_dropin WHERE tag = ?")
            .bind(&tag)
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        let none: Option<i64> = sqlx::query_scalar("SELECT 1 FROM DUAL WHERE false")
            .fetch_optional(&pool)
            .await
            .unwrap();
        assert_eq!(none, None);
        // Each query gave its connection back: with one connection, the
        // next query would otherwise have timed out.
        assert_eq!(pool.state().idle, 1);
        assert_eq!(pool.state().in_use, 0);
        let failed = sqlx::query("SELECT * FROM no_such_table_here")
            .execute(&pool)
            .await;
        assert!(
            matches!(failed, Err(sqlx::Error::Database(_))),
            "{failed:?}"
        );
        assert_eq!(rows(&pool, &tag).await, 2);
        pool.close().await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn begin_then_commit_keeps_the_rows() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("mysql-commit");
        let mut tx: Transaction<MySqlConnection> = owned(pool.begin().await.unwrap());
        assert!(tx.is_in_transaction());
        insert(&mut tx, &tag).await;
        assert!(server_in_transaction(&mut tx).await);
        let pid = backend_pid(&mut tx).await;
        tx.commit().await.unwrap();
        assert_eq!(rows(&pool, &tag).await, 1);
        assert_next_checkout_clean(&pool, pid).await;
        pool.close().await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn begin_then_rollback_drops_the_rows() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("mysql-rollback");
        let mut tx = pool.begin().await.unwrap();
        insert(&mut tx, &tag).await;
        let pid = backend_pid(&mut tx).await;
        tx.rollback().await.unwrap();
        assert_eq!(rows(&pool, &tag).await, 0);
        assert_next_checkout_clean(&pool, pid).await;
        pool.close().await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn transaction_dropped_in_another_task_is_rolled_back_before_reuse() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("mysql-drop");
        let tx = pool.begin().await.unwrap();
        let task_tag = tag.clone();
        let pid = tokio::spawn(async move {
            let mut tx = tx;
            insert(&mut tx, &task_tag).await;
            let pid = backend_pid(&mut tx).await;
            drop(tx);
            pid
        })
        .await
        .unwrap();
        assert_next_checkout_clean(&pool, pid).await;
        assert_eq!(rows(&pool, &tag).await, 0);
        pool.close().await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn begin_on_a_closed_pool_is_pool_closed() {
    bounded(async {
        let pool = single().await;
        pool.close().await;
        assert!(matches!(pool.begin().await, Err(sqlx::Error::PoolClosed)));
        let err = sqlx::query("SELECT 1").execute(&pool).await.unwrap_err();
        assert!(matches!(err, sqlx::Error::PoolClosed), "{err:?}");
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn checkout_timeout_through_the_pool_is_pool_timed_out() {
    bounded(async {
        let url = super::require::url("MYSQL_URL");
        let config = PoolConfig::builder()
            .max_size(1)
            .acquire_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let pool = Pool::new(
            SqlxManager::<MySqlConnection>::from_url(&url).unwrap(),
            config,
        )
        .await
        .unwrap();
        let held = pool.begin().await.unwrap();
        let err = sqlx::query("SELECT 1").execute(&pool).await.unwrap_err();
        assert!(matches!(err, sqlx::Error::PoolTimedOut), "{err:?}");
        assert!(matches!(pool.begin().await, Err(sqlx::Error::PoolTimedOut)));
        drop(held);
        pool.close().await;
    })
    .await;
}

/// `pool.begin()` dropped after 0 to 5 polls (with the reply given time to
/// arrive in between): whether it was waiting, had its `BEGIN` in flight or
/// had it answered, the next checkout is outside any transaction.
#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
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
            let mut conn = pool.get().await.unwrap();
            assert!(!conn.is_in_transaction(), "after {polls} polls");
            assert!(
                !server_in_transaction(&mut conn).await,
                "after {polls} polls"
            );
        }
        pool.close().await;
    })
    .await;
}
