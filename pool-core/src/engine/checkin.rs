//! The guard a caller holds while using a connection, and the return path
//! its drop starts.
//!
//! [`PooledConnection`] derefs to the connection; dropping it calls
//! [`Engine::checkin`], in order: leak bookkeeping; `has_broken` closes (a
//! panic in it or in `needs_reset` closes too, so the slot is never lost);
//! an expired or soft-evicted connection is closed; a dirty one
//! (`needs_reset`), or any when an `after_release` hook runs, is reset in a
//! spawned task (`returning.rs`), before it is delivered; a clean
//! one is delivered inline.
//!
//! A clean return goes to `deliver_held`: with nobody waiting, parked in
//! place for this thread (`parking.rs`) or pushed on the idle stack; else
//! the delivery path (`delivery.rs`) hands it to the longest waiter.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use pool_api::ManageConnection;

use crate::clock::Stamp;
use crate::engine::in_flight::Floating;
use crate::engine::returning::Returning;
use crate::engine::Engine;
use crate::index_stack::PushRefused;
use crate::slots::{Held, Occupied, Slot};
use crate::stats::Reason;

/// A connection checked out of a [`Pool`](crate::Pool).
///
/// Derefs (mutably) to the manager's connection. Dropping it returns the
/// connection to the pool: a broken one is closed, a dirty one
/// (`needs_reset`) is reset before anyone else can get it, a clean one is
/// handed to the longest waiter or put back on the idle stack, without a
/// lock or a task spawn. [`PooledConnection::discard`] closes it instead
/// and [`PooledConnection::detach`] takes it out of the pool. Both are
/// associated functions (`PooledConnection::detach(conn)`, as
/// `Arc::strong_count` is), so that a connection's own method of the same
/// name is what `conn.detach()` calls.
///
/// A panic while holding the guard drops it as usual: the slot is never
/// lost.
///
/// # Thread safety
///
/// The guard is `Send` when the connection is, and `Sync` only when the
/// connection is `Sync`: a shared `&PooledConnection` gives `&M::Connection`
/// to every thread that has it. A connection that is `Send` but not `Sync`
/// (one with a `Cell` inside) therefore cannot be used from two threads
/// through one guard:
///
/// ```compile_fail
/// use std::cell::Cell;
/// use pool_core::{async_trait, ManageConnection, PooledConnection};
///
/// #[derive(Debug)]
/// struct Cells;
///
/// #[async_trait]
/// impl ManageConnection for Cells {
///     type Connection = Cell<u64>;
///     type Error = std::io::Error;
///     async fn connect(&self) -> Result<Cell<u64>, std::io::Error> {
///         Ok(Cell::new(0))
///     }
///     async fn is_valid(&self, _: &mut Cell<u64>) -> Result<(), std::io::Error> {
///         Ok(())
///     }
/// }
///
/// fn shared_between_threads<T: Sync>() {}
/// shared_between_threads::<PooledConnection<Cells>>(); // error: `Cell<u64>` is not `Sync`
/// ```
#[must_use = "dropping the guard returns the connection to the pool at once"]
pub struct PooledConnection<M: ManageConnection> {
    /// The guard's count of the pool. Dropped by `drop`, unless the
    /// connection is parked in its slot, which then keeps the count for
    /// the next checkout (`slots/parked.rs`, "The pool's reference").
    shared: ManuallyDrop<Arc<Engine<M>>>,
    /// The slot, whose connection is used in place: checkout and return
    /// move this token, not the connection. Taken only by `drop` or
    /// `detach`, each of which ends the guard.
    held: ManuallyDrop<Held>,
    checked_out_at: Stamp,
    /// Set by `discard`: close instead of returning.
    discard: bool,
    /// The guard hands out `&M::Connection` through `Deref`, so it may be
    /// shared between threads only when the connection may: this makes it
    /// `Sync` exactly when `M::Connection: Sync` (and `Send` when it is
    /// `Send`), whatever the pool's own types are. The engine's `Slots` is
    /// `Sync` for any `Send` connection because it never hands out a
    /// shared reference itself; the guard does.
    _conn: PhantomData<M::Connection>,
}

