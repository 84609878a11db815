//! [`PostgresManager`]: pools `tokio_postgres` clients (feature `tokio-postgres`).
//!
//! The pool hands out a [`PgClient`], a thin wrapper that dereferences to
//! [`tokio_postgres::Client`] and adds what a pooled client needs: transaction
//! tracking for the reset on return, a per-connection prepared-statement
//! cache ([`PgClient::prepare_cached`]) and a query timeout that cancels the
//! query on the server ([`PgClient::with_timeout`]).
//!
//! ```no_run
//! use pool_core::managers::tokio_postgres::{PostgresManager, ResetMode};
//! use pool_core::{Pool, PoolConfig};
//! use tokio_postgres::NoTls;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pg: tokio_postgres::Config = "postgres://postgres@127.0.0.1:5432/test".parse()?;
//! let manager = PostgresManager::new(pg, NoTls).reset_mode(ResetMode::Rollback);
//! let pool = Pool::new(manager, PoolConfig::builder().max_size(8).build()?).await?;
//!
//! let conn = pool.get().await?;
//! let one: i32 = conn.query_one("SELECT 1", &[]).await?.get(0);
//! assert_eq!(one, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Reset on return, and what it costs
//!
//! `tokio_postgres` cannot tell whether its connection is inside a
//! transaction: the server's transaction status is not exposed. What *can* be
//! known cheaply is whether a transaction was begun through the pooled client,
//! so the default mode tracks that. The modes, set with
//! [`PostgresManager::reset_mode`]:
//!
//! | [`ResetMode`] | statement sent on return | round trips per return |
//! |---|---|---|
//! | `None` | nothing | 0 |
//! | `Rollback` (default) | `ROLLBACK`, only if [`PgClient::transaction`] or [`PgClient::build_transaction`] was called since the last return | 0 for a clean return, 1 after a transaction |
//! | `RollbackAlways` | `ROLLBACK` | 1 on every return |
//! | `Clean` | `ROLLBACK`, `CLOSE ALL`, `SET SESSION AUTHORIZATION DEFAULT`, `RESET ALL`, `UNLISTEN *`, `SELECT pg_advisory_unlock_all()`, `DISCARD TEMP`, `DISCARD SEQUENCES` in one simple query | 1 on every return, and the most server work |
//!
//! A dropped `tokio_postgres::Transaction` queues its own `ROLLBACK`, which
//! reaches the server before anything the next user sends. What `Rollback`
//! adds is the cases that leave no such message behind: a `transaction()`
//! future cancelled after `START TRANSACTION` went out, or a transaction
//! leaked with `mem::forget`. A transaction opened with raw SQL
//! (`batch_execute("BEGIN")`) is invisible to it: use `RollbackAlways` or
//! `Clean` for code that does that. A reset that fails closes the connection.
//!
//! [`PgClient`] dereferences to `Client` immutably only: `Client`'s `&mut`
//! methods are exactly the ones that start transactions, and going through
//! the wrapper is what lets `Rollback` see them.
//!
//! # Abandoned queries
//!
//! A query whose future is dropped (a request timeout) keeps running on the
//! server, and the next user of the connection waits behind it.
//! [`PgClient::with_timeout`] runs a query under a time limit and, when the
//! limit passes, sends the server-side cancel and marks the connection so
//! that the pool closes it on return instead of handing it out again.
//!
//! # Notices and notifications
//!
//! The connection task logs server notices (`WARNING`, `NOTICE`) at `debug`
//! level through `tracing` and connection errors at `warn`; `LISTEN`/`NOTIFY`
//! notifications are not delivered to pooled clients (they are dropped and
//! logged at `trace`).

mod client;
mod driver;
mod manager;
mod timeout;

pub use client::PgClient;
pub use manager::{PostgresManager, ResetMode};
pub use timeout::QueryError;
