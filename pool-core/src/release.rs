//! The return path: what happens when a guard is dropped.
//!
//! In order: leak bookkeeping; `has_broken` closes (a panic in it or in
//! `needs_reset` closes too, so the slot is never lost); an expired or
//! soft-evicted connection is closed; a dirty one (`needs_reset`), or any
//! when an `after_release` hook is set, is reset in a spawned task before it
//! is delivered; a clean one is delivered inline (`Shared::deliver`): no
//! lock, no allocation, no task.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::clock::Stamp;
use crate::connection::{OnDrop, PooledConnection};
use crate::shared::Shared;
use crate::slots::Entry;
use crate::stats::Reason;
use pool_api::{ConnectionInfo, ManageConnection};
use std::sync::Arc;

impl<M: ManageConnection> Shared<M> {
    /// Ends the checkout bookkeeping of a slot held for `held`: the hold
    /// time histogram and the leak state.
    pub(crate) fn release_tracking(&self, index: u16, held: Duration) {
        if self.config.leak_detection_threshold().is_some() {
            if let Some(held) = self.slots.get(index).leak.returned(held) {
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

    /// Forgets an in-use connection the caller took away (`detach`).
    pub(crate) fn forget(self: &Arc<Self>, index: u16) {
        self.free_slot(index);
    }

    /// Takes back a connection from a dropped guard.
    pub(crate) fn checkin(
        self: &Arc<Self>,
        index: u16,
        mut entry: Entry<M::Connection>,
        checked_out_at: Stamp,
    ) {
        let now = self.clock.now();
        let held_for = now.since(checked_out_at);
        self.release_tracking(index, held_for);
        let broken = match catch_unwind(AssertUnwindSafe(|| {
            self.manager.has_broken(&mut entry.conn)
        })) {
            Ok(broken) => broken,
            Err(panic) => return self.manager_panicked(index, entry, "has_broken", panic),
        };
        if broken {
            return self.evict(index, entry, Reason::Broken);
        }
        if let Some(reason) = self.expired(&entry, now) {
            return self.evict(index, entry, reason);
        }
        entry.last_used = now;
        let dirty = match catch_unwind(AssertUnwindSafe(|| {
            self.manager.needs_reset(&mut entry.conn)
        })) {
            Ok(dirty) => dirty,
            Err(panic) => return self.manager_panicked(index, entry, "needs_reset", panic),
        };
        if !dirty && self.hooks.is_none() {
            return self.deliver(index, entry);
        }
        // Reset (or the hook) is async: run it in a task that owns the
        // connection through a guard whose drop closes it, so a runtime
        // shutting down mid-reset still frees the slot.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                pool = self.config.name(),
                "connection needing a reset returned outside a tokio runtime; closing it"
            );
            return self.evict(index, entry, Reason::ResetFailed);
        };
        let guard = PooledConnection::new(
            self.clone(),
            index,
            entry,
            now,
            OnDrop::Close(Reason::ResetFailed),
        );
        runtime.spawn(reset_then_deliver(guard, dirty, held_for));
    }
}

impl<M: ManageConnection> Shared<M> {
    /// A manager check panicked on a returned connection: closes it (its
    /// state is unknown) and frees its slot, then lets the panic go on,
    /// unless the thread is already unwinding (the guard was dropped by a
    /// panic in the caller's code), where a second panic would abort the
    /// process: then it is only logged.
    #[cold]
    fn manager_panicked(
        self: &Arc<Self>,
        index: u16,
        entry: Entry<M::Connection>,
        what: &'static str,
        panic: Box<dyn Any + Send>,
    ) {
        tracing::error!(
            pool = self.config.name(),
            "the manager's {what} panicked on a returned connection; closing it"
        );
        self.evict(index, entry, Reason::Broken);
        if !std::thread::panicking() {
            resume_unwind(panic);
        }
    }
}

async fn reset_then_deliver<M: ManageConnection>(
    mut guard: PooledConnection<M>,
    dirty: bool,
    held_for: Duration,
) {
    let shared = guard.shared.clone();
    let limit = shared.config.validation_timeout();
    let name = shared.config.name();
    if dirty {
        match tokio::time::timeout(limit, shared.manager.reset(&mut guard)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(pool = name, error = %e, "reset failed; closing connection");
                return; // the guard closes it (ResetFailed)
            }
            Err(_) => {
                tracing::warn!(pool = name, timeout = ?limit, "reset timed out; closing connection");
                return;
            }
        }
    }
    if let Some(hooks) = &shared.hooks {
        let info =
            ConnectionInfo::new(shared.clock.now().since(guard.entry().created_at), held_for);
        guard.on_drop = OnDrop::Close(Reason::Hook);
        match tokio::time::timeout(limit, hooks.after_release(&mut guard, info)).await {
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
    let entry = guard.take_entry();
    shared.deliver(guard.index, entry);
}
