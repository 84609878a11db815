//! The sink every ending of a connection runs into: `evict` closes a
//! connection (with the manager's `close` in a task of its own when it
//! [awaits it](ManageConnection::awaits_close)) and frees its slot, and
//! `free_slot` is the one way a slot is given back (`give_back_slot`,
//! without asking for a replacement). A freed slot of an open pool asks
//! for a connection (`request_connections`, `connect.rs`), which only
//! starts connector tasks; nothing here delivers, checks or hands out.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use pool_api::ManageConnection;

use super::Engine;
use crate::slots::{Occupied, Vacant};
use crate::stats::Reason;
use crate::sync::{fence, Ordering};

impl<M: ManageConnection> Engine<M> {
    /// Gives a slot back. Called after the connection in it was dropped and
    /// uncounted, so the bound counts the closing connection until it is
    /// really gone. A pool still open asks for a connection for it.
    pub(crate) fn free_slot(self: &Arc<Self>, slot: Vacant) {
        if !self.give_back_slot(slot) {
            self.request_connections();
        }
    }

    /// Gives a slot back without asking for a connection for it (`Pool::new`
    /// failing: a refill would only delay its error), else exactly as
    /// [`free_slot`](Self::free_slot): after close, `close` is woken. Every
    /// free of a slot goes through here. True if the pool is closed.
    pub(crate) fn give_back_slot(&self, slot: Vacant) -> bool {
        let closed = self.release_slot(slot);
        if closed {
            self.drained.notify_waiters();
        }
        closed
    }

    /// The synchronous half of [`give_back_slot`](Self::give_back_slot):
    /// frees the slot and says whether the pool is closed, in which case
    /// `close` may be waiting for this very slot and must be woken.
    ///
    /// The free and `close` are a store-buffering pair: each writes one
    /// word (`open` here, `CLOSED` there) and then reads the other's. With
    /// plain loads both could read the old value, and `close` would sleep
    /// on a count that already reached zero while the free takes the
    /// branch that wakes nobody.
    pub(crate) fn release_slot(&self, slot: Vacant) -> bool {
        self.slots.free(slot);
        // SeqCst: pairs with the fence in `drained_now` (close's side), so
        // either this load sees `CLOSED` or close's load of `open` sees
        // this free (`loom_free_races_close`).
        fence(Ordering::SeqCst);
        self.is_closed()
    }

    /// Whether every slot is free, read after a SeqCst fence that pairs
    /// with [`release_slot`](Self::release_slot)'s: `close` calls it after
    /// setting `CLOSED` and arming its wake-up.
    pub(crate) fn drained_now(&self) -> bool {
        // SeqCst: see `release_slot`.
        fence(Ordering::SeqCst);
        self.slots.open() == 0
    }

    /// Closes a connection the caller owns and frees its slot.
    pub(crate) fn evict(self: &Arc<Self>, h: Occupied<M::Connection>, reason: Reason) {
        tracing::debug!(
            pool = self.config.name(),
            reason = reason.label(),
            "closing connection"
        );
        let (slot, entry) = h.vacate();
        self.stats.evicted(reason);
        #[cfg(feature = "metrics")]
        self.export.evicted(reason);
        self.close_in_slot(slot, entry.conn);
    }

    /// Closes `conn` and then frees `slot`. With a manager that
    /// [`awaits_close`](ManageConnection::awaits_close), the close runs in
    /// a task of its own, bounded by `validation_timeout`, and the slot
    /// stays taken (counted in the bound) until it ends: the server never
    /// holds more of the pool's sessions than `max_size` while a
    /// replacement opens. Outside a runtime, or with the
    /// default manager method, the connection is dropped and the slot
    /// freed at once.
    fn close_in_slot(self: &Arc<Self>, slot: Vacant, conn: M::Connection) {
        #[cfg(not(loom))]
        if self.manager.awaits_close() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                // Frees the slot when dropped: after the close, or with the
                // task if the runtime shuts down first.
                self.slots.mark_closing(&slot);
                let closing = Closing {
                    shared: self.clone(),
                    slot: Some(slot),
                };
                runtime.spawn(async move {
                    let shared = &closing.shared;
                    let limit = shared.config.validation_timeout();
                    if tokio::time::timeout(limit, shared.manager.close(conn))
                        .await
                        .is_err()
                    {
                        tracing::debug!(
                            pool = shared.config.name(),
                            "closing a connection took longer than validation_timeout; dropped"
                        );
                    }
                    drop(closing);
                });
                return;
            }
        }
        // A connection whose `Drop` panics still gives its slot back: the
        // slot is freed before the panic goes on (it is gone either way).
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(conn)));
        self.free_slot(slot);
        if let Err(panic) = dropped {
            tracing::error!(
                pool = self.config.name(),
                "a connection panicked while being dropped; its slot is freed"
            );
            if !std::thread::panicking() {
                resume_unwind(panic);
            }
        }
    }
}

/// A slot whose connection is being closed in a task of its own
/// (`close_in_slot`): freed when dropped, after the close or with the task
/// if its runtime shuts down first.
#[cfg(not(loom))]
struct Closing<M: ManageConnection> {
    shared: Arc<Engine<M>>,
    /// `Some` until the drop frees it.
    slot: Option<Vacant>,
}

#[cfg(not(loom))]
impl<M: ManageConnection> Drop for Closing<M> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.shared.free_slot(slot);
        }
    }
}
