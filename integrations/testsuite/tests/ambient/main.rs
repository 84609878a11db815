//! Ambient transactions (`pool_ambient`) against real databases:
//! PostgreSQL, MariaDB and SQLite through sqlx 0.9 (one suite written once,
//! `sqlx_suite.rs`, instantiated per backend), and PostgreSQL through
//! tokio-postgres. Every propagation mode; savepoints rolled back alone;
//! requires-new committing while the outer transaction rolls back; commit,
//! rollback, panic and cancellation with the server asked afterwards
//! whether a transaction is still open; two pools in one task; subtasks
//! that do and do not see the scope; exhaustion reported at once.
//!
//! Each test uses tables of its own (unique names) and drops them.
#![cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]

#[path = "../../../../pool-core/tests/support/mod.rs"]
mod support;

/// How long a test waits for the server to show what the pool did (a
/// transaction closed, a session gone).
pub const SERVER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the test bodies return: the scope's own errors, or one the body
/// chose to roll back with.
#[derive(Debug)]
pub enum Fail<E> {
    Tx(pool_ambient::TxError<E>),
    App(&'static str),
}

impl<E> From<pool_ambient::TxError<E>> for Fail<E> {
    fn from(e: pool_ambient::TxError<E>) -> Self {
        Self::Tx(e)
    }
}

#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
#[macro_use]
mod sqlx_suite;

#[cfg(feature = "sqlx-mysql")]
mod sqlx_mysql;
#[cfg(feature = "sqlx-postgres")]
mod sqlx_pg;
#[cfg(feature = "sqlx-sqlite")]
mod sqlx_sqlite;
#[cfg(feature = "tokio-postgres")]
mod tokio_pg;

#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
mod pg_common;

#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
mod model;

#[cfg(feature = "sqlx-postgres")]
mod begin_cancel_sqlx {
    use ::pool_sqlx;
    use ::sqlx;
    include!("begin_cancel.rs");
}

#[cfg(all(feature = "sqlx08-postgres", feature = "sqlx-postgres"))]
mod begin_cancel_sqlx08 {
    use ::pool_sqlx::sqlx08 as pool_sqlx;
    use ::sqlx08 as sqlx;
    include!("begin_cancel.rs");
}
