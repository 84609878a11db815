//! The return path: what happens when a guard is dropped, up to the next
//! holder.
//!
//! [`Shared::checkin`], in order: leak bookkeeping; `has_broken` closes (a
//! panic in it or in `needs_reset` closes too, so the slot is never lost);
//! an expired or soft-evicted connection is closed; a dirty one
//! (`needs_reset`), or any when an `after_release` hook runs, is reset in a
//! spawned task, in flight (`floating.rs`), before it is delivered; a clean
//! one is delivered inline.
//!
//! [`Shared::deliver`] puts a connection back in service, whether it was
//! returned, reset, pinged or newly opened: to the longest waiter while
//! callers wait (`WaiterQueue::offer`), else onto the idle stack. No lock,
//! no allocation, no task unless someone waits.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use pool_api::{ConnectionInfo, ManageConnection};

use crate::clock::Stamp;
use crate::floating::Floating;
use crate::index_stack::PushRefused;
use crate::shared::Shared;
use crate::slots::{Handoff, State};
use crate::stats::Reason;

impl<M: ManageConnection> Shared<M> {
    /// Ends the checkout bookkeeping of a connection held for `held`: the
    /// hold time histogram and the leak state.
    pub(crate) fn release_tracking(&self, h: &Handoff<M::Connection>, held: Duration) {
        if self.config().leak_detection_threshold().is_some() {
            if let Some(held) = self.slots().slot(h).leak.returned(held) {
                tracing::info!(
                    pool = self.config().name(),
                    held_ms = held.as_millis() as u64,
                    "previously reported leaked connection was returned"
                );
            }
        }
        #[cfg(feature = "metrics")]
        self.stats().hold.local().record_bucket(held);
    }

    /// Takes back a connection from a dropped guard.
    pub(crate) fn checkin(self: &Arc<Self>, mut h: Handoff<M::Connection>, checked_out_at: Stamp) {
        let now = self.clock().now();
        let held_for = now.since(checked_out_at);
        self.release_tracking(&h, held_for);
        let manager = self.manager();
        let broken = match catch_unwind(AssertUnwindSafe(|| manager.has_broken(&mut h.entry.conn)))
        {
            Ok(broken) => broken,
            Err(panic) => return self.manager_panicked(h, "has_broken", panic),
        };
        if broken {
            return self.evict(h, Reason::Broken);
        }
        if let Some(reason) = self.expired(&h.entry, now) {
            return self.evict(h, reason);
        }
        h.entry.last_used = now;
        let dirty = match catch_unwind(AssertUnwindSafe(|| manager.needs_reset(&mut h.entry.conn)))
        {
            Ok(dirty) => dirty,
            Err(panic) => return self.manager_panicked(h, "needs_reset", panic),
        };
        if !dirty && !self.has_return_hook() {
            return self.deliver(h);
        }
        // Reset (or the hook) is async: run it in a task that holds the
        // connection in flight, so a runtime shutting down mid-reset still
        // frees the slot.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                pool = self.config().name(),
                "connection needing a reset returned outside a tokio runtime; closing it"
            );
            return self.evict(h, Reason::ResetFailed);
        };
        let conn = Floating::new(self.clone(), h, Reason::ResetFailed);
        runtime.spawn(reset_then_deliver(conn, dirty, held_for));
    }

    /// Puts a connection the caller owns back in service: to the longest
    /// waiter, else on top of the idle stack. Lock-free unless someone is
    /// waiting.
    pub(crate) fn deliver(self: &Arc<Self>, mut h: Handoff<M::Connection>) {
        let slots = self.slots();
        loop {
            // Callers queued (the bit is only a hint here; `offer` decides
            // under the queue's lock): hand the connection straight over,
            // without parking it in the slot and taking it back.
            if slots.has_waiters() {
                // Marked in use before the waiter can see it; a returned
                // connection already is, and its slot's line stays clean.
                slots.slot(&h).mark(State::InUse);
                match self.waiters().offer(|| slots.clear_waiting(), h) {
                    Ok(()) => return,
                    // The queue emptied meanwhile and the bit is cleared.
                    Err(back) => h = back,
                }
            }
            match slots.push_idle(h) {
                Ok(()) => return,
                Err((PushRefused::Closed, back)) => return self.evict(back, Reason::Closed),
                // Refused for waiters that queued since the check: loop to
                // hand it over.
                Err((PushRefused::Waiters, back)) => h = back,
            }
        }
    }

    /// A manager check panicked on a returned connection: closes it (its
    /// state is unknown) and frees its slot, then lets the panic go on,
    /// unless the thread is already unwinding (the guard was dropped by a
    /// panic in the caller's code), where a second panic would abort the
    /// process: then it is only logged.
    #[cold]
    fn manager_panicked(
        self: &Arc<Self>,
        h: Handoff<M::Connection>,
        what: &'static str,
        panic: Box<dyn Any + Send>,
    ) {
        tracing::error!(
            pool = self.config().name(),
            "the manager's {what} panicked on a returned connection; closing it"
        );
        self.evict(h, Reason::Broken);
        if !std::thread::panicking() {
            resume_unwind(panic);
        }
    }
}

/// Resets a returned connection and runs the `after_release` hook, then
/// delivers it; any failure drops `conn`, which closes it.
async fn reset_then_deliver<M: ManageConnection>(
    mut conn: Floating<M>,
    dirty: bool,
    held_for: Duration,
) {
    let shared = conn.shared().clone();
    let limit = shared.config().validation_timeout();
    let name = shared.config().name();
    if dirty {
        match tokio::time::timeout(limit, shared.manager().reset(conn.conn_mut())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(pool = name, error = %e, "reset failed; closing connection");
                return; // `conn` closes it (ResetFailed)
            }
            Err(_) => {
                tracing::warn!(pool = name, timeout = ?limit, "reset timed out; closing connection");
                return;
            }
        }
    }
    if let Some(hooks) = shared.return_hook() {
        let info = ConnectionInfo::new(
            shared.clock().now().since(conn.entry().created_at),
            held_for,
        );
        conn.closes_as(Reason::Hook);
        match tokio::time::timeout(limit, hooks.after_release(conn.conn_mut(), info)).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return,
            Ok(Err(e)) => {
                tracing::warn!(pool = name, error = %e, "after_release hook failed; closing connection");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    pool = name,
                    "after_release hook timed out; closing connection"
                );
                return;
            }
        }
    }
    shared.deliver(conn.land());
}
