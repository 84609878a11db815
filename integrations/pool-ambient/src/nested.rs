//! Scopes that run inside a current transaction: one that joins it
//! (`Required`) and one that opens a savepoint in it (`Nested`). The scope
//! itself, and one that begins a transaction, are in `scope.rs`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::backend::driver::Step;
use super::backend::TransactionalManager;
use super::body::{caught, outcome, MarkOnDrop};
use super::cell::{cell_of, State};
use super::error::TxError;
use super::frame::{self, Frame, Level, Turn, TxCommon};
use pool_core::PoolId;

/// Runs `body` in the transaction of `found`, without ending it.
pub(crate) async fn join<M, T, E, F>(
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
pub(crate) async fn savepoint<M, T, E, F>(
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
