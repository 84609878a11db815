//! The slots the pool holds between the caller's hands and the idle stack,
//! as values whose drop makes every ending safe.
//!
//! A [`Reservation`] is a slot reserved for a connect with no connection in
//! it yet: dropping it (a cancelled or failed connect) gives the slot back.
//!
//! A [`Floating`] connection is in flight: out of the idle set and out of
//! any checkout, while the pool validates it, resets it, pings it or runs a
//! hook on it.
//!
//! Those steps are async and can be cancelled (a dropped `get()`, a runtime
//! shutting down mid-reset) or fail; [`Floating`] makes every such ending
//! safe by construction: dropping it closes the connection (it may be
//! mid-query) and frees its slot, counted under the reason it carries. Only
//! [`Floating::land`] takes the connection back out, to hand it out or
//! deliver it. The caller's guard, `PooledConnection`, thus only ever
//! returns or discards.
//!
//! Both end in the retirement sink (`retire.rs`) when dropped, and a
//! filled reservation in the delivery path (`delivery.rs`).

use std::mem::ManuallyDrop;
use std::sync::Arc;

use pool_api::ManageConnection;

use crate::engine::Engine;
use crate::slots::{Entry, Occupied, Vacant};
use crate::stats::Reason;

/// A connection the pool is working on; see the module docs.
pub(crate) struct Floating<M: ManageConnection> {
    shared: Arc<Engine<M>>,
    /// Taken only by `drop` or `land`, each of which ends the value.
    handoff: ManuallyDrop<Occupied<M::Connection>>,
    /// Why the connection is closed if this is dropped.
    reason: Reason,
}

impl<M: ManageConnection> Floating<M> {
    pub(crate) fn new(shared: Arc<Engine<M>>, h: Occupied<M::Connection>, reason: Reason) -> Self {
        Self {
            shared,
            handoff: ManuallyDrop::new(h),
            reason,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Engine<M>> {
        &self.shared
    }

    pub(crate) fn entry(&self) -> &Entry<M::Connection> {
        &self.handoff.entry
    }

    pub(crate) fn entry_mut(&mut self) -> &mut Entry<M::Connection> {
        &mut self.handoff.entry
    }

    pub(crate) fn conn_mut(&mut self) -> &mut M::Connection {
        &mut self.handoff.entry.conn
    }

    /// From now on a drop counts the close under `reason`.
    pub(crate) fn closes_as(&mut self, reason: Reason) {
        self.reason = reason;
    }

    /// The work is done and the connection is fine: takes it back.
    pub(crate) fn land(self) -> Occupied<M::Connection> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so `handoff` is taken once here
        // and `shared` is read once below; neither is used again.
        unsafe {
            let h = ManuallyDrop::take(&mut this.handoff);
            drop(std::ptr::read(&this.shared));
            h
        }
    }
}

impl<M: ManageConnection> Drop for Floating<M> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing reads `handoff` after it.
        let h = unsafe { ManuallyDrop::take(&mut self.handoff) };
        self.shared.evict(h, self.reason);
    }
}

/// A reserved slot with no connection in it yet; dropping it gives the slot
/// back (a cancelled or failed connect never leaks a slot).
pub(crate) struct Reservation<M: ManageConnection> {
    shared: Arc<Engine<M>>,
    /// `Some` until `fill` or `abandon` consumes the reservation.
    slot: Option<Vacant>,
}

impl<M: ManageConnection> Reservation<M> {
    pub(crate) fn new(shared: Arc<Engine<M>>, slot: Vacant) -> Self {
        Self {
            shared,
            slot: Some(slot),
        }
    }

    /// Gives the slot back after a failed connect that is reported to the
    /// caller (`Pool::new`), without starting another connect for it; a
    /// `close` already waiting for the slot is woken, as by any free.
    pub(crate) fn abandon(mut self) {
        if let Some(slot) = self.slot.take() {
            self.shared.give_back_slot(slot);
        }
    }

    /// Puts the new connection in service.
    pub(crate) fn fill(mut self, entry: Entry<M::Connection>) {
        if let Some(slot) = self.slot.take() {
            let h = self.shared.slots.fill(slot, entry);
            self.shared.deliver(h);
        }
    }
}

impl<M: ManageConnection> Drop for Reservation<M> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.shared.free_slot(slot);
        }
    }
}
