//! The guard a caller holds while using a connection.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::clock::Stamp;
use crate::shared::Shared;
use crate::slots::Handoff;
use crate::stats::Reason;
use pool_api::ManageConnection;

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
    shared: Arc<Shared<M>>,
    /// The connection and its slot. Taken only by `drop` or `detach`, each
    /// of which ends the guard.
    handoff: ManuallyDrop<Handoff<M::Connection>>,
    checked_out_at: Stamp,
    /// Set by `discard`: close instead of returning.
    discard: bool,
}

impl<M: ManageConnection> std::fmt::Debug for PooledConnection<M>
where
    M::Connection: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledConnection")
            .field("pool", &self.shared.config().name())
            .field("slot", &self.handoff.index())
            .field("conn", &self.handoff.entry.conn)
            .finish()
    }
}

impl<M: ManageConnection> PooledConnection<M> {
    pub(crate) fn new(shared: Arc<Shared<M>>, h: Handoff<M::Connection>, now: Stamp) -> Self {
        Self {
            shared,
            handoff: ManuallyDrop::new(h),
            checked_out_at: now,
            discard: false,
        }
    }

    /// Closes the connection instead of returning it; its slot is freed and
    /// a waiter, if any, gets a new connection.
    pub fn discard(mut self) {
        self.discard = true;
    }

    /// Takes the connection out of the pool. Its slot is freed (a waiter, if
    /// any, gets a new connection) and the pool forgets it: closing it is
    /// now the caller's business.
    pub fn detach(self) -> M::Connection {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so `handoff` and `shared` are
        // each taken once here and not used again.
        let (h, shared) = unsafe {
            (
                ManuallyDrop::take(&mut this.handoff),
                std::ptr::read(&this.shared),
            )
        };
        shared.release_tracking(&h, shared.clock().now().since(this.checked_out_at));
        let (slot, entry) = h.vacate();
        shared.free_slot(slot);
        entry.conn
    }
}

impl<M: ManageConnection> Deref for PooledConnection<M> {
    type Target = M::Connection;

    fn deref(&self) -> &M::Connection {
        &self.handoff.entry.conn
    }
}

impl<M: ManageConnection> DerefMut for PooledConnection<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self.handoff.entry.conn
    }
}

impl<M: ManageConnection> Drop for PooledConnection<M> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing reads `handoff` after it.
        let h = unsafe { ManuallyDrop::take(&mut self.handoff) };
        if self.discard {
            let held = self.shared.clock().now().since(self.checked_out_at);
            self.shared.release_tracking(&h, held);
            self.shared.evict(h, Reason::Closed);
        } else {
            self.shared.checkin(h, self.checked_out_at);
        }
    }
}
