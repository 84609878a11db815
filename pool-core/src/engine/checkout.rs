//! The checkout path: `get()` and `try_get()`.
//!
//! Fast path: pop the idle stack (one CAS), check the connection's expiry,
//! skip validation inside the bypass window, hand out a guard. Slow path:
//! queue as a waiter (see `waiters.rs`), ask for connections, and wait for a
//! handoff until the deadline.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use pool_api::{ConnectionInfo, ManageConnection, PoolError, TimeoutPhase, ValidationMode};
use tokio::time::Instant;

use crate::clock::Stamp;
use crate::engine::in_flight::Floating;
use crate::engine::Engine;
use crate::engine::PooledConnection;
use crate::index_stack::Popped;
use crate::slots::{Entry, Held, Occupied};
use crate::stats::Reason;
use crate::waiters::{Handed, WaitHost, Waiter, WaiterQueue};

/// Why a checkout attempt did not produce a connection.
enum Refused {
    /// That connection was unusable and closed; try another.
    Retry,
    /// The deadline passed during this phase.
    Timeout(TimeoutPhase),
}

/// A waiter queues in the pool's queue, asks for connections once queued,
/// and passes on a connection it was handed but left without.
impl<M: ManageConnection> WaitHost<Occupied<M::Connection>> for Arc<Engine<M>> {
    fn queue(&self) -> &WaiterQueue<Occupied<M::Connection>> {
        &self.waiters
    }

    fn flag_waiting(&self) -> Result<(), Handed<Occupied<M::Connection>>> {
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
        if rearm {
            self.sweeper.rearm(self);
        }
        self.request_connections();
    }

    fn orphaned(&self, h: Occupied<M::Connection>) {
        self.deliver(h);
    }
}

