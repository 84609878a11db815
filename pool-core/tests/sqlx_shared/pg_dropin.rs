//! The pool as a drop-in for sqlx's `PgPool`: the drop-in suite
//! (`dropin_suite.rs`) on PostgreSQL, and a `PgPool` program ported with
//! the documented lines.

use std::time::Duration;

use super::drivers::pool_sqlx::{SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, PgConnection};
use super::probes::{backend_pid as backend_id, server_in_transaction};
use crate::support::db::{bounded, unique};
use pool_core::{Pool, PoolConfig};

type Conn = PgConnection;
type P = Pool<SqlxManager<PgConnection>>;
type PgPool = P;
/// The backend's process id.
type Id = i32;

/// A server backend may close a connection whose `BEGIN` was cut off.
const KEEPS_CONNECTION_ON_CANCEL: bool = false;

async fn open(config: PoolConfig) -> P {
    let url = crate::support::db::url("DATABASE_URL");
    Pool::new(SqlxManager::from_url(&url).unwrap(), config)
        .await
        .expect("PostgreSQL is reachable")
}

async fn create_table(pool: &P) {
    let created =
        sqlx::query("CREATE TABLE IF NOT EXISTS pool_core_sqlx_dropin (tag TEXT NOT NULL)")
            .execute(pool)
            .await;
    match created {
        Ok(_) => {}
        // Two tests creating it at once: one wins, the other sees the type.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {}
        Err(e) => panic!("creating the table: {e}"),
    }
}

async fn assert_same_backend(conn: &mut PgConnection, pid: Id) {
    assert_eq!(backend_id(conn).await, pid, "the same backend");
}

dropin_suite! {
    #[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
    name: "pg-dropin",
    table: "pool_core_sqlx_dropin",
    placeholders: ("$1", "$2"),
    int: i32,
    select_none: "SELECT 1 WHERE false",
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
        let tag = unique("pg-porting");

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
