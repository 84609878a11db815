//! Scopes: beginning, joining, nesting and ending ambient transactions.
//!
//! A transaction's connection lives in a `Cell` (`cell.rs`) behind an `Arc<RwLock>`,
//! which every frame on that transaction shares (its own scope's, those of
//! scopes joining it, and those handed to spawned tasks). Code below takes
//! the lock for its queries (`Pool::current`); the scope that began the
//! transaction takes it last, once its body and its subtasks are done, to
//! commit or roll back. A `Cell` dropped while its transaction is still open
//! (the scope was cancelled) hands the connection back so that the pool's
//! reset rolls it back, or closes it where the reset would not.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::RwLock;

use super::backend::driver::{Committed, Step};
use super::backend::TransactionalManager;
use super::body::{caught, outcome};
use super::cell::{Cell, Shared, State};
use super::error::TxError;
use super::frame::{self, Frame, Level, TxCommon};
use super::nested::{join, savepoint};
use super::options::{Isolation, Propagation, TxOptions};
use pool_core::{Pool, PoolId};

pub(crate) fn key<M: TransactionalManager>(pool: &Pool<M>) -> PoolId {
    pool.id()
}

/// A transaction scope being set up: from [`AmbientExt::transaction`](crate::AmbientExt::transaction), run with
/// [`run`](Self::run).
#[must_use = "a scope does nothing until `run` is awaited"]
pub struct Scope<'p, M: TransactionalManager> {
    pub(crate) pool: &'p Pool<M>,
    pub(crate) propagation: Propagation,
    pub(crate) options: TxOptions,
    pub(crate) site: &'static Location<'static>,
}

impl<M: TransactionalManager> fmt::Debug for Scope<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("propagation", &self.propagation)
            .field("options", &self.options)
            .field("site", &self.site)
            .finish_non_exhaustive()
    }
}

impl<'p, M: TransactionalManager> Scope<'p, M> {
    /// How the scope relates to a transaction already current. Defaults
    /// to [`Propagation::Required`].
    pub fn propagation(mut self, propagation: Propagation) -> Self {
        self.propagation = propagation;
        self
    }

    /// The isolation level of the transaction, if this scope begins one.
    /// Defaults to the server's.
    pub fn isolation(mut self, level: Isolation) -> Self {
        self.options.isolation = Some(level);
        self
    }

