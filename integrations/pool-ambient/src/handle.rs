//! The pool's methods for ambient transactions: opening a scope, finding
//! the current transaction, registering after-commit callbacks.

use std::future::Future;
use std::panic::Location;

use super::backend::TransactionalManager;
use super::cell::{lock_for, Held, TxConn};
use super::error::TxError;
use super::frame;
use super::options::{Propagation, TxOptions};
use super::scope::{key, Scope};
use pool_core::Pool;

/// The pool's methods for ambient transactions, on any pool whose manager
/// carries them (the PostgreSQL, MySQL and SQLite managers of pool-postgres
/// and pool-sqlx). Bring it into scope (`use pool_ambient::AmbientExt;`) and
/// call them on the pool: `pool.transaction().run(...)`, `pool.current()`.
pub trait AmbientExt<M: TransactionalManager> {
    /// A transaction scope on this pool: set its [`Propagation`],
    /// isolation level and read-only flag, then [`run`](Scope::run) a
    /// future in it. Inside, and in every future it polls (`join!`,
    /// `FuturesUnordered`) and every task it hands the transaction to with
    /// [`spawn`](crate::spawn), [`current`](Self::current) returns the
    /// transaction's connection. A task started with plain `tokio::spawn`
    /// does not see it.
    ///
    /// `#[track_caller]`: the connection the scope checks out is recorded
    /// at the caller's line (the pool's `holders`, leak reports, timeouts).
    #[track_caller]
    fn transaction(&self) -> Scope<'_, M>;

    /// Whether a transaction of this pool is current in this task.
    fn in_transaction(&self) -> bool;

    /// The connection of this pool's current transaction in this task, for
    /// as long as the returned guard lives.
    ///
    /// Hold the guard for your queries only: while it is alive, other code
    /// of this task that uses the transaction (a nested scope, a joined
    /// future, a call that asks for `current()` again) waits for it. On
    /// sqlx the guard is exclusive (queries from joined futures and spawned
    /// tasks take turns); on tokio-postgres it is shared (their queries are
    /// pipelined on the one connection).
    ///
    /// While a savepoint that this code does not run in is open (a
    /// [`Nested`](crate::Propagation::Nested) scope in a sibling
    /// future), this waits until it ends: statements sent now would land
    /// inside it.
    ///
    /// # Errors
    ///
    /// [`TxError::NoTransaction`] outside any scope of this pool;
    /// [`TxError::Ended`] in a task handed the transaction that outlived
    /// its scope.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future gives up the wait for the lock.
    fn current(&self) -> impl Future<Output = Result<TxConn<M>, TxError<M::Error>>> + Send + '_;

    /// [`current`](Self::current), or outside any scope of this pool a
    /// plain checkout (autocommit), recorded at the caller's line: for code
    /// that works in a transaction when there is one.
    ///
    /// # Errors
    ///
    /// [`TxError::Checkout`] when the checkout fails; inside a scope, as
    /// [`current`](Self::current).
    ///
    /// # Cancel safety
    ///
    /// As the pool's `get` and [`current`](Self::current).
    #[track_caller]
    fn current_or_checkout(
        &self,
    ) -> impl Future<Output = Result<TxConn<M>, TxError<M::Error>>> + Send + '_;

    /// Registers `callback` to run once this pool's current transaction
    /// has committed, in the task of the scope that commits it, after the
    /// `COMMIT` (callbacks run in the order registered). Registered inside
    /// a savepoint scope that rolls back, or in a transaction that rolls
    /// back, it never runs; registered in a requires-new scope, it runs
    /// after that scope's own commit, not the outer one's.
    ///
    /// A callback that panics does so in the committing scope's caller,
    /// after the commit; the callbacks after it are dropped.
    ///
    /// # Errors
    ///
    /// [`TxError::NoTransaction`] outside any scope of this pool.
    fn after_commit(
        &self,
        callback: impl FnOnce() + Send + 'static,
    ) -> Result<(), TxError<M::Error>>;
}

impl<M: TransactionalManager> AmbientExt<M> for Pool<M> {
    #[track_caller]
    fn transaction(&self) -> Scope<'_, M> {
        Scope {
            pool: self,
            propagation: Propagation::default(),
            options: TxOptions::default(),
            site: Location::caller(),
        }
    }

    fn in_transaction(&self) -> bool {
        frame::find(&frame::current(), key(self)).is_some()
    }

    async fn current(&self) -> Result<TxConn<M>, TxError<M::Error>> {
        let frame = {
            let chain = frame::current();
            match frame::find(&chain, key(self)) {
                Some(frame) => frame.clone(),
                None => return Err(TxError::NoTransaction),
            }
        };
        lock_for(&frame).await
    }

    #[track_caller]
    fn current_or_checkout(
        &self,
    ) -> impl Future<Output = Result<TxConn<M>, TxError<M::Error>>> + Send + '_ {
        let site = Location::caller();
        async move {
            let frame = {
                let chain = frame::current();
                frame::find(&chain, key(self)).cloned()
            };
            match frame {
                Some(frame) => lock_for(&frame).await,
                None => {
                    let timeout = self.config().acquire_timeout();
                    let conn = self
                        .get_for(timeout, site)
                        .await
                        .map_err(TxError::Checkout)?;
                    Ok(TxConn {
                        inner: Held::Plain(conn),
                    })
                }
            }
        }
    }

    fn after_commit(
        &self,
        callback: impl FnOnce() + Send + 'static,
    ) -> Result<(), TxError<M::Error>> {
        let chain = frame::current();
        let frame = frame::find(&chain, key(self)).ok_or(TxError::NoTransaction)?;
        frame.tx.callbacks().push((frame.depth, Box::new(callback)));
        Ok(())
    }
}
