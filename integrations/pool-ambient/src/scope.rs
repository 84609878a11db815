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

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::RwLock;

use super::backend::driver::{Committed, Step};
use super::backend::TransactionalManager;
use super::cell::{cell_of, Cell, Shared, State};
use super::error::TxError;
use super::frame::{self, Frame, Level, Turn, TxCommon};
use super::options::{Isolation, Propagation, TxOptions};
use pool_core::{Pool, PoolId};

pub(crate) fn key<M: TransactionalManager>(pool: &Pool<M>) -> PoolId {
    pool.id()
}

/// Polls `fut`, catching a panic from it.
async fn caught<F: Future>(fut: F) -> Result<F::Output, Box<dyn Any + Send>> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(
        move |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        },
    )
    .await
}

/// Marks a transaction rollback-only when dropped armed: a joining or
/// nested scope that did not finish well (including one cancelled).
struct MarkOnDrop(Option<Arc<TxCommon>>);

impl MarkOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for MarkOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            // Release: pairs with the Acquire load where the owning scope
            // decides to commit.
            tx.rollback_only.store(true, Ordering::Release);
        }
    }
}

/// What a body (with its subtasks) came to, as the scope returns it: `Ok`
/// stays `Ok` unless a subtask failed.
fn outcome<T, E, B>(
    ended: Result<Result<T, E>, Box<dyn Any + Send>>,
    level: &Level,
    otherwise: TxError<B>,
) -> Result<T, E>
where
    E: From<TxError<B>>,
{
    match ended {
        Err(panic) => resume_unwind(panic),
        Ok(Err(e)) => Err(e),
        Ok(Ok(_)) if level.failed() => Err(TxError::ChildFailed.into()),
        Ok(Ok(_)) => Err(otherwise.into()),
    }
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

/// Runs `body` in the transaction of `found`, without ending it.
async fn join<M, T, E, F>(
    key: PoolId,
    chain: Option<Arc<Frame>>,
    found: &Frame,
    body: F,
) -> Result<T, E>
where
    M: TransactionalManager,
    F: Future<Output = Result<T, E>>,
    E: From<TxError<M::Error>>,
{
    let mut armed = MarkOnDrop(Some(found.tx.clone()));
    let level = Arc::new(Level::default());
    let frame = Arc::new(Frame {
        key,
        conn: found.conn.clone(),
        tx: found.tx.clone(),
        owns: false,
        depth: found.depth,
        savepoint: found.savepoint,
        level: level.clone(),
        parent: chain,
    });
    let ended = caught(frame::run_in(frame, body)).await;
    level.wait_children().await;
    if matches!(ended, Ok(Ok(_))) && !level.failed() {
        armed.disarm();
        return match ended {
            Ok(Ok(value)) => Ok(value),
            _ => unreachable!("matched above"),
        };
    }
    drop(armed);
    outcome::<T, E, M::Error>(ended, &level, TxError::ChildFailed)
}

/// A savepoint recorded open on its transaction; forgotten when dropped,
/// once it has ended on the server or its scope was dropped (which marks
/// the transaction rollback-only), so the next one may open.
struct OpenSavepoint<'a> {
    tx: &'a TxCommon,
    id: u64,
}

impl Drop for OpenSavepoint<'_> {
    fn drop(&mut self) {
        self.tx.close_savepoint(self.id);
    }
}

/// Runs `body` in a savepoint of the transaction of `found`.
async fn savepoint<M, T, E, F>(
    key: PoolId,
    chain: Option<Arc<Frame>>,
    found: &Frame,
    body: F,
) -> Result<T, E>
where
    M: TransactionalManager,
    F: Future<Output = Result<T, E>>,
    E: From<TxError<M::Error>>,
{
    let tx = found.tx.clone();
    // Acquire: pairs with the AcqRel increments in `frame::Child::enter`.
    if tx.sharers.load(Ordering::Acquire) > 0 {
        return Err(TxError::Shared.into());
    }
    let cell = cell_of::<M>(found);
    let depth = found.depth + 1;
    // Armed until the savepoint is released or rolled back to: a scope
    // dropped half-way leaves work in the transaction that must not commit.
    let mut armed = MarkOnDrop(Some(tx.clone()));
    // A savepoint only ends its own work when it lies inside every other
    // one still open: a sibling scope's (polled in the same task) must end
    // first. Recorded with the connection locked, so no statement of code
    // outside it slips in between.
    let (mut guard, open) = loop {
        let ended = tx.savepoint_ended();
        let mut ended = std::pin::pin!(ended);
        ended.as_mut().enable();
        let guard = cell.clone().write_owned().await;
        if guard.state != State::Open || tx.turn(found.savepoint) == Turn::Ended {
            return Err(TxError::Ended.into());
        }
        if let Some(id) = tx.open_savepoint(found.savepoint) {
            break (guard, OpenSavepoint { tx: &tx, id });
        }
        drop(guard);
        ended.await;
    };
    M::step(guard.conn_mut(), Step::Savepoint(open.id))
        .await
        .map_err(TxError::Savepoint)?;
    drop(guard);
    let level = Arc::new(Level::default());
    let frame = Arc::new(Frame {
        key,
        conn: found.conn.clone(),
        tx: tx.clone(),
        owns: false,
        depth,
        savepoint: open.id,
        level: level.clone(),
        parent: chain,
    });
    let ended = caught(frame::run_in(frame, body)).await;
    level.wait_children().await;
    let mut guard = cell.write_owned().await;
    if matches!(ended, Ok(Ok(_))) && !level.failed() {
        let released = M::step(guard.conn_mut(), Step::Release(open.id)).await;
        drop(guard);
        drop(open);
        return match (released, ended) {
            (Ok(()), Ok(Ok(value))) => {
                for (at, _) in tx.callbacks().iter_mut() {
                    if *at >= depth {
                        *at = depth - 1;
                    }
                }
                armed.disarm();
                Ok(value)
            }
            (Err(e), _) => Err(TxError::Release(e).into()),
            (Ok(()), _) => unreachable!("released only after `Ok`"),
        };
    }
    let rolled_back = M::step(guard.conn_mut(), Step::RollbackTo(open.id)).await;
    drop(guard);
    drop(open);
    tx.callbacks().retain(|(at, _)| *at < depth);
    match rolled_back {
        Ok(()) => armed.disarm(),
        Err(e) => tracing::warn!(
            error = %e,
            "rolling back to a savepoint failed; the enclosing transaction will roll back"
        ),
    }
    outcome(ended, &level, TxError::ChildFailed)
}
