//! Ambient transactions: a scope binds a transaction of a pool to the
//! future it runs, and code anywhere below asks the pool for it instead of
//! taking `&mut Transaction` as a parameter.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use pool_ambient::{AmbientExt, Propagation};
//! use pool_core::PoolConfig;
//! use pool_sqlx::{Pool, SqlxManager};
//! use sqlx::PgConnection;
//!
//! type PgPool = Pool<PgConnection>;
//! type BoxError = Box<dyn std::error::Error + Send + Sync>;
//!
//! // Deep in the call stack: no transaction parameter.
//! async fn debit(pool: &PgPool, account: i64, cents: i64) -> Result<(), BoxError> {
//!     let mut tx = pool.current().await?;
//!     sqlx::query("UPDATE accounts SET cents = cents - $1 WHERE id = $2")
//!         .bind(cents)
//!         .bind(account)
//!         .execute(&mut *tx)
//!         .await?;
//!     Ok(())
//! }
//!
//! let pool: PgPool = Pool::new(
//!     SqlxManager::from_url("postgres://app@db.internal/app")?,
//!     PoolConfig::builder().build()?,
//! )
//! .await?;
//! pool.transaction()
//!     .run(async {
//!         debit(&pool, 1, 100).await?;
//!         // An audit row that stays even if the outer transaction rolls back.
//!         pool.transaction()
//!             .propagation(Propagation::RequiresNew)
//!             .run(async { debit(&pool, 2, 0).await })
//!             .await
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # How it works
//!
//! [`AmbientExt::transaction`] returns a [`Scope`];
//! its [`run`](Scope::run) pushes a frame on a tokio task-local, keyed by
//! the pool's identity (so two pools in one task never mix), for the future
//! it runs. [`AmbientExt::current`] finds the innermost
//! frame of its pool and locks the transaction's connection for as long as
//! the returned [`TxConn`] lives. The pool's own `get()` and return path are
//! untouched: code that never opens a scope runs exactly as without this
//! module.
//!
//! | [`Propagation`] | with a current transaction | without |
//! |---|---|---|
//! | `Required` (default) | joins it | begins one |
//! | `RequiresNew` | begins one on a second connection, the current one suspended | begins one |
//! | `Nested` | `SAVEPOINT`, released or rolled back to on its own | begins one |
//! | `Mandatory` | joins it | [`TxError::NoTransaction`] |
//! | `Never` | [`TxError::AlreadyInTransaction`] | runs without one |
//!
//! The scope that began a transaction commits it when its body returns
//! `Ok` and rolls it back on `Err`, on panic (which then goes on) and when
//! dropped (the pool rolls the connection back before reusing it). A
//! `COMMIT` that fails is the caller's error ([`TxError::Commit`]).
//!
//! On PostgreSQL a statement that fails aborts the whole transaction: every
//! later statement is refused, and the `COMMIT` is answered with a
//! rollback. A body that handles such an error and returns `Ok` gets
//! [`TxError::CommitRolledBack`], never a silent `Ok` with nothing
//! committed. To go on without a statement that may fail, run it in a
//! `Nested` scope: its `ROLLBACK TO` undoes the failure, and the outer
//! transaction carries on. (sqlx does not show the server's transaction
//! status, so on sqlx this check is one more round trip per commit.)
//! Callbacks registered with [`Pool::after_commit`](crate::AmbientExt::after_commit)
//! run after the commit of the transaction (or savepoint) they were
//! registered in, and never after a rollback.
//!
//! # Savepoints polled together
//!
//! A savepoint ends every savepoint opened after it: `RELEASE` keeps their
//! work, `ROLLBACK TO` drops it. Two `Nested` scopes polled together on
//! one transaction (`join!`, `select!`) cannot both be open and both end as
//! they say, so they take turns: a `Nested` scope waits until a sibling's
//! savepoint has ended before it opens its own, and [`Pool::current`](crate::AmbientExt::current),
//! from code outside the savepoint open now (the other branch of the
//! `join!`), waits for it too, since its statements would land inside it.
//! Each savepoint is named by an id of its own and ends exactly itself.
//! The wait is cancel-safe. It is not detected when the open savepoint's
//! scope waits, in turn, for the code that waits for it (a channel between
//! the two branches): that hangs, as a held [`TxConn`] does below.
//!
//! # Subtasks
//!
//! Futures polled inside the scope (`join!`, `select!`,
//! `FuturesUnordered`) see its transaction. A task started with plain
//! `tokio::spawn` does not: tokio's task-locals are not inherited, so
//! `current()` there fails with [`TxError::NoTransaction`]. [`spawn`]
//! hands the transactions over explicitly; the scope then waits for the
//! task when its body is done and commits nothing unless the task ended
//! with `Ok`.
//!
//! # Deadlocks turned into errors
//!
//! A `RequiresNew` scope on a pool whose every connection is already held
//! by this task's own scopes fails at once with [`TxError::Exhausted`]
//! instead of waiting out `acquire_timeout` for itself. The connection a
//! scope checks out is recorded at the scope's call site (`#[track_caller]`
//! on [`Pool::transaction`](crate::AmbientExt::transaction)), so
//! [`Pool::holders`](pool_core::Pool::holders) and leak reports name it.
//!
//! Two things are not detected: a [`TxConn`] held across a call into code
//! that uses the same transaction makes that code wait for it (keep the
//! guard for the queries at hand), and a savepoint scope that waits for a
//! sibling future which, in turn, waits for that savepoint to end (see
//! above).
//!
//! The managers that carry them: pool-sqlx's on sqlx 0.9 (`sqlx-postgres`,
//! `sqlx-mysql`, `sqlx-sqlite`) and pool-postgres's `PostgresManager`.

mod backend;
mod body;
mod cell;
mod error;
mod frame;
mod handle;
mod nested;
mod options;
mod scope;

pub use backend::driver;
pub use backend::TransactionalManager;
pub use cell::TxConn;
pub use error::TxError;
pub use frame::spawn;
pub use handle::AmbientExt;
pub use options::{Isolation, Propagation, TxOptions};
pub use scope::Scope;

/// Guides: ambient transactions in a service, with an example that
/// compiles.
pub mod guide {
    #[doc = include_str!("../docs/transactions.md")]
    pub mod transactions {}
}
