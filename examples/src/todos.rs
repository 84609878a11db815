//! A to-do list on a pool of sqlx PostgreSQL connections, written the way a
//! `sqlx::PgPool` program is: migrations run at start, plain queries
//! through `&pool`, a transaction from `pool.begin()`, one function generic
//! over `sqlx::Executor` and one over `sqlx::Acquire`. MIGRATION.md shows
//! every line that differs from the `PgPool` version (four).
//!
//! Everything lives in a PostgreSQL schema of its own (the connections'
//! `search_path`), the migrations' bookkeeping table included, so
//! [`drop_schema`] removes every trace.

use std::path::Path;
use std::time::Duration;

use pool_core::PoolConfig;
use pool_sqlx::{Pool, SqlxManager};
use sqlx::migrate::Migrator;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Acquire, Executor, PgConnection, Postgres};

/// The pool, under the name a `PgPool` program uses.
pub type PgPool = Pool<PgConnection>;

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Todo {
    /// Its number, given by the database.
    pub id: i64,
    /// What to do.
    pub description: String,
    /// Whether it is done.
    pub done: bool,
}

/// Where the migrations are (`examples/migrations/todos`).
pub fn migrations_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/todos"))
}

/// Whether `name` is a schema name this example will use: ASCII letters,
/// digits and `_`, not starting with a digit, at most 63 bytes (it goes
/// into SQL text and into the connections' `search_path`).
pub fn valid_schema(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Opens the pool on `url` with every connection's `search_path` set to
/// `schema`, creates the schema if it is missing, and runs the migrations.
///
/// # Errors
///
/// An invalid schema name, a malformed URL, an unreachable server, or a
/// migration's error.
pub async fn connect(url: &str, schema: &str) -> anyhow::Result<PgPool> {
    anyhow::ensure!(
        valid_schema(schema),
        "{schema:?} is not a plain schema name"
    );
    let options: PgConnectOptions = url.parse()?;
    let options = options.options([("search_path", schema)]);
    // PgPoolOptions::new().max_connections(5).acquire_timeout(..).connect_with(options)
    let config = PoolConfig::builder()
        .name("todos")
        .max_size(5)
        .acquire_timeout(Duration::from_secs(5))
        .build()?;
    let pool = Pool::new(SqlxManager::new(options), config).await?;

    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS {schema}"
    )))
    .execute(&pool)
    .await?;
    migrate(&pool).await?;
    Ok(pool)
}

/// Runs the migrations not run yet, in order; running them again does
/// nothing.
///
/// # Errors
///
/// Checking out a connection, reading the migrations, or one of them
/// failing.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    let migrator = Migrator::new(migrations_dir()).await?;
    // PgPool: migrator.run(pool)
    migrator.run(&mut pool.acquire().await?).await?;
    Ok(())
}

/// Adds an item; returns its id.
///
/// # Errors
///
/// The query's error (or the checkout's, as `sqlx::Error`).
pub async fn add(pool: &PgPool, description: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("INSERT INTO todos (description) VALUES ($1) RETURNING id")
        .bind(description)
        .fetch_one(pool)
        .await
}

/// Adds several items in one transaction (all or none), through whatever
/// can begin one: a connection, or a transaction (a savepoint in it).
///
/// # Errors
///
/// The first insert's error; nothing is added then.
pub async fn add_all<'c, A>(conn: A, descriptions: &[&str]) -> Result<Vec<i64>, sqlx::Error>
where
    A: Acquire<'c, Database = Postgres>,
{
    let mut tx = conn.begin().await?;
    let mut ids = Vec::with_capacity(descriptions.len());
    for description in descriptions {
        let id = sqlx::query_scalar("INSERT INTO todos (description) VALUES ($1) RETURNING id")
            .bind(description)
            .fetch_one(&mut *tx)
            .await?;
        ids.push(id);
    }
    tx.commit().await?;
    Ok(ids)
}

/// Marks an item done; `false` when there is no such item.
///
/// # Errors
///
/// The query's error.
pub async fn complete(pool: &PgPool, id: i64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE todos SET done = TRUE WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Every item, in the order they were added.
///
/// # Errors
///
/// The query's error.
pub async fn list(pool: &PgPool) -> Result<Vec<Todo>, sqlx::Error> {
    let rows: Vec<(i64, String, bool)> =
        sqlx::query_as("SELECT id, description, done FROM todos ORDER BY id")
            .fetch_all(pool)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(id, description, done)| Todo {
            id,
            description,
            done,
        })
        .collect())
}

/// The items not done yet, through any executor: `&pool`, `&mut *conn`,
/// `&mut *tx`.
///
/// # Errors
///
/// The query's error.
pub async fn count_open<'e, E>(executor: E) -> Result<i64, sqlx::Error>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar("SELECT COUNT(*) FROM todos WHERE NOT done")
        .fetch_one(executor)
        .await
}

/// Moves the items that are done to the archive, in one transaction;
/// returns how many moved.
///
/// # Errors
///
/// A query's error; nothing moves then (the transaction is rolled back
/// when dropped).
pub async fn archive_done(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO todos_archive (id, description) SELECT id, description FROM todos WHERE done",
    )
    .execute(&mut *tx)
    .await?;
    let moved = sqlx::query("DELETE FROM todos WHERE done")
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    Ok(moved)
}

/// The archived items' descriptions, oldest id first.
///
/// # Errors
///
/// The query's error.
pub async fn archived(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT description FROM todos_archive ORDER BY id")
        .fetch_all(pool)
        .await
}

/// Drops the schema with everything in it (the lists and the migrations'
/// table).
///
/// # Errors
///
/// An invalid schema name, or the statement's error.
pub async fn drop_schema(pool: &PgPool, schema: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        valid_schema(schema),
        "{schema:?} is not a plain schema name"
    );
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(pool)
    .await?;
    Ok(())
}

/// The whole program once, as the example runs it without arguments:
/// migrate, add, complete, list, archive, then drop the schema. Writes what
/// it does to `out`, one line a step.
///
/// # Errors
///
/// Any step's error; the schema is dropped even then, when the pool could
/// be opened.
pub async fn demo(url: &str, schema: &str, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    let pool = connect(url, schema).await?;
    let result = demo_steps(&pool, out).await;
    let dropped = drop_schema(&pool, schema).await;
    pool.close().await;
    result?;
    dropped?;
    writeln!(out, "dropped schema {schema}")?;
    Ok(())
}

async fn demo_steps(pool: &PgPool, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    let milk = add(pool, "buy milk").await?;
    let ids = add_all(
        &mut pool.acquire().await?, // PgPool: add_all(pool, ..)
        &["write the report", "water the plants"],
    )
    .await?;
    writeln!(out, "added {milk} and {ids:?}")?;
    anyhow::ensure!(complete(pool, milk).await?, "item {milk} is there");
    anyhow::ensure!(!complete(pool, -1).await?, "item -1 is not");
    for todo in list(pool).await? {
        let mark = if todo.done { "x" } else { " " };
        writeln!(out, "- [{mark}] {}: {}", todo.id, todo.description)?;
    }
    writeln!(out, "{} open", count_open(pool).await?)?;
    writeln!(out, "archived {}", archive_done(pool).await?)?;
    writeln!(out, "archive: {:?}", archived(pool).await?)?;
    Ok(())
}