impl<M: ManageConnection> std::fmt::Debug for PooledConnection<M>
where
    M::Connection: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledConnection")
            .field("pool", &self.shared.config.name())
            .field("slot", &self.held.index())
            .field("conn", &**self)
            .finish()
    }
}

impl<M: ManageConnection> PooledConnection<M> {
    #[inline]
    pub(crate) fn new(shared: Arc<Engine<M>>, held: Held, now: Stamp) -> Self {
        Self {
            shared: ManuallyDrop::new(shared),
            held: ManuallyDrop::new(held),
            checked_out_at: now,
            discard: false,
            _conn: PhantomData,
        }
    }

    /// Closes the connection instead of returning it; its slot is freed and
    /// a waiter, if any, gets a new connection.
    ///
    /// An associated function (`PooledConnection::discard(conn)`), so that
    /// it never hides a method of the connection.
    pub fn discard(mut this: Self) {
        this.discard = true;
    }

    /// Takes the connection out of the pool. Its slot is freed (a waiter, if
    /// any, gets a new connection) and the pool forgets it: closing it is
    /// now the caller's business.
    ///
    /// An associated function (`PooledConnection::detach(conn)`), so that
    /// it never hides a method of the connection.
    #[must_use = "dropping the detached connection closes it; `PooledConnection::discard` says so"]
    pub fn detach(this: Self) -> M::Connection {
        let mut this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so `held` and `shared` are
        // each taken once here and not used again.
        let (held, shared) = unsafe {
            (
                ManuallyDrop::take(&mut this.held),
                ManuallyDrop::take(&mut this.shared),
            )
        };
        let held_for = shared.clock.now().since(this.checked_out_at);
        shared.release_tracking(shared.slots.held_slot(&held), held_for);
        let (slot, entry) = shared.slots.take_held(held).vacate();
        shared.free_slot(slot);
        entry.conn
    }
}

impl<M: ManageConnection> Deref for PooledConnection<M> {
    type Target = M::Connection;

    #[inline]
    fn deref(&self) -> &M::Connection {
        &self.shared.slots.entry(&self.held).conn
    }
}

impl<M: ManageConnection> DerefMut for PooledConnection<M> {
    #[inline]
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self.shared.slots.entry_mut(&mut self.held).conn
    }
}

impl<M: ManageConnection> Drop for PooledConnection<M> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing reads `held` or `shared`
        // after it. The count is a local from here on, so a panic in the
        // manager's checks (which `checkin` passes on) drops it on the way
        // out instead of leaking the pool.
        let (held, count) = unsafe {
            (
                ManuallyDrop::take(&mut self.held),
                ManuallyDrop::take(&mut self.shared),
            )
        };
        if self.discard {
            let slots = &count.slots;
            let held_for = count.clock.now().since(self.checked_out_at);
            count.release_tracking(slots.held_slot(&held), held_for);
            count.evict(slots.take_held(held), Reason::Closed);
        } else if let Some(index) = count.checkin(held, self.checked_out_at) {
            // Parked in its slot: pass this guard's count to the slot. Once
            // `publish` succeeds a claimer may release the count and the
            // pool be freed, so it is the last touch of the pool here, and
            // no reference into it but the state word lives across it
            // (`checkin`'s frames have returned); `forget` then only drops
            // the pointer.
            if crate::slots::publish(count.slots.state_of(index)) {
                std::mem::forget(count);
            }
        }
    }
}

impl<M: ManageConnection> Engine<M> {
    /// Ends the checkout bookkeeping of a connection held for `held`: its
    /// holder site (one store), the hold time histogram and the leak state.
    pub(crate) fn release_tracking(&self, slot: &Slot<M::Connection>, held: Duration) {
        let leak = &slot.leak;
        if self.config.leak_detection_threshold().is_none() {
            leak.release();
        } else {
            let reported = leak.release_tracked();
            if self.config.leak_detection_backtrace() {
                leak.returned();
            }
            if reported {
                tracing::info!(
                    pool = self.config.name(),
                    held_ms = held.as_millis() as u64,
                    "previously reported leaked connection was returned"
                );
            }
        }
        #[cfg(feature = "metrics")]
        self.stats.hold.local().record_bucket(held);
    }