impl<M: ManageConnection> Engine<M> {
    /// Pops an idle connection, counted in use.
    #[inline]
    fn pop_for_handoff(&self) -> Result<Option<Occupied<M::Connection>>, PoolError<M::Error>> {
        match self.slots.pop_idle() {
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
    ) -> Result<Occupied<M::Connection>, PoolError<M::Error>> {
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
            if !woke
                && self.health.is_down()
                && !self
                    .connector
                    .has_room(self.config.max_concurrent_connects())
            {
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
                    break Some(slots.take_held(held));
                }
                slots.held_slot(&held).count_checkout();
                return Ok(self.hand_out(held, now, site, lease));
            }
        };
        self.acquire_slow(now, popped, timeout, site).await
    }

    /// Whether a connection taken from idle must be shown to the
    /// `before_acquire` hook or validated before it is handed out: the
    /// hook sees every one, whoever opened it (a `min_size` connection
    /// included); validation skips one opened moments ago and never
    /// checked out, which its connect just showed to work.
    #[inline]
    fn needs_check(&self, entry: &Entry<M::Connection>, now: Stamp) -> bool {
        self.hook_at_checkout || (self.validation_due(entry, now) && !is_fresh(entry, now))
    }

    /// Whether `is_valid` must run before `entry` is handed out: idle
    /// longer than the bypass window, or not checked since a failure was
    /// seen (the failure epoch: a mass failure must not hide behind the
    /// window that keeps quiet times cheap).
    #[inline]
    fn validation_due(&self, entry: &Entry<M::Connection>, now: Stamp) -> bool {
        self.config.validation_mode() == ValidationMode::IsValid
            && (entry.idle_for(now) >= self.config.validation_bypass()
                || self.health.failed_since(entry.last_ping))
    }

    /// The manager's cheap `has_broken` on a connection about to be handed
    /// out, in every validation mode: a broken one is closed (and starts a
    /// failure epoch), `None`; a panic in the check closes it and goes on
    /// unwinding into the caller.
    #[inline]
    fn check_not_broken(self: &Arc<Self>, mut held: Held, now: Stamp) -> Option<Held> {
        let slots = &self.slots;
        match self.is_broken(&mut slots.entry_mut(&mut held).conn, now) {
            Ok(false) => Some(held),
            Ok(true) => {
                // A connection that is broken at once, connect after
                // connect, is a rejection streak like failed validations:
                // connectors back off by it instead of opening and closing
                // as fast as the server answers (see `connector.rs`).
                let created_at = slots.entry(&held).created_at;
                self.health.count_check(&self.clock, created_at, false);
                self.evict(slots.take_held(held), Reason::Broken);
                None
            }
            Err(panic) => {
                self.evict(slots.take_held(held), Reason::Broken);
                resume_unwind(panic)
            }
        }
    }

    /// `has_broken`, with its panic caught; a `true` starts a failure
    /// epoch.
    #[inline]
    pub(crate) fn is_broken(
        &self,
        conn: &mut M::Connection,
        now: Stamp,
    ) -> Result<bool, Box<dyn std::any::Any + Send>> {
        let manager = &self.manager;
        let broken = catch_unwind(AssertUnwindSafe(|| manager.has_broken(conn)))?;
        if broken {
            self.health.saw_failure(now);
        }
        Ok(broken)
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
        mut popped: Option<Occupied<M::Connection>>,
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
            match self.checkout(handoff, start, now, deadline, site).await {
                Ok(conn) => return Ok(conn),
                Err(Refused::Retry) => {
                    now = self.clock.now();
                    popped = self.pop_for_handoff()?;
                }
                Err(Refused::Timeout(phase)) => return Err(self.timeout_error(start, phase)),
            }
        }
    }

    /// Checks a connection about to be handed out on the slow path.
    async fn checkout(
        self: &Arc<Self>,
        h: Occupied<M::Connection>,
        start: Stamp,
        now: Stamp,
        deadline: Option<Stamp>,
        site: &'static Location<'static>,
    ) -> Result<PooledConnection<M>, Refused> {
        if let Some(reason) = self.expired(&h.entry, now) {
            self.evict(h, reason);
            return Err(Refused::Retry);
        }
        // Opened for this caller (or for a caller who left it to this
        // one) and never idle: handed out as is. `has_broken`, validation
        // and `before_acquire` are about a connection that was used or
        // waited; asking them here threw away connections nobody had
        // touched (a manager whose `has_broken` says true after first use
        // left every caller waiting out its timeout).
        if h.entry.from_connect {
            self.health
                .count_check(&self.clock, h.entry.created_at, true);
            return Ok(self.handed_out_after_wait(h, start, now, site));
        }
        // The same check as the fast path's, through the slot (a move in
        // and out of it, on the slow path only).
        let Some(held) = self.check_not_broken(self.slots.hold(h), now) else {
            return Err(Refused::Retry);
        };
        let h = self.slots.take_held(held);
        if !self.needs_check(&h.entry, now) {
            self.health
                .count_check(&self.clock, h.entry.created_at, true);
            return Ok(self.handed_out_after_wait(h, start, now, site));
        }
        let created_at = h.entry.created_at;
        let idle_for = h.entry.idle_for(now);
        // Opened moments ago and never checked out: its connect just
        // showed it works (the hook may still be why it is here).
        let validate = self.validation_due(&h.entry, now) && !is_fresh(&h.entry, now);
        // In flight until checked: dropping it (a cancelled `get()`) closes
        // the connection, which may be mid-ping.
        let mut conn = Floating::new(self.clone(), h, Reason::Validation);
        // The checks run on tokio timers: the limit is a tokio instant.
        let allowed = match deadline {
            Some(d) => self.config.validation_timeout().min(d.since(now)),
            None => self.config.validation_timeout(),
        };
        let limit = Instant::now().checked_add(allowed);
        let checked = self
            .run_checks(&mut conn, validate, idle_for, now, limit, deadline)
            .await;
        self.health
            .count_check(&self.clock, created_at, checked.is_ok());
        checked?;
        let now = self.clock.now();
        Ok(self.handed_out_after_wait(conn.land(), start, now, site))
    }

    /// Validation (when due) and the `before_acquire` hook, within `limit`;
    /// a refusal drops `conn`, which closes it.
    async fn run_checks(
        &self,
        conn: &mut Floating<M>,
        validate: bool,
        idle_for: Duration,
        now: Stamp,
        limit: Option<Instant>,
        deadline: Option<Stamp>,
    ) -> Result<(), Refused> {
        // The hook first, like deadpool's `pre_recycle` before its recycle
        // check.
        if let Some(hooks) = self.checkout_hook() {
            conn.closes_as(Reason::Hook);
            let info = ConnectionInfo::new(now.since(conn.entry().created_at), idle_for);
            let checked = run_until(limit, hooks.before_acquire(conn.conn_mut(), info)).await;
            match checked {
                Some(Ok(true)) => {}
                Some(Ok(false)) => return Err(Refused::Retry),
                other => {
                    let other = other.map(|r| r.map(|_| ()));
                    self.judge(other, deadline, "before_acquire hook")?;
                }
            }
        }
        if validate {
            conn.closes_as(Reason::Validation);
            let checked = run_until(limit, self.manager.is_valid(conn.conn_mut())).await;
            self.judge(checked, deadline, "validation")?;
            // Known alive now: past any failure epoch seen so far.
            conn.entry_mut().last_ping = self.clock.now();
        }
        Ok(())
    }

    /// Records the wait of a slow-path checkout, warns when it was slow
    /// (`slow_acquire_threshold`), and makes its guard.
    fn handed_out_after_wait(
        self: &Arc<Self>,
        h: Occupied<M::Connection>,
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
        self.hand_out(self.slots.hold(h), now, site, None)
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

    /// Turns a failed check into `Retry` (recording the error) or, when the
    /// caller's deadline has passed, a timeout in that phase.
    fn judge(
        &self,
        checked: Option<Result<(), M::Error>>,
        deadline: Option<Stamp>,
        what: &'static str,
    ) -> Result<(), Refused> {
        match checked {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                tracing::debug!(pool = self.config.name(), error = %e, "{what} failed; closing connection");
                self.health.set_last_error(std::sync::Arc::new(e));
                self.health.saw_failure(self.clock.now());
                Err(Refused::Retry)
            }
            None => {
                self.health
                    .set_last_error(std::sync::Arc::new(CheckTimedOut(what)));
                self.health.saw_failure(self.clock.now());
                if deadline.is_some_and(|d| self.clock.now() >= d) {
                    Err(Refused::Timeout(TimeoutPhase::Validation))
                } else {
                    Err(Refused::Retry)
                }
            }
        }
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

/// How long after its connect a never-checked-out connection skips the
/// checkout checks. Longer, and it has sat idle in the pool: a
/// `min_size` connection opened an hour ago is checked like any other.
const FRESH_WINDOW: Duration = Duration::from_secs(1);

/// Whether `entry` was opened moments ago and never checked out: no
/// validation, no `before_acquire` at this checkout.
#[inline]
fn is_fresh<C>(entry: &Entry<C>, now: Stamp) -> bool {
    entry.fresh && now.since(entry.created_at) < FRESH_WINDOW
}

/// Runs `f` until `limit`; `None` if it ran out of time.
async fn run_until<F: std::future::Future>(limit: Option<Instant>, f: F) -> Option<F::Output> {
    match limit {
        Some(at) => tokio::time::timeout_at(at, f).await.ok(),
        None => Some(f.await),
    }
}

/// A checkout check that ran past `validation_timeout` or the caller's
/// deadline; kept as the pool's last error.
#[derive(Debug)]
struct CheckTimedOut(&'static str);

impl std::fmt::Display for CheckTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} did not finish in time", self.0)
    }
}

impl std::error::Error for CheckTimedOut {}
