//! Pools sqlx connections: [`SqlxManager<C>`] for `sqlx::PgConnection`,
//! `sqlx::MySqlConnection` and `sqlx::SqliteConnection`, each behind its
//! cargo feature (`sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite`).
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
//! cancelled after its `BEGIN` left (sqlx 0.8 raises its transaction depth
//! only once the reply is read, so the transaction is invisible to it; this
//! is what poisoned sqlx's own pool). The manager polls the connection once
//! without blocking when it comes back; an unread reply sends it through the
//! reset above, which reads the reply and the server's flag.
//!
//! What no cheap sign can show (a raw `BEGIN` sent as SQL, or a cancelled
//! `begin()` whose reply arrived before the connection came back) is caught
//! by [`ResetMode::Strict`], which runs the probe on every return.
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

mod backend;
mod manager;
mod reset;

pub use backend::SqlxConnection;
pub use manager::SqlxManager;
pub use reset::ResetMode;
