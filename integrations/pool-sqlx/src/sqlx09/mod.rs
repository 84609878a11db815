//! The sqlx 0.9 managers, re-exported at the crate root; `sqlx08`
//! builds the same files over sqlx 0.8.

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
pub use pool::{Pool, PoolConnection};

/// The pool of PostgreSQL connections, under the name sqlx gives its own
/// (`use pool_sqlx::PgPool;` in place of `use sqlx::PgPool;`).
#[cfg(feature = "sqlx-postgres")]
pub type PgPool = Pool<driver::PgConnection>;
/// The pool of MySQL/MariaDB connections, under sqlx's name for its own.
#[cfg(feature = "sqlx-mysql")]
pub type MySqlPool = Pool<driver::MySqlConnection>;
/// The pool of SQLite connections, under sqlx's name for its own.
#[cfg(feature = "sqlx-sqlite")]
pub type SqlitePool = Pool<driver::SqliteConnection>;
pub use reset::ResetMode;
pub use transaction::{into_sqlx_error, Transaction};
