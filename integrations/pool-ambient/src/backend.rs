//! What a manager provides for ambient transactions: the traits the driver
//! crates implement (pool-sqlx's and pool-postgres's `ambient.rs`).

/// For driver crates: what a manager implements so that its pools carry
/// ambient transactions. An application never names these.
pub mod driver {
    use std::future::Future;
    use std::pin::Pin;

    use pool_api::ManageConnection;

    use crate::{TxError, TxOptions};

    /// A boxed, sendable future.
    pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

    /// One statement that moves a transaction along.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Step {
        Rollback,
        /// Opens the savepoint with this id (unique in its transaction).
        Savepoint(u64),
        /// Releases the savepoint with this id.
        Release(u64),
        /// Rolls back to the savepoint with this id and drops it.
        RollbackTo(u64),
    }

    /// How a `COMMIT` that the server answered ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Committed {
        Yes,
        /// The server had aborted the transaction (a statement in it
        /// failed) and rolled it back instead; it is over.
        RolledBack,
    }

    /// What a manager does for ambient transactions; implemented by the
    /// built-in managers only.
    pub trait Backend: ManageConnection<Connection: Sync> {
        /// Whether queries from several tasks may use the connection at
        /// once (pipelined by the driver), so [`Pool::current`] hands out a
        /// shared guard.
        ///
        /// [`Pool::current`]: crate::AmbientExt::current
        const SHARED_QUERIES: bool;

        /// Begins a transaction with `options`.
        fn begin(
            conn: &mut Self::Connection,
            options: TxOptions,
        ) -> BoxFuture<'_, Result<(), TxError<Self::Error>>>;

        /// Commits, or finds that the server rolled back instead.
        fn commit(conn: &mut Self::Connection) -> BoxFuture<'_, Result<Committed, Self::Error>>;

        /// Runs `step`.
        fn step(conn: &mut Self::Connection, step: Step) -> BoxFuture<'_, Result<(), Self::Error>>;

        /// Whether a connection whose transaction was abandoned (its scope
        /// dropped) must be closed rather than returned: `beginning`, its
        /// `BEGIN` was in flight; else the transaction was open.
        fn discard_abandoned(&self, beginning: bool) -> bool;
    }

    /// A manager whose transaction connection is locked exclusively
    /// (`SHARED_QUERIES` is false): the guard of the current transaction
    /// then derefs to the connection mutably (`&mut *tx` is the driver's
    /// executor).
    pub trait Exclusive: Backend {}
}

use driver::Backend;

/// A manager whose pools carry ambient transactions: the sqlx 0.9 managers
/// and the tokio-postgres one (their driver crates implement
/// [`driver::Backend`]).
pub trait TransactionalManager: Backend {}

impl<M: Backend> TransactionalManager for M {}
