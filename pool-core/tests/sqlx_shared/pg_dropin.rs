//! The pool as a drop-in for sqlx's `PgPool`: `&pool` as an executor (one
//! checkout per query) and `pool.begin()` with commit, rollback and drop.

use std::time::Duration;

use super::drivers::pool_sqlx::{SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, Executor, PgConnection};
use crate::common::{bounded, unique_tag};
use pool_core::{Pool, PoolConfig};

type PgPool = Pool<SqlxManager<PgConnection>>;

/// A pool of one connection, so every checkout gets the same backend, with
/// the table the tests write to.
async fn single() -> PgPool {
    let url = super::require::url("DATABASE_URL");
    let config = PoolConfig::builder()
        .name("pg-dropin")
        .max_size(1)
        .acquire_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let pool = Pool::new(SqlxManager::from_url(&url).unwrap(), config)
        .await
        .expect("PostgreSQL is reachable");
    let created =
        sqlx::query("CREATE TABLE IF NOT EXISTS pool_core_sqlx_dropin (tag TEXT NOT NULL)")
            .execute(&pool)
            .await;
    match created {
        Ok(_) => {}
        // Two tests creating it at once: one wins, the other sees the type.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {}
        Err(e) => panic!("creating the table: {e}"),
    }
    pool
}

async fn rows(pool: &PgPool, tag: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM pool_core_sqlx_dropin WHERE tag = $1")
        .bind(tag)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn insert(conn: &mut PgConnection, tag: &str) {
    sqlx::query("INSERT INTO pool_core_sqlx_dropin (tag) VALUES ($1)")
        .bind(tag)
        .execute(conn)
        .await
        .unwrap();
}

async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Whether the server has a transaction block open on `conn`:
/// `txid_current()` gives the current transaction an id, and only inside a
/// block does the next statement still see it.
async fn server_in_transaction(conn: &mut PgConnection) -> bool {
    conn.execute("SELECT txid_current()").await.unwrap();
    let xid: Option<i64> = sqlx::query_scalar("SELECT txid_current_if_assigned()")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    xid.is_some()
}

/// The next checkout gets the backend `pid` outside any transaction.
async fn assert_next_checkout_clean(pool: &PgPool, pid: i32) {
    let mut conn = pool.get().await.unwrap();
    assert_eq!(backend_pid(&mut conn).await, pid, "the same backend");
    assert!(!conn.is_in_transaction());
    assert!(!server_in_transaction(&mut conn).await);
}

fn owned<T: Send + 'static>(value: T) -> T {
    value
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn pool_is_an_executor_with_one_checkout_per_query() {
    bounded(async {
        let pool = single().await;
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(one, 1);
        let tag = unique_tag("pg-executor");
        let done = sqlx::query("INSERT INTO pool_core_sqlx_dropin (tag) VALUES ($1), ($1)")
            .bind(&tag)
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 2);
        let all = sqlx::query("SELECT tag FROM pool_core_sqlx_dropin WHERE tag = $1")
            .bind(&tag)
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        let none: Option<i32> = sqlx::query_scalar("SELECT 1 WHERE false")
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

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn begin_then_commit_keeps_the_rows() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("pg-commit");
        let mut tx: Transaction<PgConnection> = owned(pool.begin().await.unwrap());
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

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn begin_then_rollback_drops_the_rows() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("pg-rollback");
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

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn transaction_dropped_in_another_task_is_rolled_back_before_reuse() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("pg-drop");
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

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
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

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn checkout_timeout_through_the_pool_is_pool_timed_out() {
    bounded(async {
        let url = super::require::url("DATABASE_URL");
        let config = PoolConfig::builder()
            .max_size(1)
            .acquire_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let pool = Pool::new(SqlxManager::<PgConnection>::from_url(&url).unwrap(), config)
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
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
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

/// A function generic over `sqlx::Acquire`, as sqlx code writes it: a
/// transaction of its own on whatever it is given.
async fn insert_through<'c, A>(conn: A, tag: &str) -> Result<(), sqlx::Error>
where
    A: sqlx::Acquire<'c, Database = sqlx::Postgres>,
{
    let mut tx = conn.begin().await?;
    sqlx::query("INSERT INTO pool_core_sqlx_dropin (tag) VALUES ($1)")
        .bind(tag)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// `pool.acquire().await?` in a function that returns `sqlx::Error`.
async fn count_with_acquire(pool: &PgPool, tag: &str) -> Result<i64, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    sqlx::query_scalar("SELECT COUNT(*) FROM pool_core_sqlx_dropin WHERE tag = $1")
        .bind(tag)
        .fetch_one(&mut *conn)
        .await
}

/// `pool.get()` kept, its error turned into `sqlx::Error`.
async fn count_with_get(pool: &PgPool, tag: &str) -> Result<i64, sqlx::Error> {
    let mut conn = pool
        .get()
        .await
        .map_err(super::drivers::pool_sqlx::into_sqlx_error)?;
    sqlx::query_scalar("SELECT COUNT(*) FROM pool_core_sqlx_dropin WHERE tag = $1")
        .bind(tag)
        .fetch_one(&mut *conn)
        .await
}

/// Where sqlx code names `sqlx::Transaction<'static, Postgres>`.
struct UnitOfWork {
    tx: Transaction<PgConnection>,
}

/// Where sqlx code takes `&mut sqlx::Transaction<'_, Postgres>`.
async fn insert_in(tx: &mut PgConnection, tag: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO pool_core_sqlx_dropin (tag) VALUES ($1)")
        .bind(tag)
        .execute(tx)
        .await?;
    Ok(())
}

/// Each row of MIGRATION.md's porting table, with its replacement line.
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn a_pgpool_program_ports_with_the_documented_lines() {
    bounded(async {
        let pool = single().await;
        let tag = unique_tag("pg-porting");

        // `acquire()` and `?` into `sqlx::Error`.
        assert_eq!(count_with_acquire(&pool, &tag).await.unwrap(), 0);

        // `Acquire` with `&pool`: `&mut pool.acquire().await?`.
        insert_through(&mut pool.acquire().await.unwrap(), &tag)
            .await
            .unwrap();
        assert_eq!(rows(&pool, &tag).await, 1);

        // `Acquire` with `&mut tx`: unchanged (a savepoint in `tx`).
        let mut tx = pool.begin().await.unwrap();
        insert_through(&mut tx, &tag).await.unwrap();
        insert_in(&mut tx, &tag).await.unwrap();
        assert!(
            server_in_transaction(&mut tx).await,
            "still in the outer one"
        );
        tx.rollback().await.unwrap();
        assert_eq!(rows(&pool, &tag).await, 1, "the savepoint went with it");

        // `Transaction<'static, Postgres>` in a struct: `Transaction<PgConnection>`.
        let mut unit = owned(UnitOfWork {
            tx: pool.begin().await.unwrap(),
        });
        insert_in(&mut unit.tx, &tag).await.unwrap();
        unit.tx.commit().await.unwrap();
        assert_eq!(rows(&pool, &tag).await, 2);
        assert_eq!(count_with_get(&pool, &tag).await.unwrap(), 2);

        // `size()` and `num_idle()`.
        assert_eq!((pool.size(), pool.num_idle()), (1, 1));
        let held = pool.acquire().await.unwrap();
        assert_eq!((pool.size(), pool.num_idle()), (1, 0));
        drop(held);
        pool.close().await;
        assert!(pool.is_closed());
        assert!(matches!(pool.acquire().await, Err(sqlx::Error::PoolClosed)));
    })
    .await;
}