    /// Takes back a connection from a dropped guard; a clean one is
    /// checked and parked in place, without leaving its slot. `Some(index)`
    /// when it was parked in its own slot for this thread (`affinity.rs`):
    /// the guard ends the park with `publish`.
    pub(crate) fn checkin(self: &Arc<Self>, mut held: Held, checked_out_at: Stamp) -> Option<u16> {
        let now = self.clock.now();
        let held_for = now.since(checked_out_at);
        let slots = &self.slots;
        self.release_tracking(slots.held_slot(&held), held_for);
        let manager = &self.manager;
        let broken = match self.is_broken(&mut slots.entry_mut(&mut held).conn, now) {
            Ok(broken) => broken,
            Err(panic) => {
                self.manager_panicked(slots.take_held(held), "has_broken", panic);
                return None;
            }
        };
        if broken {
            self.evict(slots.take_held(held), Reason::Broken);
            return None;
        }
        if let Some(reason) = self.expired(slots.entry(&held), now) {
            self.evict(slots.take_held(held), reason);
            return None;
        }
        let entry = slots.entry_mut(&mut held);
        entry.last_used = now;
        entry.fresh = false;
        entry.from_connect = false;
        let dirty = match catch_unwind(AssertUnwindSafe(|| {
            manager.needs_reset(&mut slots.entry_mut(&mut held).conn)
        })) {
            Ok(dirty) => dirty,
            Err(panic) => {
                self.manager_panicked(slots.take_held(held), "needs_reset", panic);
                return None;
            }
        };
        if !dirty && !self.hook_at_return {
            return self.deliver_held(held);
        }
        let h = slots.take_held(held);
        // Reset (or the hook) is async: run it in a task that holds the
        // connection in flight, so a runtime shutting down mid-reset still
        // frees the slot.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                pool = self.config.name(),
                "connection needing a reset returned outside a tokio runtime; closing it"
            );
            self.evict(h, Reason::ResetFailed);
            return None;
        };
        let conn = Floating::new(self.clone(), h, Reason::ResetFailed);
        // Counted as supply from before the spawn (`returning.rs`, "On the
        // way back"): a caller queuing now waits for it, not a connect.
        let supply = Returning::new(self.clone());
        runtime.spawn(super::returning::reset_then_deliver(
            conn, supply, dirty, held_for,
        ));
        None
    }

    /// [`deliver_in_place`](Self::deliver_in_place) for a returned
    /// connection: with nobody waiting, it is parked without moving.
    /// `Some(index)` when parked for this thread, to be published
    /// (`park_returned`).
    #[inline]
    fn deliver_held(self: &Arc<Self>, held: Held) -> Option<u16> {
        let slots = &self.slots;
        // Callers queued, or over the bound after a shrink (`deliver`
        // retires it): the slow path.
        if !slots.has_waiters() && !slots.over_limit() {
            // Parked for this thread (`affinity.rs`).
            if slots.affinity() {
                return self.park_returned(held);
            }
            match slots.push_held(held) {
                Ok(()) => {}
                Err((PushRefused::Closed, back)) => {
                    self.evict(slots.take_held(back), Reason::Closed);
                }
                // Callers queued since the check: hand it over.
                Err((PushRefused::Waiters, back)) => self.deliver_in_place(back),
            }
            return None;
        }
        self.deliver_in_place(held);
        None
    }

    /// A manager check panicked on a returned connection: closes it (its
    /// state is unknown) and frees its slot, then lets the panic go on,
    /// unless the thread is already unwinding (the guard was dropped by a
    /// panic in the caller's code), where a second panic would abort the
    /// process: then it is only logged.
    #[cold]
    fn manager_panicked(
        self: &Arc<Self>,
        h: Occupied<M::Connection>,
        what: &'static str,
        panic: Box<dyn Any + Send>,
    ) {
        tracing::error!(
            pool = self.config.name(),
            "the manager's {what} panicked on a returned connection; closing it"
        );
        self.evict(h, Reason::Broken);
        if !std::thread::panicking() {
            resume_unwind(panic);
        }
    }
}
