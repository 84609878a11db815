//! The pool as a drop-in for sqlx's `PgPool`: the drop-in suite
//! (`dropin_suite.rs`) on PostgreSQL, a `PgPool` program ported with the
//! documented lines (construction included), and the transaction patterns
//! of a ported service (an owned transaction in an enum, a `SKIP LOCKED`
//! worker handing its transaction back, a drop after a failed statement).

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, PgConnection};
use super::probes::{backend_pid as backend_id, server_in_transaction};
use crate::support::db::{bounded, sql, unique, Table};
use pool_core::PoolConfig;

type Conn = PgConnection;
type P = SqlxPool<PgConnection>;
type PgPool = P;
/// The backend's process id.
type Id = i32;

/// A server backend may close a connection whose `BEGIN` was cut off.
const KEEPS_CONNECTION_ON_CANCEL: bool = false;

async fn open(config: PoolConfig) -> P {
    let url = crate::support::db::url("DATABASE_URL");
    SqlxPool::new(SqlxManager::from_url(&url).unwrap(), config)
        .await
        .expect("PostgreSQL is reachable")
}

fn new_table(prefix: &str) -> Table {
    Table::postgres(prefix)
}

async fn create_table(pool: &P, table: &Table) {
    sqlx::query(sql(format!("CREATE TABLE {table} (tag TEXT NOT NULL)")))
        .execute(pool)
        .await
        .expect("creating the table");
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
async fn insert_through<'c, A>(conn: A, table: &str, tag: &str) -> Result<(), sqlx::Error>
where
    A: sqlx::Acquire<'c, Database = sqlx::Postgres>,
{
    let mut tx = conn.begin().await?;
    sqlx::query(sql(format!("INSERT INTO {table} (tag) VALUES ($1)")))
        .bind(tag)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// `pool.acquire().await?` in a function that returns `sqlx::Error`.
async fn count_with_acquire(pool: &PgPool, table: &str, tag: &str) -> Result<i64, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    sqlx::query_scalar(sql(format!("SELECT COUNT(*) FROM {table} WHERE tag = $1")))
        .bind(tag)
        .fetch_one(&mut *conn)
        .await
}

/// `pool.get()` kept, its error turned into `sqlx::Error`.
async fn count_with_get(pool: &PgPool, table: &str, tag: &str) -> Result<i64, sqlx::Error> {
    let mut conn = pool
        .get()
        .await
        .map_err(super::drivers::pool_sqlx::into_sqlx_error)?;
    sqlx::query_scalar(sql(format!("SELECT COUNT(*) FROM {table} WHERE tag = $1")))
        .bind(tag)
        .fetch_one(&mut *conn)
        .await
}

/// Where sqlx code names `sqlx::Transaction<'static, Postgres>`.
struct UnitOfWork {
    tx: Transaction<PgConnection>,
}

/// Where sqlx code takes `&mut sqlx::Transaction<'_, Postgres>`.
async fn insert_in(tx: &mut PgConnection, table: &str, tag: &str) -> Result<(), sqlx::Error> {
    sqlx::query(sql(format!("INSERT INTO {table} (tag) VALUES ($1)")))
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
        let (table, pool) = single().await;
        let table = table.name();
        let tag = unique("pg-porting");

        // `acquire()` and `?` into `sqlx::Error`.
        assert_eq!(count_with_acquire(&pool, table, &tag).await.unwrap(), 0);

        // `Acquire` with `&pool`: `&mut pool.acquire().await?`.
        insert_through(&mut pool.acquire().await.unwrap(), table, &tag)
            .await
            .unwrap();
        assert_eq!(rows(&pool, table, &tag).await, 1);

        // `Acquire` with `&mut tx`: unchanged (a savepoint in `tx`).
        let mut tx = pool.begin().await.unwrap();
        insert_through(&mut tx, table, &tag).await.unwrap();
        insert_in(&mut tx, table, &tag).await.unwrap();
        assert!(
            server_in_transaction(&mut tx).await,
            "still in the outer one"
        );
        tx.rollback().await.unwrap();
        assert_eq!(
            rows(&pool, table, &tag).await,
            1,
            "the savepoint went with it"
        );

        // `Transaction<'static, Postgres>` in a struct: `Transaction<PgConnection>`.
        let mut unit = owned(UnitOfWork {
            tx: pool.begin().await.unwrap(),
        });
        insert_in(&mut unit.tx, table, &tag).await.unwrap();
        unit.tx.commit().await.unwrap();
        assert_eq!(rows(&pool, table, &tag).await, 2);
        assert_eq!(count_with_get(&pool, table, &tag).await.unwrap(), 2);

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

/// Where a sqlx service keeps its transaction in an enum and moves it
/// through its functions by value.
enum Step {
    Open(Transaction<PgConnection>),
    Done,
}

async fn add_by_value(step: Step, table: &str, tag: String) -> Result<Step, sqlx::Error> {
    match step {
        Step::Open(mut tx) => {
            insert_in(&mut tx, table, &tag).await?;
            Ok(Step::Open(tx))
        }
        Step::Done => Ok(Step::Done),
    }
}

async fn finish(step: Step) -> Result<Step, sqlx::Error> {
    if let Step::Open(tx) = step {
        tx.commit().await?;
    }
    Ok(Step::Done)
}

/// An owned transaction kept in an enum, moved by value into a spawned task
/// and back: committed, its rows stay; dropped, they go.
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn an_owned_transaction_in_an_enum_moves_by_value() {
    bounded(async {
        let (table, pool) = single().await;
        let table = table.name();
        let tag = unique("pg-enum");
        let step = owned(Step::Open(pool.begin().await.unwrap()));
        let step = tokio::spawn(add_by_value(step, table, tag.clone()))
            .await
            .unwrap()
            .unwrap();
        let step = add_by_value(step, table, tag.clone()).await.unwrap();
        assert!(matches!(finish(step).await.unwrap(), Step::Done));
        assert_eq!(rows(&pool, table, &tag).await, 2);

        let mut step = Step::Open(pool.begin().await.unwrap());
        let id = match &mut step {
            Step::Open(tx) => backend_id(tx).await,
            Step::Done => unreachable!(),
        };
        let step = add_by_value(step, table, tag.clone()).await.unwrap();
        drop(step);
        assert_next_checkout_clean(&pool, id).await;
        assert_eq!(
            rows(&pool, table, &tag).await,
            2,
            "the dropped one left nothing"
        );
        pool.close().await;
    })
    .await;
}

/// A transaction whose statement failed (PostgreSQL then refuses every
/// statement until it ends) and that is dropped, not rolled back: the next
/// checkout gets the same backend outside any transaction, and its rows are
/// gone.
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn a_transaction_dropped_after_a_failed_statement_is_rolled_back_before_reuse() {
    bounded(async {
        let (table, pool) = single().await;
        let table = table.name();
        let tag = unique("pg-failed");
        let mut tx = pool.begin().await.unwrap();
        insert_in(&mut tx, table, &tag).await.unwrap();
        let id = backend_id(&mut tx).await;
        let failed = sqlx::query("SELECT * FROM no_such_table_here")
            .execute(&mut *tx)
            .await;
        assert!(
            matches!(failed, Err(sqlx::Error::Database(_))),
            "{failed:?}"
        );
        let refused = insert_in(&mut tx, table, &tag).await;
        assert!(
            matches!(refused, Err(sqlx::Error::Database(_))),
            "an aborted transaction refuses statements: {refused:?}"
        );
        drop(tx);
        assert_next_checkout_clean(&pool, id).await;
        assert_eq!(rows(&pool, table, &tag).await, 0);
        pool.close().await;
    })
    .await;
}

/// A queue worker as sqlx services write it: it claims the next job with
/// `FOR UPDATE SKIP LOCKED` and hands the transaction that holds the claim
/// to its caller, who finishes the job in it. `None` when no job is free
/// (the transaction is dropped, and rolled back).
async fn claim(
    pool: &PgPool,
    table: &str,
    queue: &str,
) -> Result<Option<(Transaction<PgConnection>, String)>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let job: Option<String> = sqlx::query_scalar(sql(format!(
        "SELECT tag FROM {table} WHERE left(tag, length($1)) = $1 \
         ORDER BY tag LIMIT 1 FOR UPDATE SKIP LOCKED",
    )))
    .bind(queue)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(job.map(|job| (tx, job)))
}

/// The jobs left in `queue`.
async fn rows_from(pool: &PgPool, table: &str, queue: &str) -> i64 {
    sqlx::query_scalar(sql(format!(
        "SELECT COUNT(*) FROM {table} WHERE left(tag, length($1)) = $1",
    )))
    .bind(queue)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn complete(
    mut tx: Transaction<PgConnection>,
    table: &str,
    job: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(sql(format!("DELETE FROM {table} WHERE tag = $1")))
        .bind(job)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// Two workers claim two different jobs (the first one's lock is skipped),
/// a claim dropped unfinished frees its job for the next worker on the same
/// connection, and every job is done once.
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn a_skip_locked_worker_returns_its_transaction_to_the_caller() {
    bounded(async {
        let table = new_table("pool_core_sqlx_queue");
        let queue = unique("pg-queue");
        let config = crate::support::db::named_config("pg-queue", 2, Duration::from_secs(10));
        let pool = open(config).await;
        create_table(&pool, &table).await;
        let table = table.name();
        for job in ["a", "b"] {
            insert(
                &mut pool.acquire().await.unwrap(),
                table,
                &format!("{queue}-{job}"),
            )
            .await;
        }

        let (first, first_job) = claim(&pool, table, &queue)
            .await
            .unwrap()
            .expect("a free job");
        let (mut second, second_job) = claim(&pool, table, &queue)
            .await
            .unwrap()
            .expect("a free job");
        assert_eq!(
            (first_job.as_str(), second_job.as_str()),
            (format!("{queue}-a").as_str(), format!("{queue}-b").as_str()),
            "the second worker skipped the first one's job"
        );
        assert!(server_in_transaction(&mut second).await);
        complete(first, table, &first_job).await.unwrap();
        // The worker gave up. Its claim is released by the rollback that
        // runs before its connection is handed out again (as sqlx's pool,
        // in the background): with both connections in hand, that rollback
        // is done.
        drop(second);
        let both = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
        drop(both);

        let (again, job) = claim(&pool, table, &queue)
            .await
            .unwrap()
            .expect("the freed job");
        assert_eq!(job, second_job);
        complete(again, table, &job).await.unwrap();
        assert!(
            claim(&pool, table, &queue).await.unwrap().is_none(),
            "every job done"
        );
        assert_eq!(rows_from(&pool, table, &queue).await, 0);
        assert_eq!(pool.state().total, 2, "within the bound");
        pool.close().await;
    })
    .await;
}

/// The rows of MIGRATION.md for `PgPool::connect_with`, `connect` and
/// `connect_lazy`, each with `PoolConfig::default()`, as written there.
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn pgpool_connect_with_connect_and_connect_lazy_port_with_the_default_config() {
    bounded(async {
        let url = crate::support::db::url("DATABASE_URL");
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let pools = [
            // PgPool::connect_with(options)
            SqlxPool::new(
                SqlxManager::<PgConnection>::new(options.clone()),
                PoolConfig::default(),
            )
            .await
            .unwrap(),
            // PgPool::connect(url)
            SqlxPool::new(
                SqlxManager::<PgConnection>::from_url(&url).unwrap(),
                PoolConfig::default(),
            )
            .await
            .unwrap(),
            // PgPool::connect_lazy(url)
            SqlxPool::new_lazy(
                SqlxManager::<PgConnection>::from_url(&url).unwrap(),
                PoolConfig::default(),
            ),
            // PgPool::connect_lazy_with(options)
            SqlxPool::new_lazy(
                SqlxManager::<PgConnection>::new(options),
                PoolConfig::default(),
            ),
        ];
        let opened: Vec<u32> = pools.iter().map(|pool| pool.state().total).collect();
        assert_eq!(opened, [1, 1, 0, 0], "connect opens one, connect_lazy none");
        for pool in &pools {
            let one: i32 = sqlx::query_scalar("SELECT 1")
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!(one, 1);
            assert_eq!(pool.config().max_size(), 10, "sqlx's default size");
            pool.close().await;
        }
    })
    .await;
}
