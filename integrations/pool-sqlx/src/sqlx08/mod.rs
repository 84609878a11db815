//! Pools sqlx 0.8 connections: the same [`SqlxManager<C>`],
//! [`Transaction<C>`], `Pool::begin`, `Pool::acquire`, `Executor for
//! &Pool` and `Acquire` for `&mut` of a checked-out connection as
//! the crate root on sqlx 0.9, built from the same source
//! over sqlx 0.8, for `PgConnection`, `MySqlConnection` and
//! `SqliteConnection` behind the features `sqlx08-postgres`, `sqlx08-mysql`
//! and `sqlx08-sqlite`.
//!
//! Name the sqlx 0.8 crate in your own `Cargo.toml` as usual
//! (`sqlx = "0.8"`); its connection types are the ones this module pools.
//! The crate docs describe how a returned
//! connection is cleaned; everything there holds here.
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "sqlx08-postgres")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! # use sqlx08 as sqlx;
//! use pool_core::PoolConfig;
//! use pool_sqlx::sqlx08::{Pool, SqlxManager};
//!
//! let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@db.internal/app")?;
//! let pool = Pool::new(manager, PoolConfig::builder().max_size(8).build()?).await?;
//! let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&pool).await?;
//! # let _ = one;
//! # Ok(())
//! # }
//! ```

// The same source as `managers::sqlx`, on purpose: only `driver` differs.
#![allow(clippy::duplicate_mod)]

use ::sqlx08 as driver;
use ::sqlx08_core as driver_core;

/// A fixed SQL text as this sqlx's SQL string.
#[cfg(any(feature = "sqlx08-postgres", feature = "sqlx08-mysql"))]
fn static_sql(sql: &'static str) -> std::borrow::Cow<'static, str> {
    sql.into()
}

/// A fixed SQL text to run as is, outside the statement cache.
fn raw(sql: &'static str) -> driver::RawSql<'static> {
    driver::raw_sql(sql)
}

/// A SQL text built at run time (from integers only), to run as is,
/// outside the statement cache.
fn raw_built(sql: &str) -> driver::RawSql<'_> {
    driver::raw_sql(sql)
}

/// A SQL text built at run time (from integers only), as this sqlx's query.
#[cfg(feature = "sqlx08-postgres")]
fn built_sql(sql: &str) -> &str {
    sql
}

/// The `Executor` methods whose signatures differ between sqlx 0.8 and 0.9.
macro_rules! prepare_and_describe {
    () => {
        fn prepare_with<'e, 'q: 'e>(
            self,
            sql: &'q str,
            parameters: &'e [<Db<C> as Database>::TypeInfo],
        ) -> BoxFuture<'e, Result<<Db<C> as Database>::Statement<'q>, Error>>
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
        fn describe<'e, 'q: 'e>(
            self,
            sql: &'q str,
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
#[path = "../sqlx09/backend.rs"]
mod backend;
#[path = "../sqlx09/connect_error.rs"]
mod connect_error;
#[path = "../sqlx09/executor.rs"]
mod executor;
#[path = "../sqlx09/manager.rs"]
mod manager;
#[cfg(feature = "sqlx08-mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx08-mysql")))]
#[path = "../sqlx09/mysql.rs"]
mod mysql;
#[path = "../sqlx09/password.rs"]
mod password;
#[path = "../sqlx09/pool.rs"]
mod pool;
#[cfg(feature = "sqlx08-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx08-postgres")))]
#[path = "../sqlx09/postgres.rs"]
mod postgres;
#[path = "../sqlx09/reset.rs"]
mod reset;
#[cfg(any(feature = "sqlx08-postgres", feature = "sqlx08-mysql"))]
#[path = "../sqlx09/server_flag.rs"]
mod server_flag;
#[cfg(feature = "sqlx08-sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx08-sqlite")))]
#[path = "../sqlx09/sqlite.rs"]
mod sqlite;
#[path = "../sqlx09/transaction.rs"]
mod transaction;

pub use backend::{SqlxConnection, SqlxPasswordConnection};
pub use manager::SqlxManager;
pub use password::{BoxError, PasswordProviderError};
pub use pool::{Pool, PoolConnection};

/// The pool of PostgreSQL connections, under the name sqlx gives its own
/// (`use pool_sqlx::PgPool;` in place of `use sqlx::PgPool;`).
#[cfg(feature = "sqlx08-postgres")]
pub type PgPool = Pool<driver::PgConnection>;
/// The pool of MySQL/MariaDB connections, under sqlx's name for its own.
#[cfg(feature = "sqlx08-mysql")]
pub type MySqlPool = Pool<driver::MySqlConnection>;
/// The pool of SQLite connections, under sqlx's name for its own.
#[cfg(feature = "sqlx08-sqlite")]
pub type SqlitePool = Pool<driver::SqliteConnection>;
pub use reset::ResetMode;
pub use transaction::{into_sqlx_error, Transaction};
