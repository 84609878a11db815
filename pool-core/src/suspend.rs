//! Pool suspension (HikariCP's `suspendPool` / `resumePool`), for
//! maintenance or a planned failover.
//!
//! While suspended, nothing is handed out and nothing is opened: `get()`
//! skips the idle stack and waits (within its time limit), `try_get()`
//! returns `None`, connectors and the housekeeper open nothing and the
//! housekeeper retires nothing. Connections in use keep working and come
//! back as usual: onto the idle stack, or, while callers wait, to a waiter
//! that sets it aside in the *parked* set here (marked idle) and waits
//! again, so the parked set and the stack together are the idle set.
//! `resume()` delivers the parked connections to the waiters (the longest
//! first) or the stack, and asks for the connections the waiters still
//! need. `close()` closes the parked ones with the rest.
//!
//! The flag is read once per checkout on the fast path (one Relaxed load of
//! a line that is only written by `suspend` and `resume`). Parking and
//! resuming take the set's lock, and `resume` clears the flag under it, so
//! a connection parked concurrently with `resume` is delivered, never
//! stranded.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use pool_api::ManageConnection;

use crate::engine::Engine;
use crate::slots::{Handoff, State};
use crate::stats::Reason;
use crate::sync::lock_std as lock;
use crate::sync::Ordering;

/// The suspension flag and the connections set aside while suspended.
pub(crate) struct Suspension<C> {
    /// `std`, not the loom shim: read on the fast path only to skip it;
    /// written under `parked`'s lock.
    suspended: AtomicBool,
    parked: Mutex<Vec<Handoff<C>>>,
}

impl<C> std::fmt::Debug for Suspension<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Suspension")
            .field("suspended", &self.suspended.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<C> Suspension<C> {
    pub(crate) fn new() -> Self {
        Self {
            suspended: AtomicBool::new(false),
            parked: Mutex::new(Vec::new()),
        }
    }
}

impl<M: ManageConnection> Engine<M> {
    /// Whether the pool is suspended.
    #[inline]
    pub(crate) fn is_suspended(&self) -> bool {
        // Relaxed: a hint for the fast path; the decision that matters
        // (park or hand out) is taken again under the lock.
        self.suspension().suspended.load(Ordering::Relaxed)
    }

    /// Suspends the pool (see the module docs).
    pub(crate) fn suspend(&self) {
        let _parked = lock(&self.suspension().parked);
        self.suspension().suspended.store(true, Ordering::Relaxed);
        tracing::info!(pool = self.config().name(), "pool suspended");
    }

    /// Resumes the pool: the parked connections go to the waiters or the
    /// idle stack, and the connections waiters still need are opened.
    pub(crate) fn resume(self: &Arc<Self>) {
        let parked = {
            let mut parked = lock(&self.suspension().parked);
            self.suspension().suspended.store(false, Ordering::Relaxed);
            std::mem::take(&mut *parked)
        };
        tracing::info!(pool = self.config().name(), "pool resumed");
        for h in parked {
            self.deliver(h);
        }
        self.request_connections();
    }

    /// A connection a waiter got: returned to use it, or, while suspended,
    /// parked (`None`), and the waiter waits again. After close it is
    /// closed (`None`; the waiter then finds the pool closed).
    pub(crate) fn park_if_suspended(
        self: &Arc<Self>,
        h: Handoff<M::Connection>,
    ) -> Option<Handoff<M::Connection>> {
        if !self.is_suspended() {
            return Some(h);
        }
        let mut parked = lock(&self.suspension().parked);
        if !self.suspension().suspended.load(Ordering::Relaxed) {
            return Some(h);
        }
        if self.is_closed() {
            drop(parked);
            self.evict(h, Reason::Closed);
            return None;
        }
        self.slots().slot(&h).set(State::Idle);
        parked.push(h);
        None
    }

    /// Closes the parked connections (the pool is closing).
    pub(crate) fn close_parked(self: &Arc<Self>) {
        let parked = std::mem::take(&mut *lock(&self.suspension().parked));
        for h in parked {
            self.evict(h, Reason::Closed);
        }
    }
}
