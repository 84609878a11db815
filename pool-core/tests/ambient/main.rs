//! Ambient transactions (`pool_core::ambient`) against real databases:
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

mod support;

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