    /// Whether the transaction, if this scope begins one, may only read.
    /// Defaults to `false`.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.options.read_only = read_only;
        self
    }

    /// Runs `body` inside the scope.
    ///
    /// A scope that begins a transaction commits it when `body` returns
    /// `Ok` (and the tasks it handed the transaction to with
    /// [`spawn`](super::spawn) have ended with `Ok`), then runs the
    /// callbacks registered with [`AmbientExt::after_commit`](crate::AmbientExt::after_commit). It rolls back when
    /// `body` returns `Err` (returned as is), when `body` panics (the panic
    /// then goes on to the caller), and when this future is dropped (the
    /// pool rolls the connection back before anyone reuses it). A savepoint
    /// scope does the same with `RELEASE SAVEPOINT` and `ROLLBACK TO
    /// SAVEPOINT`; a joining scope leaves the end to the scope that began
    /// the transaction, marking it rollback-only if it did not finish well.
    ///
    /// # Errors
    ///
    /// `body`'s error, or a [`TxError`] converted into its type:
    /// [`NoTransaction`](TxError::NoTransaction) and
    /// [`AlreadyInTransaction`](TxError::AlreadyInTransaction) from the
    /// propagation rules, [`Exhausted`](TxError::Exhausted) at once for a
    /// requires-new scope that would wait for itself,
    /// [`Shared`](TxError::Shared) for a savepoint while spawned tasks
    /// share the transaction, [`Unsupported`](TxError::Unsupported)
    /// settings, [`Checkout`](TxError::Checkout),
    /// [`Begin`](TxError::Begin), [`Savepoint`](TxError::Savepoint),
    /// [`Commit`](TxError::Commit) and [`Release`](TxError::Release) from
    /// the database, [`Ended`](TxError::Ended) in a task that outlived the
    /// scope it was handed, and, when `body` returned `Ok` but nothing was
    /// committed, [`CommitRolledBack`](TxError::CommitRolledBack) (a
    /// statement had failed, so PostgreSQL had aborted the transaction:
    /// catching a statement's error does not undo that, a `Nested` scope
    /// around it does), [`RollbackOnly`](TxError::RollbackOnly),
    /// [`ChildFailed`](TxError::ChildFailed) or [`Busy`](TxError::Busy).
    ///
    /// # Panics
    ///
    /// When `body` panics, after rolling back.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future rolls back what the scope began: its
    /// transaction (through the pool's reset on return, or by closing the
    /// connection where a `BEGIN` in flight could leave a transaction the
    /// reset would not see), or, for a joining or savepoint scope, the
    /// whole enclosing transaction, which is marked rollback-only (also
    /// when it is dropped while waiting for a sibling savepoint to end).
    pub async fn run<T, E, F>(self, body: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<TxError<M::Error>>,
    {
        let key = key(self.pool);
        let chain = frame::current();
        let found = frame::find(&chain, key).cloned();
        match (self.propagation, found) {
            (Propagation::Never, Some(_)) => Err(TxError::AlreadyInTransaction.into()),
            (Propagation::Never, None) => body.await,
            (Propagation::Mandatory, None) => Err(TxError::NoTransaction.into()),
            (Propagation::Required | Propagation::Mandatory, Some(found)) => {
                join::<M, T, E, F>(key, chain, &found, body).await
            }
            (Propagation::Nested, Some(found)) => {
                savepoint::<M, T, E, F>(key, chain, &found, body).await
            }
            (Propagation::RequiresNew, Some(_)) => {
                let held = frame::held(&chain, key);
                let max_size = self.pool.state().max_size;
                if held >= max_size {
                    return Err(TxError::Exhausted { held, max_size }.into());
                }
                self.begin_new(key, chain, body).await
            }
            (_, None) => self.begin_new(key, chain, body).await,
        }
    }

    async fn begin_new<T, E, F>(
        self,
        key: PoolId,
        chain: Option<Arc<Frame>>,
        body: F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<TxError<M::Error>>,
    {
        let timeout = self.pool.config().acquire_timeout();
        let conn = self
            .pool
            .get_for(timeout, self.site)
            .await
            .map_err(TxError::Checkout)?;
        let manager = self.pool.manager();
        let mut cell = Cell {
            conn: Some(conn),
            state: State::Beginning,
            discard_beginning: manager.discard_abandoned(true),
            discard_open: manager.discard_abandoned(false),
        };
        if let Err(e) = M::begin(cell.conn_mut(), self.options).await {
            // Whatever a failed `BEGIN` left, the pool's reset sees.
            cell.state = State::Done;
            return Err(e.into());
        }
        cell.state = State::Open;
        let cell: Shared<M> = Arc::new(RwLock::new(cell));
        let tx = Arc::new(TxCommon::default());
        let level = Arc::new(Level::default());
        let frame = Arc::new(Frame {
            key,
            conn: cell.clone(),
            tx: tx.clone(),
            owns: true,
            depth: 0,
            savepoint: 0,
            level: level.clone(),
            parent: chain,
        });
        let ended = caught(frame::run_in(frame, body)).await;
        level.wait_children().await;
        // Acquire: pairs with the Release store in `MarkOnDrop::drop`.
        let commit = matches!(ended, Ok(Ok(_)))
            && !level.failed()
            && !tx.rollback_only.load(Ordering::Acquire);
        // The body and its subtasks are done, so only a guard that escaped
        // them can hold the lock: waiting for it could last forever. The
        // transaction then ends when that guard goes, rolled back.
        let Ok(mut guard) = cell.try_write_owned() else {
            tx.callbacks().clear();
            return outcome(ended, &level, TxError::Busy);
        };
        if commit {
            return match M::commit(guard.conn_mut()).await {
                Ok(Committed::RolledBack) => {
                    guard.state = State::Done;
                    drop(guard);
                    tx.callbacks().clear();
                    Err(TxError::CommitRolledBack.into())
                }
                Ok(Committed::Yes) => {
                    guard.state = State::Done;
                    drop(guard);
                    let callbacks = std::mem::take(&mut *tx.callbacks());
                    for (_, callback) in callbacks {
                        callback();
                    }
                    match ended {
                        Ok(Ok(value)) => Ok(value),
                        _ => unreachable!("committed only after `Ok`"),
                    }
                }
                // Left open: the pool rolls the connection back on return.
                Err(e) => Err(TxError::Commit(e).into()),
            };
        }
        match M::step(guard.conn_mut(), Step::Rollback).await {
            Ok(()) => guard.state = State::Done,
            Err(e) => tracing::warn!(
                error = %e,
                "rolling back a transaction scope failed; the pool resets or closes its connection"
            ),
        }
        drop(guard);
        tx.callbacks().clear();
        outcome(ended, &level, TxError::RollbackOnly)
    }
}
