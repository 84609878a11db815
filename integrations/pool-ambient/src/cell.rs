//! A transaction's connection ([`Cell`], shared behind an `Arc<RwLock>`
//! by every frame on the transaction) and the guard code below holds while
//! using it ([`TxConn`]).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use super::backend::TransactionalManager;
use super::error::TxError;
use super::frame::{Frame, Turn};
use pool_core::PooledConnection;

/// How far a [`Cell`]'s transaction got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Beginning,
    Open,
    /// Committed, rolled back, or never begun: nothing to undo.
    Done,
}

/// A transaction's connection, and what to do with it when it is dropped.
pub(crate) struct Cell<M: TransactionalManager> {
    /// `Some` until dropped.
    pub(crate) conn: Option<PooledConnection<M>>,
    pub(crate) state: State,
    pub(crate) discard_beginning: bool,
    pub(crate) discard_open: bool,
}

impl<M: TransactionalManager> Cell<M> {
    pub(crate) fn conn(&self) -> &M::Connection {
        match &self.conn {
            Some(conn) => conn,
            None => unreachable!("a cell holds its connection until dropped"),
        }
    }

    pub(crate) fn conn_mut(&mut self) -> &mut M::Connection {
        match &mut self.conn {
            Some(conn) => conn,
            None => unreachable!("a cell holds its connection until dropped"),
        }
    }
}

impl<M: TransactionalManager> Drop for Cell<M> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let discard = match self.state {
                State::Beginning => self.discard_beginning,
                State::Open => self.discard_open,
                State::Done => false,
            };
            if discard {
                PooledConnection::discard(conn);
            }
        }
    }
}

pub(crate) type Shared<M> = Arc<RwLock<Cell<M>>>;

/// The frame's connection cell as pool `M`'s.
pub(crate) fn cell_of<M: TransactionalManager>(frame: &Frame) -> Shared<M> {
    match frame.conn.clone().downcast::<RwLock<Cell<M>>>() {
        Ok(cell) => cell,
        // The key is the address of the pool's shared state, which the
        // cell's checkout keeps alive: no other pool, of any type, has it.
        Err(_) => unreachable!("a frame's key names the pool its cell belongs to"),
    }
}

/// The connection of the current transaction, from [`Pool::current`](crate::AmbientExt::current), or a
/// plain checkout from [`Pool::current_or_checkout`](crate::AmbientExt::current_or_checkout).
///
/// Derefs to the connection (mutably on sqlx, so `&mut *conn` is an
/// executor; on tokio-postgres to the shared `PgClient`, whose queries
/// from several tasks are pipelined). [`TxConn::in_transaction`] is an
/// associated function, so that it never hides a method of the
/// connection.
#[must_use = "dropping it gives the connection back at once"]
pub struct TxConn<M: TransactionalManager> {
    pub(crate) inner: Held<M>,
}

/// What a [`TxConn`] holds.
pub(crate) enum Held<M: TransactionalManager> {
    Exclusive(OwnedRwLockWriteGuard<Cell<M>>),
    Shared(OwnedRwLockReadGuard<Cell<M>>),
    Plain(PooledConnection<M>),
}

impl<M: TransactionalManager> TxConn<M> {
    /// Whether this is the current transaction's connection (`false` for
    /// the plain checkout of [`Pool::current_or_checkout`](crate::AmbientExt::current_or_checkout)).
    pub fn in_transaction(this: &Self) -> bool {
        !matches!(this.inner, Held::Plain(_))
    }

    /// The connection, mutably; `None` for a shared guard.
    fn conn_mut(&mut self) -> Option<&mut M::Connection> {
        match &mut self.inner {
            Held::Exclusive(guard) => Some(guard.conn_mut()),
            Held::Shared(_) => None,
            Held::Plain(conn) => Some(conn),
        }
    }
}

impl<M: TransactionalManager> Deref for TxConn<M> {
    type Target = M::Connection;

    fn deref(&self) -> &M::Connection {
        match &self.inner {
            Held::Exclusive(guard) => guard.conn(),
            Held::Shared(guard) => guard.conn(),
            Held::Plain(conn) => conn,
        }
    }
}

/// `&mut *conn` is the driver's executor, for managers whose transaction
/// connection is locked exclusively (sqlx's).
impl<M: TransactionalManager + crate::driver::Exclusive> DerefMut for TxConn<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        match self.conn_mut() {
            Some(conn) => conn,
            None => unreachable!("an exclusive manager's connections are locked exclusively"),
        }
    }
}

impl<M: TransactionalManager> fmt::Debug for TxConn<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxConn")
            .field("in_transaction", &Self::in_transaction(self))
            .finish_non_exhaustive()
    }
}

/// Locks the cell as the manager's queries need.
async fn lock<M: TransactionalManager>(cell: Shared<M>) -> TxConn<M> {
    let inner = if M::SHARED_QUERIES {
        Held::Shared(cell.read_owned().await)
    } else {
        Held::Exclusive(cell.write_owned().await)
    };
    TxConn { inner }
}

/// Locks the cell of `frame`'s transaction for code running in `frame`,
/// once that code's statements land where its scope says: waits while a
/// savepoint that `frame` is not inside is open (a sibling scope's, polled
/// in the same task), since whatever is sent then falls inside it.
///
/// # Errors
///
/// [`TxError::Ended`] when `frame`'s transaction, or the savepoint it
/// runs in, has ended already (its scope was cancelled or finished while a
/// task handed it was still running).
///
/// # Cancel safety
///
/// Cancel-safe: dropping the future gives up the wait.
pub(crate) async fn lock_for<M: TransactionalManager>(
    frame: &Frame,
) -> Result<TxConn<M>, TxError<M::Error>> {
    let cell = cell_of::<M>(frame);
    let tx = &frame.tx;
    // Bounded by the savepoints that end meanwhile: each turn round waits
    // for one to end, and a scope's body can only open so many.
    loop {
        let ended = tx.savepoint_ended();
        let mut ended = std::pin::pin!(ended);
        ended.as_mut().enable();
        let conn = lock(cell.clone()).await;
        let open = match &conn.inner {
            Held::Exclusive(guard) => guard.state == State::Open,
            Held::Shared(guard) => guard.state == State::Open,
            Held::Plain(_) => true,
        };
        match tx.turn(frame.savepoint) {
            _ if !open => return Err(TxError::Ended),
            Turn::Ended => return Err(TxError::Ended),
            Turn::Go => return Ok(conn),
            Turn::Wait => {}
        }
        drop(conn);
        ended.await;
    }
}
