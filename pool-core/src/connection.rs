//! The guard a caller holds while using a connection.

use std::ops::{Deref, DerefMut};

use crate::clock::Stamp;
use crate::shared::Shared;
use crate::slots::Entry;
use crate::stats::Reason;
use pool_api::ManageConnection;
use std::sync::Arc;

/// What dropping the guard does with the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDrop {
    /// Give it back to the pool (checked, reset if dirty).
    Return,
    /// The caller discarded it: end the checkout and close it.
    Discard,
    /// Close it: dropped while the pool was still checking or resetting it,
    /// outside any checkout.
    Close(Reason),
}

/// A connection checked out of a [`Pool`](crate::Pool).
///
/// Derefs (mutably) to the manager's connection. Dropping it returns the
/// connection to the pool: a broken one is closed, a dirty one
/// (`needs_reset`) is reset before anyone else can get it, a clean one is
/// handed to the longest waiter or put back on the idle stack, without a
/// lock or a task spawn. [`discard`](Self::discard) closes it instead and
/// [`detach`](Self::detach) takes it out of the pool.
///
/// A panic while holding the guard drops it as usual: the slot is never
/// lost.
pub struct PooledConnection<M: ManageConnection> {
    pub(crate) shared: Arc<Shared<M>>,
    pub(crate) index: u16,
    /// `Some` until the guard gives the connection away.
    entry: Option<Entry<M::Connection>>,
    pub(crate) checked_out_at: Stamp,
    pub(crate) on_drop: OnDrop,
}

impl<M: ManageConnection> std::fmt::Debug for PooledConnection<M>
where
    M::Connection: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledConnection")
            .field("pool", &self.shared.config.name())
            .field("slot", &self.index)
            .field("conn", &self.entry.as_ref().map(|e| &e.conn))
            .finish()
    }
}

impl<M: ManageConnection> PooledConnection<M> {
    pub(crate) fn new(
        shared: Arc<Shared<M>>,
        index: u16,
        entry: Entry<M::Connection>,
        now: Stamp,
        on_drop: OnDrop,
    ) -> Self {
        Self {
            shared,
            index,
            entry: Some(entry),
            checked_out_at: now,
            on_drop,
        }
    }

    pub(crate) fn entry(&self) -> &Entry<M::Connection> {
        match &self.entry {
            Some(e) => e,
            None => unreachable!("a live guard always holds its connection"),
        }
    }

    fn entry_mut(&mut self) -> &mut Entry<M::Connection> {
        match &mut self.entry {
            Some(e) => e,
            None => unreachable!("a live guard always holds its connection"),
        }
    }

    /// Takes the entry out, leaving the guard inert; the caller now owns the
    /// slot.
    pub(crate) fn take_entry(&mut self) -> Entry<M::Connection> {
        match self.entry.take() {
            Some(e) => e,
            None => unreachable!("a live guard always holds its connection"),
        }
    }

    /// Closes the connection instead of returning it; its slot is freed and
    /// a waiter, if any, gets a new connection.
    pub fn discard(mut self) {
        self.on_drop = OnDrop::Discard;
    }

    /// Takes the connection out of the pool. Its slot is freed (a waiter, if
    /// any, gets a new connection) and the pool forgets it: closing it is
    /// now the caller's business.
    pub fn detach(mut self) -> M::Connection {
        let entry = self.take_entry();
        self.shared.release_tracking(
            self.index,
            self.shared.clock.now().since(self.checked_out_at),
        );
        self.shared.forget(self.index);
        entry.conn
    }
}

impl<M: ManageConnection> Deref for PooledConnection<M> {
    type Target = M::Connection;

    fn deref(&self) -> &M::Connection {
        &self.entry().conn
    }
}

impl<M: ManageConnection> DerefMut for PooledConnection<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self.entry_mut().conn
    }
}

impl<M: ManageConnection> Drop for PooledConnection<M> {
    fn drop(&mut self) {
        let Some(entry) = self.entry.take() else {
            return;
        };
        match self.on_drop {
            OnDrop::Return => self.shared.checkin(self.index, entry, self.checked_out_at),
            OnDrop::Discard => {
                self.shared.release_tracking(
                    self.index,
                    self.shared.clock.now().since(self.checked_out_at),
                );
                self.shared.evict(self.index, entry, Reason::Closed);
            }
            OnDrop::Close(reason) => self.shared.evict(self.index, entry, reason),
        }
    }
}
