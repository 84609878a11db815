//! The checkout path: `get()` and `try_get()`.
//!
//! Fast path (`acquire`): claim a connection this thread parked (one CAS
//! on its slot) or pop the idle stack (one CAS on the stack word), check
//! its expiry and `has_broken`, skip validation inside the bypass window,
//! hand out a guard (`hand_out`). Slow path (`acquire_slow`): queue as a
//! waiter (`waiters.rs`), which asks for connections, wait for a handoff
//! until the deadline, and run the checkout checks (`checks.rs`).

use std::panic::Location;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use pool_api::{ManageConnection, PoolError, TimeoutPhase};

use super::checks::{Refused, Vetted};
use super::{Engine, PooledConnection};
use crate::clock::Stamp;
use crate::index_stack::{Popped, CLOSED, WAITERS};
use crate::slots::Held;
use crate::stats::Reason;
use crate::waiters::{Handed, WaitHost, Waiter, WaiterQueue};

/// A waiter queues in the pool's queue, asks for connections once queued,
/// and passes on a connection it was handed but left without. What is
/// handed over is the slot's `Held` token: the connection stays in its
/// slot from the return (or the connect) to the waiter's guard.
impl<M: ManageConnection> WaitHost<Held> for Arc<Engine<M>> {
    fn queue(&self) -> &WaiterQueue<Held> {
        &self.waiters
    }

    fn flag_waiting(&self) -> Result<(), Handed<Held>> {
        match self.slots.mark_waiting() {
            Ok(()) => Ok(()),
            Err((Popped::Node(h), counted)) => {
                // The caller's `get()` holds a `Pool` handle.
                self.release_parked_counts(usize::from(counted));
                Err(Handed::Value(h))
            }
            Err(_) => Err(Handed::Closed),
        }
    }

    fn unflag_waiting(&self) {
        self.slots.clear_waiting();
    }

    fn queued(&self, rearm: bool) {
        // Whether or not the deadline is earlier than the armed one: the
        // sweeper that armed it may have ended with its runtime.
        self.sweeper.ensure(self);
        if rearm {
            self.sweeper.rearm();
        }
        self.request_connections();
    }

    fn orphaned(&self, h: Held) {
        self.deliver_in_place(h);
    }
}

impl<M: ManageConnection> Engine<M> {
    /// An idle connection for the fast path, counted in use and left in
    /// its slot: one this thread parked, most recent first, else the top of
    /// the idle stack. With it, the pool's count the parked slot carried
    /// (`slots/parked.rs`, "The pool's reference"): the guard's reference,
    /// taken over without touching the count.
    #[inline]
    pub(crate) fn claim_or_pop(self: &Arc<Self>) -> (Popped<Held>, Option<Arc<Self>>) {
        let slots = &self.slots;
        if slots.affinity() {
            if let Some((held, counted)) = self.affinity.pop_parked(&self.slots) {
                return self.recalled(held, counted.then(|| self.adopt_parked_count()));
            }
        }
        (slots.pop_held(), None)
    }

    /// [`claim_or_pop`](Self::claim_or_pop), and when the stack is empty with
    /// nobody waiting, any connection parked by another thread
    /// (`try_get`: every idle connection counts).
    pub(crate) fn claim_or_pop_any(self: &Arc<Self>) -> (Popped<Held>, Option<Arc<Self>>) {
        let slots = &self.slots;
        match self.claim_or_pop() {
            (Popped::Empty, _) if slots.affinity() => match slots.claim_parked() {
                Some((h, counted)) => (Popped::Node(h), counted.then(|| self.adopt_parked_count())),
                None => (Popped::Empty, None),
            },
            popped => popped,
        }
    }

    /// The pool's count that a claimed `Parked` slot carried, as an `Arc`.
    #[inline]
    fn adopt_parked_count(self: &Arc<Self>) -> Arc<Self> {
        // SAFETY: the claim that reported the count made it the caller's
        // (`Slots::claim`): the parking guard's count, left in the slot by
        // `publish` instead of being dropped. Rebuilding the `Arc` from the
        // pointer takes it over; the caller's own `Arc` is untouched.
        unsafe { Arc::from_raw(Arc::as_ptr(self)) }
    }

    /// A connection claimed from this thread's list, unless the pool closed
    /// (closed, and the checkout fails) or callers queued (handed to them,
    /// and the checkout queues behind them) meanwhile; `lease` is dropped
    /// then (the caller holds a `Pool` handle, so that never frees it).
    #[inline]
    fn recalled(
        self: &Arc<Self>,
        held: Held,
        lease: Option<Arc<Self>>,
    ) -> (Popped<Held>, Option<Arc<Self>>) {
        let slots = &self.slots;
        // Relaxed: a check, as the stack's pop makes; the word is written
        // only when the pool closes or callers queue, so this line is read
        // from this core's cache.
        let flags = slots.stack_flags();
        if flags & CLOSED != 0 {
            self.evict(slots.take_held(held), Reason::Closed);
            return (Popped::Closed, None);
        }
        if flags & WAITERS != 0 {
            self.deliver_in_place(held);
            return (Popped::Waiters, None);
        }
        (Popped::Node(held), lease)
    }

