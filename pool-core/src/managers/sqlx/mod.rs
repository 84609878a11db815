//! Pools sqlx 0.9 connections: [`SqlxManager<C>`] for `sqlx::PgConnection`,
//! `sqlx::MySqlConnection` and `sqlx::SqliteConnection`, each behind its
//! cargo feature (`sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite`). For sqlx
//! 0.8 the same manager is [`managers::sqlx08`](crate::managers) under the
//! `sqlx08-*` features.
//!
//! # A drop-in for sqlx's pool
//!
//! - `&Pool<SqlxManager<C>>` is a sqlx `Executor`: `query(..).fetch_one(&pool)`
//!   and `.execute(&pool)` check a connection out for that one query.
//! - [`Pool::begin`](crate::Pool::begin) returns an owned [`Transaction<C>`]
//!   (`Send + 'static`, derefs to `C`, `commit()`, `rollback()`, rolled back
//!   when dropped).
//! - `pool.acquire().await?` (sqlx's name and error; `pool.get()` is the
//!   same checkout with the pool's own error) gives a guard that derefs to
//!   `C`: `&mut *conn` is an executor, and `&mut conn` (like `&mut *conn`)
//!   is a `sqlx::Acquire`, as sqlx's `PoolConnection` is. So is `&mut tx`
//!   for a [`Transaction`] (its `begin()` opens a savepoint).
//! - `pool.size()`, `pool.num_idle()`, `pool.is_closed()`, `pool.close()`
//!   and `pool.close_event()` as on sqlx's pool.
//! - `&Pool` is not an `Acquire`: `Acquire::begin` must return sqlx's
//!   `Transaction<'c, DB>`, which can only borrow a connection for `'c` or
//!   own sqlx's own pooled connection, and a connection checked out of this
//!   pool inside `begin` cannot be lent past it. Pass `&mut
//!   pool.acquire().await?` where sqlx code takes an `Acquire` (for
//!   example `Migrator::run`), and name [`Transaction<C>`] where it names
//!   `sqlx::Transaction<'static, DB>`.
//!
//! # How a returned connection is cleaned
//!
//! sqlx keeps, per connection, the depth of the transactions begun through
//! it and a write buffer where a dropped `sqlx::Transaction` queues its
//! `ROLLBACK`. Both are readable without any I/O (`Connection::is_in_transaction`
//! and sqlx's hidden `should_flush`), so in the default
//! [`ResetMode::Tracked`] a clean return costs nothing: no ping, no query.
//!
//! A connection that is dirty by those signs is reset in one round trip on
//! PostgreSQL: the rollbacks for every tracked level are queued, and behind
//! them a probe statement whose reply carries the server's own transaction
//! flag (sqlx reads it for us through `Connection::begin_with`, which fails
//! with `BeginFailed` when the statement leaves no transaction open). Only if
//! the server says a transaction is still open is a second `ROLLBACK` sent.
//! The statement cache is never touched.
//!
//! On PostgreSQL a reply still in flight is also a sign: a `begin()`
//! cancelled after its `BEGIN` left (sqlx raises its transaction depth only
//! once the reply is read, so the transaction is invisible to it; this is
//! what poisoned sqlx's own pool). The manager polls the connection once
//! without blocking when it comes back; an unread reply sends it through the
//! reset above, which reads the reply and the server's flag.
//!
//! What no cheap sign can show (a raw `BEGIN` sent as SQL, or a cancelled
//! `begin()` whose reply arrived before the connection came back) is caught
//! by [`ResetMode::Strict`], which runs the probe on every return. sqlx 0.9,
//! like 0.8, reads the server's transaction status from every reply but keeps
//! it private, so this gap stays in [`ResetMode::Tracked`] for
//! `Connection::begin`. [`Pool::begin`](crate::Pool::begin) closes it for
//! its own `BEGIN`: cancelled in flight, it closes the connection on
//! PostgreSQL and MySQL.
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "sqlx-postgres")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use pool_core::managers::sqlx::{ResetMode, SqlxManager};
//! use pool_core::{Pool, PoolConfig};
//!
//! let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@db.internal/app")?
//!     .reset_mode(ResetMode::Strict); // only if some code sends a raw BEGIN
//! let pool = Pool::new(manager, PoolConfig::builder().max_size(8).build()?).await?;
//!
//! let mut conn = pool.get().await?;
//! let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&mut *conn).await?;
//! # let _ = one;
//! # Ok(())
//! # }
//! ```
//!
//! See [`SqlxManager`] for a complete example on SQLite.

use ::sqlx as driver;
use ::sqlx_core as driver_core;

/// A fixed SQL text as this sqlx's SQL string.
fn static_sql(sql: &'static str) -> driver::SqlStr {
    driver::SqlSafeStr::into_sql_str(sql)
}

/// A fixed SQL text to run as is, outside the statement cache.
fn raw(sql: &'static str) -> driver::RawSql {
    driver::raw_sql(static_sql(sql))
}

/// A SQL text built at run time (from integers only), to run as is,
/// outside the statement cache.
fn raw_built(sql: &str) -> driver::RawSql {
    driver::raw_sql(driver::AssertSqlSafe(sql))
}

/// A SQL text built at run time (from integers only), as this sqlx's query.
#[cfg(feature = "sqlx-postgres")]
fn built_sql(sql: &str) -> driver::AssertSqlSafe<&str> {
    driver::AssertSqlSafe(sql)
}

/// The `Executor` methods whose signatures differ between sqlx 0.8 and 0.9.
macro_rules! prepare_and_describe {
    () => {
        fn prepare_with<'e>(
            self,
            sql: super::driver::SqlStr,
            parameters: &'e [<Db<C> as Database>::TypeInfo],
        ) -> BoxFuture<'e, Result<<Db<C> as Database>::Statement, Error>>
        where
            'p: 'e,
        {
            let pool = self.clone();
            Box::pin(async move {
                let mut conn = pool.get().await.map_err(into_sqlx_error)?;
                (&mut *conn).prepare_with(sql, parameters).await
            })
        }

        #[doc(hidden)]
        fn describe<'e>(
            self,
            sql: super::driver::SqlStr,
        ) -> BoxFuture<'e, Result<super::driver::Describe<Db<C>>, Error>>
        where
            'p: 'e,
        {
            let pool = self.clone();
            Box::pin(async move {
                let mut conn = pool.get().await.map_err(into_sqlx_error)?;
                (&mut *conn).describe(sql).await
            })
        }
    };
}

// Each driver's file gets its docs.rs badge from the `doc(cfg)` on its
// `mod` line here, which names this module's own feature: rustdoc passes it
// on to the impls and methods inside (the shared files cannot name it).
mod ambient;
mod backend;
mod connect_error;
mod executor;
mod manager;
#[cfg(feature = "sqlx-mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx-mysql")))]
mod mysql;
mod password;
mod pool;
#[cfg(feature = "sqlx-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx-postgres")))]
mod postgres;
mod reset;
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-mysql"))]
mod server_flag;
#[cfg(feature = "sqlx-sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx-sqlite")))]
mod sqlite;
mod transaction;

pub use backend::{SqlxConnection, SqlxPasswordConnection};
pub use manager::SqlxManager;
pub use password::{BoxError, PasswordProviderError};
pub use reset::ResetMode;
pub use transaction::{into_sqlx_error, Transaction};
