//! sqlx for pool-core: [`SqlxManager<C>`] and [`Pool<C>`] for
//! `sqlx::PgConnection`, `sqlx::MySqlConnection` and
//! `sqlx::SqliteConnection` on sqlx 0.9, each behind its cargo feature
//! (`sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite`). For sqlx 0.8 the same
//! items are in [`sqlx08`] under the `sqlx08-*` features. The fleet budget,
//! several hosts and transaction-mode poolers on PostgreSQL come from
//! pool-postgres ([`hosts::builder`] for the host pool).
//!
//! # A drop-in for sqlx's pool
//!
//! - [`Pool<C>`] is pool-core's pool of [`SqlxManager<C>`] (it derefs to
//!   it) with sqlx's vocabulary on top.
//! - `&Pool<C>` is a sqlx `Executor`: `query(..).fetch_one(&pool)`
//!   and `.execute(&pool)` check a connection out for that one query.
//! - [`Pool::begin`] returns an owned [`Transaction<C>`]
//!   (`Send + 'static`, derefs to `C`, `commit()`, `rollback()`, rolled back
//!   when dropped).
//! - `pool.acquire().await?` (sqlx's name and error; `pool.get()` is the
//!   same checkout with the pool's own error) gives a [`PoolConnection`]
//!   that derefs to `C`: `&mut *conn` is an executor, and `&mut conn` (like
//!   `&mut *conn`) is a `sqlx::Acquire`, as sqlx's `PoolConnection` is. So is `&mut tx`
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
//! `Connection::begin`. [`Pool::begin`](Pool::begin) closes it for
//! its own `BEGIN`: cancelled in flight, it closes the connection on
//! PostgreSQL and MySQL.
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "sqlx-postgres")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use pool_core::PoolConfig;
//! use pool_sqlx::{Pool, ResetMode, SqlxManager};
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
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "_sqlx")]
mod sqlx09;
#[cfg(feature = "_sqlx")]
pub use sqlx09::*;

#[cfg(feature = "_sqlx08")]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "sqlx08-postgres",
        feature = "sqlx08-mysql",
        feature = "sqlx08-sqlite"
    )))
)]
pub mod sqlx08;

#[cfg(feature = "sqlx-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx-postgres")))]
pub mod hosts;