    /// Pops an idle connection, counted in use.
    #[inline]
    fn pop_for_handoff(&self) -> Result<Option<Held>, PoolError<M::Error>> {
        match self.slots.pop_held() {
            Popped::Node(h) => Ok(Some(h)),
            Popped::Empty | Popped::Waiters => Ok(None),
            Popped::Closed => Err(PoolError::Closed),
        }
    }

    /// Waits for a handoff until `deadline`.
    async fn wait_for(
        self: &Arc<Self>,
        started: Stamp,
        deadline: Option<Stamp>,
    ) -> Result<Held, PoolError<M::Error>> {
        self.ensure_housekeeper();
        loop {
            // Connects are failing and a connector sleeps out its
            // back-off: wake it to try at once for this caller, which
            // queues for that attempt (a refused connect fails it within a
            // connect's time when the database is down, a success serves
            // it). The back-off paces attempts nobody waits for, never a
            // caller: the first `get()` after the database is back
            // succeeds.
            let woke = self.health.wake_pacing();
            // Known down (fail fast) with every connector place mid-connect:
            // fail now rather than wait for an attempt that may hang until
            // `connect_timeout`.
            if !woke && self.health.is_down() && !self.connector.has_room(self.connect_limit()) {
                if let Some(e) = self.failed_fast(started) {
                    return Err(e);
                }
            }
            // No timer here: the pool's sweeper times the wait out (see
            // `waiters.rs`, "Deadlines"). The waiter queues on its first poll.
            let mut waiter = pin!(Waiter::new(self, deadline));
            match waiter.as_mut().await {
                Handed::Value(h) => return Ok(h),
                Handed::Closed => return Err(PoolError::Closed),
                // Built before the waiter is dropped, so the counts still
                // include this caller.
                Handed::TimedOut => return Err(self.timeout_error(started, TimeoutPhase::Wait)),
                // Connecting failed with nothing open (fail fast); a connect
                // that succeeded since cleared the failure: wait again.
                Handed::Failed => {
                    if let Some(e) = self.failed_fast(started) {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// `get()` with a total time limit.
    ///
    /// The common case, an idle connection that needs no check, is served
    /// synchronously, without a lock or an allocation (spending tokio's
    /// cooperative budget, see `coop.rs`); the rest (waiting, validation, hooks, retries)
    /// is the async slow path.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        timeout: Duration,
        site: &'static Location<'static>,
    ) -> Result<PooledConnection<M>, PoolError<M::Error>> {
        // Take part in tokio's cooperative budget, as its own semaphore does:
        // a task whose checkouts and queries are always ready would
        // otherwise loop on its hot connection and starve the tasks queued
        // behind it on the same worker. Yields only once the budget is spent.
        // One unit per `coop::EVERY` checkouts on this thread (`coop.rs`).
        if crate::coop::due() {
            tokio::task::consume_budget().await;
        }
        let now = self.clock.now();
        // The fast path, written out here so that the guard is built in
        // place from the popped token: no `Result`/`Option`/enum layers for
        // the token to be copied through (each copy of its odd-sized value
        // through stack slots cost store-forwarding stalls).
        let slots = &self.slots;
        let popped = if self.is_suspended() {
            // Suspended: nothing is handed out; the slow path waits.
            None
        } else {
            loop {
                // `lease`: the pool's count a connection this thread parked
                // carried, which the guard takes over (`slots/parked.rs`);
                // dropped if the connection is not handed out here.
                let (held, lease) = match self.claim_or_pop() {
                    (Popped::Node(held), lease) => (held, lease),
                    (Popped::Empty | Popped::Waiters, _) => break None,
                    (Popped::Closed, _) => return Err(PoolError::Closed),
                };
                let entry = slots.entry(&held);
                if let Some(reason) = self.expired(entry, now) {
                    self.evict(slots.take_held(held), reason);
                    continue;
                }
                let held = match self.check_not_broken(held, now) {
                    Some(held) => held,
                    None => continue,
                };
                let entry = slots.entry(&held);
                if self.needs_check(entry, now) {
                    break Some(held);
                }
                slots.held_slot(&held).count_checkout();
                return Ok(self.hand_out(held, now, site, lease));
            }
        };
        self.acquire_slow(now, popped, timeout, site).await
    }

    /// Makes the guard of a connection that passed its checks.
    #[inline]
    fn hand_out(
        self: &Arc<Self>,
        held: Held,
        now: Stamp,
        site: &'static Location<'static>,
        lease: Option<Arc<Self>>,
    ) -> PooledConnection<M> {
        let leak = &self.slots.held_slot(&held).leak;
        leak.hold(site, now);
        if self.config.leak_detection_threshold().is_some()
            && self.config.leak_detection_backtrace()
        {
            leak.taken(site, now);
        }
        if self.config.min_idle() != 0 {
            self.top_up_idle();
        }
        // The guard's count of the pool: the one a parked slot carried, else
        // a new one.
        PooledConnection::new(lease.unwrap_or_else(|| self.clone()), held, now)
    }

    async fn acquire_slow(
        self: &Arc<Self>,
        start: Stamp,
        mut popped: Option<Held>,
        timeout: Duration,
        site: &'static Location<'static>,
    ) -> Result<PooledConnection<M>, PoolError<M::Error>> {
        // On the pool's own clock, like every timestamp: no OS clock read.
        // A limit too large to represent means no limit.
        let deadline = Some(start.after(timeout)).filter(|&d| d != Stamp::NEVER);
        let mut now = start;
        loop {
            let handoff = match popped.take() {
                Some(h) => h,
                // No second pop first: queuing pops a node that went idle
                // meanwhile (see `Waiter`), without touching the contended
                // stack word once more.
                None => {
                    let h = self.wait_for(start, deadline).await?;
                    now = self.clock.now();
                    h
                }
            };
            // Suspended: the connection joins the parked idle set and the
            // caller waits again (within its deadline) for `resume`.
            let Some(handoff) = self.shelve_if_suspended(handoff) else {
                continue;
            };
            // The checks that need no waiting first, without an `await`:
            // the common handoff ends there.
            let due = match self.vet_handoff(handoff, now) {
                Vetted::Pass(held) => return Ok(self.handed_out_after_wait(held, start, now, site)),
                Vetted::Retry => None,
                Vetted::Due(held) => Some(held),
            };
            if let Some(held) = due {
                match self.checked_handoff(held, start, now, deadline, site).await {
                    Ok(conn) => return Ok(conn),
                    Err(Refused::Retry) => {}
                    Err(Refused::Timeout(phase)) => return Err(self.timeout_error(start, phase)),
                }
            }
            now = self.clock.now();
            popped = self.pop_for_handoff()?;
        }
    }

    /// [`check_handoff`](Self::check_handoff) (`checks.rs`), and the guard
    /// of a connection that passed it.
    async fn checked_handoff(
        self: &Arc<Self>,
        held: Held,
        start: Stamp,
        now: Stamp,
        deadline: Option<Stamp>,
        site: &'static Location<'static>,
    ) -> Result<PooledConnection<M>, Refused> {
        let (held, now) = self.check_handoff(held, now, deadline).await?;
        Ok(self.handed_out_after_wait(held, start, now, site))
    }

    /// Records the wait of a slow-path checkout, warns when it was slow
    /// (`slow_acquire_threshold`), and makes its guard.
    fn handed_out_after_wait(
        self: &Arc<Self>,
        held: Held,
        start: Stamp,
        now: Stamp,
        site: &'static Location<'static>,
    ) -> PooledConnection<M> {
        let waited = now.since(start);
        self.stats.acquire_wait.local().record(waited);
        if self
            .config()
            .slow_acquire_threshold()
            .is_some_and(|t| waited > t)
        {
            self.warn_slow_acquire(waited, site, now);
        }
        self.hand_out(held, now, site, None)
    }

    /// The slow-acquire WARN: the wait, the caller, and who held the
    /// connections (before this caller's own is counted).
    #[cold]
    fn warn_slow_acquire(&self, waited: Duration, site: &'static Location<'static>, now: Stamp) {
        let holders = self.holder_sites(now);
        tracing::warn!(
            pool = self.config.name(),
            waited_ms = waited.as_millis() as u64,
            caller = %site,
            "slow acquire: waited {waited:?} for a connection at {site} ({state}; held: {holders})",
            state = self.state(),
        );
    }

    /// An idle connection now, or `None`; never waits, never connects.
    pub(crate) fn try_acquire(
        self: &Arc<Self>,
        site: &'static Location<'static>,
    ) -> Option<PooledConnection<M>> {
        if self.is_suspended() {
            return None;
        }
        let now = self.clock.now();
        let slots = &self.slots;
        loop {
            let (held, lease) = match self.claim_or_pop_any() {
                (Popped::Node(held), lease) => (held, lease),
                _ => return None,
            };
            if let Some(reason) = self.expired(slots.entry(&held), now) {
                self.evict(slots.take_held(held), reason);
                continue;
            }
            let Some(held) = self.check_not_broken(held, now) else {
                continue;
            };
            slots.held_slot(&held).count_checkout();
            return Some(self.hand_out(held, now, site, lease));
        }
    }
}
