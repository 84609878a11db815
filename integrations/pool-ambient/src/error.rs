//! [`TxError`]: why a transaction scope, or a look-up of the current
//! transaction, failed.

use std::error::Error as StdError;
use std::fmt;

use pool_api::PoolError;

/// Why a transaction scope, or [`Pool::current`](crate::AmbientExt::current),
/// failed. `E` is the manager's error type (`sqlx::Error`, or
/// `PgError` for tokio-postgres).
///
/// A scope's body returns its own error type `E2: From<TxError<E>>`, so
/// these reach the caller through it.
#[derive(Debug)]
#[non_exhaustive]
pub enum TxError<E> {
    /// No transaction of this pool is current in this task: asked for with
    /// [`Pool::current`](crate::AmbientExt::current) or
    /// [`Pool::after_commit`](crate::AmbientExt::after_commit) outside a scope
    /// (or in a task started with plain `tokio::spawn`, which does not
    /// inherit it), or by a [`Mandatory`](super::Propagation::Mandatory)
    /// scope.
    NoTransaction,
    /// A [`Never`](super::Propagation::Never) scope was entered inside a
    /// transaction of the same pool.
    AlreadyInTransaction,
    /// A [`RequiresNew`](super::Propagation::RequiresNew) scope needs one
    /// more connection, but this task's own scopes already hold every
    /// connection the pool may open: it would wait for itself until
    /// `acquire_timeout`. Returned at once instead.
    Exhausted {
        /// Connections held by this task's transaction scopes.
        held: u32,
        /// The pool's `max_size` in force.
        max_size: u32,
    },
    /// A [`Nested`](super::Propagation::Nested) scope was entered while
    /// tasks handed the transaction with [`spawn`](super::spawn) still run:
    /// their statements would fall inside the savepoint.
    Shared,
    /// The scope's body and its subtasks were done, but a guard from
    /// [`Pool::current`](crate::AmbientExt::current) was still alive (returned
    /// from the body, or moved into a task started with plain
    /// `tokio::spawn`): nothing is committed, and the transaction is rolled
    /// back when that guard is dropped.
    Busy,
    /// The transaction, or the savepoint, that this code runs in has ended
    /// already: asked for by a task handed it with [`spawn`](super::spawn)
    /// that outlived its scope (the scope was cancelled). Whatever the task
    /// would send now would run outside it.
    Ended,
    /// A setting the backend does not have (isolation levels other than
    /// serializable, or read-only, on SQLite).
    Unsupported(&'static str),
    /// Checking out the connection for a new transaction failed.
    Checkout(PoolError<E>),
    /// `BEGIN` (or the statement setting the isolation level) failed.
    Begin(E),
    /// `COMMIT` failed: the transaction is rolled back before its
    /// connection is reused.
    Commit(E),
    /// `SAVEPOINT` failed.
    Savepoint(E),
    /// `RELEASE SAVEPOINT` failed; the transaction is marked rollback-only.
    Release(E),
    /// The body returned `Ok`, but the server had aborted the transaction:
    /// a statement in it failed and the body went on (it caught the error,
    /// or a joined future or handed task did). PostgreSQL answers the
    /// `COMMIT` of an aborted transaction by rolling it back, so nothing
    /// was committed. Handle a failed statement inside a
    /// [`Nested`](super::Propagation::Nested) scope to go on without it.
    CommitRolledBack,
    /// The body returned `Ok`, but a scope that joined the transaction
    /// failed, panicked or was cancelled, so it was rolled back instead of
    /// committed.
    RollbackOnly,
    /// The body returned `Ok`, but a task it handed the transaction to
    /// ([`spawn`](super::spawn)) returned an error, panicked or was aborted,
    /// so the scope's work was rolled back.
    ChildFailed,
}

impl<E: fmt::Display> fmt::Display for TxError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoTransaction => f.write_str(
                "no transaction of this pool is current in this task (outside a transaction \
                 scope, or in a task spawned without handing it over)",
            ),
            Self::AlreadyInTransaction => {
                f.write_str("a scope that must run without a transaction was entered inside one")
            }
            Self::Exhausted { held, max_size } => write!(
                f,
                "a requires-new transaction needs another connection, but this task's own \
                 transaction scopes already hold {held} of the pool's {max_size}: it would \
                 wait for itself"
            ),
            Self::Shared => f.write_str(
                "cannot open a savepoint while spawned tasks share the transaction (their \
                 statements would fall inside it)",
            ),
            Self::Busy => f.write_str(
                "the transaction was not committed: a guard on its connection outlived the \
                 scope's body",
            ),
            Self::Ended => f.write_str(
                "the transaction or savepoint this code runs in has already ended (its scope \
                 was cancelled while a task it was handed to still ran)",
            ),
            Self::Unsupported(what) => write!(f, "the database does not support {what}"),
            Self::Checkout(e) => write!(f, "checking out a connection for a transaction: {e}"),
            Self::Begin(e) => write!(f, "beginning a transaction: {e}"),
            Self::Commit(e) => write!(f, "committing a transaction: {e}"),
            Self::Savepoint(e) => write!(f, "creating a savepoint: {e}"),
            Self::Release(e) => write!(f, "releasing a savepoint: {e}"),
            Self::CommitRolledBack => f.write_str(
                "the transaction was rolled back, not committed: a statement in it had failed \
                 (its error was handled and the body went on), so the server had aborted it",
            ),
            Self::RollbackOnly => f.write_str(
                "the transaction was rolled back: a scope that joined it failed, panicked or \
                 was cancelled",
            ),
            Self::ChildFailed => f.write_str(
                "the transaction was rolled back: a task it was handed to failed, panicked or \
                 was aborted",
            ),
        }
    }
}

impl<E: StdError + 'static> StdError for TxError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Checkout(e) => Some(e),
            Self::Begin(e) | Self::Commit(e) | Self::Savepoint(e) | Self::Release(e) => Some(e),
            _ => None,
        }
    }
}
