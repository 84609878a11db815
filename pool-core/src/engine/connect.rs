//! Demand-driven creation of connections, apart from the callers.
//!
//! A caller that queues asks for connections ([`Engine::request_connections`]);
//! so do freed slots and the housekeeper (to refill `min_size`). The request
//! spawns connector tasks while there is demand (waiters, plus the shortfall
//! below `min_size`), free slots, and fewer than `max_concurrent_connects`
//! connectors running. Each connector loops: reserve a slot, connect (bounded
//! by `connect_timeout`), deliver the connection like a returned one (to the
//! longest waiter, else idle), and stop as soon as there is no demand left.
//! A burst of requests against short queries is served by returns long
//! before a slow connect finishes, so it does not open a connection per
//! request.
//!
//! A failed connect frees its slot, is kept as the pool's last error (which
//! timed-out callers see), and backs the connector off: 5 ms, doubling, at
//! most 1 s, each wait jittered by ±20 % so a fleet of processes does not
//! reconnect in step; a recovering database is picked up within about a
//! second.
//!
//! # Fail fast
//!
//! The first failed connect in a row is retried at once, without back-off
//! and before any caller sees it (a dropped packet, a listener
//! restarting), unless the manager calls its error permanent
//! (`ErrorClass::Permanent`: a refused login, an unknown
//! database). With `fail_fast` on (the default), the second failed connect
//! in a row (or a permanent one) that leaves no slot
//! reserved (nothing idle, in use or being opened that could come back)
//! marks the database *down*: the failure is kept in the engine's `Health` (`health.rs`)
//! and every queued caller is failed through the waiter queue
//! (`WaiterQueue::fail_all`) with it. While down, a new `get()` that finds
//! no connector place free fails at once with the same error; one that
//! finds a place queues, which starts a connect at once (no back-off
//! wait), so the first `get()` after the database is back succeeds. The
//! next successful connect clears the state. A refusal the manager calls a
//! capacity refusal (`ErrorClass::CapacityRefusal`, a fleet
//! budget with no free ticket) never marks the database down: callers wait
//! within their timeout, the connect retried with back-off.
//!
//! A connect that succeeds is not always a usable connection: a server can
//! accept connections and then fail every ping, and a `before_acquire` hook
//! can reject every connection. Checkouts count the rejections in a row
//! that replacing did not cure (the rejected connection was opened after
//! the previous rejection), and connectors back off by the same schedule
//! while that count is not zero, instead of opening and closing connections
//! as fast as the server answers until the callers' deadlines. Stale
//! connections failing their check (the server restarted) count once:
//! replacing them at once is what the caller wants. A failed connect ends
//! the count: the server went down, the connect back-off paces from there,
//! and the server that comes back starts with no pause.
//!
//! # Reopening
//!
//! Two connects at a time suit a burst against a healthy database, which
//! returns serve. After an outage they do not: every caller queued through
//! it waits for a connection of its own, and two at a time would serve
//! them a round of connects per two callers. So each failure seen (a
//! failed connect, a connection found broken, a failed check) records the
//! pool's size then: connections open (idle or in use) plus callers
//! waiting, the largest since the pool last got back to it
//! (`Engine::saw_failure`). While the pool is below that size and the last
//! connect succeeded, connectors may run up to the larger of
//! `max_concurrent_connects` and `max_concurrent_reconnects` at once, never
//! more than the gap nor the free slots ([`Engine::connect_limit`]); the
//! connector whose connect ends the failures wakes the others out of their
//! back-off and asks for connectors at once for the rest of the demand.
//! Connectors still only run for callers waiting (and `min_size`,
//! `min_idle`), within `max_size`. Once the pool is back to that size (or
//! full) the reopening is over, and a connector above
//! `max_concurrent_connects` stops before its next connect. While connects
//! fail, the usual bound paces them; a capacity refusal ends the reopening.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Poll;

use pool_api::{ErrorClass, ManageConnection, PoolError, TimeoutPhase};

use super::in_flight::Reservation;
use super::Engine;
use crate::clock::Stamp;
use crate::health::{backoff_after, jittered, Failure, OpenError, FIRST_BACKOFF, MAX_BACKOFF};
use crate::slots::Entry;
use crate::sync::{fence, AtomicU32, Ordering};

/// The connectors' count: how many run.
///
/// # The store-buffering protocol
///
/// A caller that queues increments the waiter count and then looks at
/// `running`, `returning` and the open count (in
/// [`Engine::request_connections`]); a connector that stops decrements
/// `running`, a return that ends decrements `returning`, and a freed slot
/// decrements the open count, and then look at the waiter count (the same
/// function).
/// Each side writes one count and reads the other's: without ordering,
/// both could read the old value (a store buffer each) and the caller
/// would wait for a connection nobody opens. `request_connections` starts
/// with a SeqCst fence, after every such write and before every such read:
/// of two fences one comes first in the single SeqCst order, and the side
/// whose fence is second sees the other's write. (A fence, not SeqCst
/// accesses: loom models SeqCst fences, not SeqCst accesses.) The loom
/// models `loom_waiter_meets_leaving_connector` and
/// `loom_reservation_dropped_while_waiter_queues` check both pairs.
///
/// # Places
///
/// A claimed place is a [`Place`], made before the connector task is
/// spawned and moved into it: dropping the task gives the place back,
/// whether the task ends, panics, or is dropped before its first poll (a
/// runtime shutting down drops the tasks spawned on it unpolled). A place
/// counted out only by the task's own code stayed taken for good in that
/// case, and after `max_concurrent_connects` such losses the pool never
/// connected again.
#[derive(Debug)]
pub(crate) struct Connector {
    /// Connector tasks running (bounded by [`Engine::connect_limit`]).
    running: AtomicU32,
    /// Connections on their way back to the idle set, counted as supply
    /// for the callers waiting (see `Returning` in `engine/in_flight.rs`).
    returning: AtomicU32,
    /// Connectors the model tests would have spawned (no runtime there).
    #[cfg(loom)]
    pub(crate) started: AtomicU32,
}

impl Connector {
    pub(crate) fn new() -> Self {
        Self {
            running: AtomicU32::new(0),
            returning: AtomicU32::new(0),
            #[cfg(loom)]
            started: AtomicU32::new(0),
        }
    }

    /// Claims a connector place while fewer than `limit` run and fewer
    /// than `demand()` connections are wanted; `true`: the caller starts a
    /// connector holding it (a [`Place`]).
    pub(crate) fn claim(&self, limit: u32, demand: impl Fn() -> u32) -> bool {
        loop {
            // Relaxed: the read of the store-buffering protocol (see the
            // type docs), ordered by the fence in `request_connections`.
            let running = self.running.load(Ordering::Relaxed);
            if running >= limit || running >= demand() {
                return false;
            }
            // Relaxed: claims a place; the count is a bound, and the task
            // that takes the place is ordered by its spawn.
            if self
                .running
                .compare_exchange(running, running + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Whether fewer than `limit` connectors run (a hint).
    pub(crate) fn has_room(&self, limit: u32) -> bool {
        self.running.load(Ordering::Relaxed) < limit
    }

    /// A connection started on its way back to the idle set.
    pub(crate) fn returning_started(&self) {
        // Relaxed: a caller that misses it opens one connection too many
        // at worst (what it did before returns were counted).
        self.returning.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection on its way back arrived, was closed, or took longer
    /// than the grace; the caller looks at the demand again next.
    pub(crate) fn returning_ended(&self) {
        // Relaxed: the returner's write in the store-buffering protocol
        // (see the type docs), ordered by the fence of the
        // `request_connections` that follows it.
        self.returning.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections on their way back now (read after the fence in
    /// `request_connections`, or as a hint).
    fn returning(&self) -> u32 {
        self.returning.load(Ordering::Relaxed)
    }

    /// Connectors running now (a hint: see [`Engine::wants_another`]).
    fn running(&self) -> u32 {
        self.running.load(Ordering::Relaxed)
    }

    /// Gives back a place [`claim`](Self::claim) reserved (a [`Place`]'s
    /// drop).
    fn leave(&self) {
        // Relaxed: the connector's write in the store-buffering protocol
        // (see the type docs), ordered by the fence that
        // `Engine::connector_done` reaches next in `request_connections`.
        self.running.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connectors the model tests would have spawned.
    #[cfg(all(test, loom))]
    pub(crate) fn started(&self) -> u32 {
        self.started.load(Ordering::Relaxed)
    }
}

/// A connector's place, claimed by [`Connector::claim`] and owned by the
/// connector task from before its spawn (see `Connector`, "Places"):
/// counted out when dropped, however the task ends, or if it never runs.
pub(crate) struct Place<M: ManageConnection> {
    shared: Arc<Engine<M>>,
    /// Set by [`Engine::connector_done`]: the connector ended on its own
    /// and looks at the demand again itself.
    done: bool,
}

impl<M: ManageConnection> Place<M> {
    /// Takes over a place [`Connector::claim`] reserved.
    pub(crate) fn adopt(shared: Arc<Engine<M>>) -> Self {
        Self {
            shared,
            done: false,
        }
    }
}

impl<M: ManageConnection> Drop for Place<M> {
    fn drop(&mut self) {
        self.shared.connector.leave();
        if !self.done {
            // Cut off (its runtime is shutting down, dropping the task):
            // a caller it would have served may wait on another runtime.
            // Wake the longest waiter to ask again from its own task; not
            // a request from here, which on a runtime shutting down would
            // spawn a connector only to drop it at once, back here.
            self.shared.waiters.nudge();
        }
    }
}

/// What a connector does after a failed connect ([`Engine::connect_failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// The first failure in a row, not a permanent one: try again at once,
    /// before any caller sees it (a dropped packet, a listener restarting).
    RetryNow,
    /// Back off; `wakeable`: a caller who queues may cut the pause short
    /// (a database failure), or not (a capacity refusal, a panic: trying
    /// sooner does not cure them).
    Pace { wakeable: bool },
}

impl<M: ManageConnection> Engine<M> {
    /// Connections wanted now: one per waiter not covered by a connection
    /// on its way back (see `Returning`), plus, while the pool has
    /// handles, the larger of the shortfall below `min_size` (open
    /// connections) and the shortfall below `min_idle` (idle ones; counted
    /// only when `min_idle` is set, as it adds up the slots).
    pub(crate) fn demand(&self) -> u32 {
        let waiting = self
            .waiters
            .waiting()
            .saturating_sub(self.connector.returning());
        if !self.has_handles() {
            return waiting;
        }
        waiting + self.shortfall()
    }

    /// Whether a connector, one of those running, should open another
    /// connection: more are wanted than the other connectors, each of
    /// which opens one (or is about to look at the demand again). Counting
    /// only the waiters, a connector whose connect served one caller would
    /// open a second for a caller another connector's connect was already
    /// on its way to: one connect too many per such race. A connector that
    /// stops on a stale count is safe: the last one to stop looks at the
    /// demand again (`connector_done`).
    fn wants_another(&self) -> bool {
        let others = self.connector.running().saturating_sub(1);
        self.demand() > others
    }

    /// The larger of the shortfall below `min_size` (open connections)
    /// and the shortfall below `min_idle` (idle ones; counted only when
    /// `min_idle` is set, as it adds up the slots).
    fn shortfall(&self) -> u32 {
        let total = self.slots.open();
        let mut short = self.config.min_size().saturating_sub(total);
        let min_idle = self.config.min_idle();
        if min_idle != 0 {
            short = short.max(min_idle.saturating_sub(self.slots.census().idle));
        }
        short
    }

    /// A checkout with `min_idle` set: when it may have left fewer idle
    /// than that, asks for connects in the background (the connectors
    /// decide, within `max_size` and `max_concurrent_connects`); never
    /// connects on the caller's path. Skipped while every connector place
    /// is taken: running connectors look at the demand again before they
    /// stop.
    pub(crate) fn top_up_idle(self: &Arc<Self>) {
        if self.connector.has_room(self.connect_limit()) && self.slots.open() < self.slots.limit() {
            self.request_connections();
        }
    }

    /// How many connectors may run now: `max_concurrent_connects`, or,
    /// while the pool reopens after failures, up to
    /// `max_concurrent_reconnects` but no more than the pool is short of
    /// its size at the failures (see the module docs, "Reopening").
    #[inline]
    pub(crate) fn connect_limit(&self) -> u32 {
        let limit = self.config.max_concurrent_connects();
        // No reopening (the common case): no count read beyond the
        // health's own.
        let target = self.health.reopen_target();
        if target == 0 {
            return limit;
        }
        // The connections open apart from the connectors' own: each
        // connector holds at most one slot reserved, and the bound is on
        // connectors, so the gap is counted from what they do not hold.
        let open = self.slots.open().saturating_sub(self.connector.running());
        // Never more than the free slots: a pool resized below its size at
        // the failures reopens to its new `max_size`.
        let gap = target
            .saturating_sub(open)
            .min(self.slots.limit().saturating_sub(open));
        limit.max(gap.min(self.config.max_concurrent_reconnects()))
    }

    /// Records a failure seen now (see `Health::saw_failure`): the failure
    /// epoch, and the size to reopen to.
    #[cold]
    pub(crate) fn saw_failure(&self, now: Stamp) {
        // Connections open (not those being opened: they are for callers
        // counted as waiting) plus callers waiting. A scan of the slots, on
        // failure paths only.
        let census = self.slots.census();
        let wanted = (census.idle + census.in_use).saturating_add(self.waiters.waiting());
        self.health.saw_failure(now, wanted);
    }

    /// Spawns connectors for the current demand, within the bounds.
    pub(crate) fn request_connections(self: &Arc<Self>) {
        // SeqCst: the store-buffering protocol (see `Connector`). Pairs
        // with this same fence in the other side's call: a queued waiter's
        // (after its `waiting` increment) against a leaving connector's
        // (after its `running` decrement) or a freed slot's (after the
        // `open` decrement), so one of the two sees the other's write.
        fence(Ordering::SeqCst);
        loop {
            // The open count first: it rarely changes, where the stack word
            // behind `is_closed` is written by every checkout and return.
            if self.slots.open() >= self.slots.limit() || self.is_closed() || self.is_suspended() {
                return;
            }
            #[cfg(not(loom))]
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                // No runtime on this thread (a slot freed on a plain
                // thread): no connector can start here. Wake the longest
                // waiter instead; its task, on its own runtime, asks again
                // from there (`WaitHost::queued`).
                self.waiters.nudge();
                return;
            };
            // The housekeeper of a pool whose runtime ended starts again on
            // this one (`spawn_once`); one load while it runs.
            #[cfg(not(loom))]
            self.ensure_housekeeper();
            // The bound only once a connector could start: a full pool (a
            // caller queueing behind busy connections) returns above
            // without reading it.
            if !self.connector.claim(self.connect_limit(), || self.demand()) {
                return;
            }
            // The models have no runtime: they count the connector instead
            // and play its part themselves.
            #[cfg(loom)]
            self.connector.started.fetch_add(1, Ordering::Relaxed);
            #[cfg(not(loom))]
            {
                let task = runtime.spawn(connector(Place::adopt(self.clone())));
                // Finished already: a runtime shutting down dropped it
                // unpolled, its place with it. Claiming again would only
                // spawn and lose the next one, in a loop; a connector that
                // really ran and finished asked again itself.
                if task.is_finished() {
                    return;
                }
            }
        }
    }

    /// A connector ends: counts it out, then looks at the demand again. A
    /// caller that queued while it was leaving saw it still running and
    /// started none (the store-buffering protocol, see `Connector`).
    pub(crate) fn connector_done(self: &Arc<Self>, mut place: Place<M>) {
        place.done = true;
        drop(place);
        self.request_connections();
    }

    /// Reserves a free slot for a connect; `None` at `max_size`.
    pub(crate) fn reserve(self: &Arc<Self>) -> Option<Reservation<M>> {
        let slot = self.slots.reserve()?;
        Some(Reservation::new(self.clone(), slot))
    }

    /// Opens one connection and runs the `after_connect` hook, within
    /// `connect_timeout`.
    pub(crate) async fn open(&self) -> Result<Entry<M::Connection>, OpenError<M::Error>> {
        self.open_within(self.config.connect_timeout()).await
    }

    /// [`open`](Self::open) within `limit` instead (`Pool::new`: the time
    /// its start-up has left, when that is less).
    pub(crate) async fn open_within(
        &self,
        limit: std::time::Duration,
    ) -> Result<Entry<M::Connection>, OpenError<M::Error>> {
        let generation = self.generation();
        #[cfg(feature = "metrics")]
        let started = tokio::time::Instant::now();
        let mut connecting = Box::pin(async {
            let mut conn = self.manager.connect().await?;
            if let Some(hooks) = self.hooks.as_deref() {
                hooks.after_connect(&mut conn).await?;
            }
            Ok(conn)
        });
        // A panic in the manager's `connect` or the hook is a failed
        // connect, backed off like any other: left to unwind, it would end
        // the connector task, whose freed place and slot would start the
        // next one at once, in a loop as fast as the panic.
        let caught = std::future::poll_fn(|cx| {
            match catch_unwind(AssertUnwindSafe(|| connecting.as_mut().poll(cx))) {
                Ok(Poll::Pending) => Poll::Pending,
                Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
                Err(panic) => Poll::Ready(Err(panic)),
            }
        });
        let conn = match tokio::time::timeout(limit, caught).await {
            Ok(Ok(Ok(conn))) => conn,
            Ok(Ok(Err(e))) => return Err(OpenError::Backend(e)),
            Ok(Err(panic)) => return Err(OpenError::Panicked(panic)),
            Err(_) => {
                return Err(OpenError::TimedOut(pool_api::ConnectTimedOut::new(
                    limit,
                    self.manager.target(),
                )))
            }
        };
        self.health.count_success();
        if self.health.is_down() {
            self.health.recovered();
        }
        let now = self.clock.now();
        self.stats.created();
        #[cfg(feature = "metrics")]
        self.export.created(started.elapsed());
        Ok(Entry {
            conn,
            created_at: now,
            expires_at: self.lifetime_deadline(now),
            last_used: now,
            generation,
            last_ping: now,
            fresh: true,
            from_connect: true,
        })
    }

    /// `now + max_lifetime`, shortened by a random jitter.
    pub(super) fn lifetime_deadline(&self, now: Stamp) -> Stamp {
        let Some(life) = self.config.max_lifetime() else {
            return Stamp::NEVER;
        };
        let jitter = life.mul_f64(self.config.max_lifetime_jitter() * fastrand::f64());
        now.after(life.saturating_sub(jitter))
    }

    /// Counts a failed connect, in the snapshot and the export alike.
    pub(super) fn count_creation_error(&self) {
        self.stats.creation_failed();
        #[cfg(feature = "metrics")]
        self.export.creation_failed();
    }

    /// Records a failed connect (its slot already given back) and says
    /// what the connector does next. The first database failure in a row
    /// is retried at once, unless the manager calls it permanent; from the
    /// second on (or at a permanent one), when nothing open could come
    /// back, the waiting callers fail with it (fail fast; see the module
    /// docs). A capacity refusal (a fleet budget with no free ticket) or a
    /// panicking connect is paced, never retried at once nor failed fast:
    /// trying sooner does not cure them.
    pub(crate) fn connect_failed(&self, err: OpenError<M::Error>) -> AfterFailure {
        self.count_creation_error();
        let class = match &err {
            OpenError::Backend(e) => self.manager.classify_error(e),
            _ => ErrorClass::Transient,
        };
        let capacity = class == ErrorClass::CapacityRefusal;
        let permanent = class == ErrorClass::Permanent;
        // A panic says the code is broken, not the database: no failure
        // epoch, no fail fast; callers wait (and time out with it as the
        // last error) while the connect is retried with back-off.
        let panicked = matches!(&err, OpenError::Panicked(_));
        let (failure, last) = err.into_failure();
        if panicked {
            tracing::error!(pool = self.config.name(), error = %pool_api::error_chain::ErrorChain(&*last), "connect failed");
        } else {
            tracing::warn!(pool = self.config.name(), error = %pool_api::error_chain::ErrorChain(&*last), "connect failed");
        }
        self.health.set_last_error(last);
        if capacity || panicked {
            // More connects at once cure neither: no reopening.
            self.health.end_reopening();
            return AfterFailure::Pace { wakeable: false };
        }
        self.saw_failure(self.clock.now());
        if self.health.count_failure() == 1 && !permanent {
            return AfterFailure::RetryNow;
        }
        if !self.config.fail_fast() || self.slots.open() != 0 {
            return AfterFailure::Pace { wakeable: true };
        }
        self.health.mark_down(failure);
        self.waiters.fail_all(|| self.slots.clear_waiting());
        AfterFailure::Pace { wakeable: true }
    }

    /// The error a caller failed fast gets, or `None` when a connect
    /// succeeded since (the caller then waits again).
    pub(crate) fn failed_fast(&self, started: Stamp) -> Option<PoolError<M::Error>> {
        match self.health.failure()? {
            Failure::Backend(e) => Some(PoolError::ConnectFailed(e)),
            Failure::TimedOut => Some(self.timeout_error(started, TimeoutPhase::Connect)),
        }
    }
}

/// One connector task; see the module docs.
#[cfg_attr(loom, allow(dead_code))]
async fn connector<M: ManageConnection>(place: Place<M>) {
    let shared = place.shared.clone();
    open_while_wanted(&shared).await;
    shared.connector_done(place);
}

#[cfg_attr(loom, allow(dead_code))]
async fn open_while_wanted<M: ManageConnection>(shared: &Arc<Engine<M>>) {
    let mut backoff = FIRST_BACKOFF;
    let mut first = true;
    loop {
        if shared.is_closed() || shared.is_suspended() || !shared.wants_another() {
            return;
        }
        // A reopening that is over leaves the connectors it started above
        // the bound: each stops before its next connect until the count is
        // within it (a hint; a stale read lets one more connect run, or
        // stops one that the last to stop replaces in `connector_done` if
        // it is wanted). Not before the first: a connector was started
        // within the bound, and the others' reservations shrink the gap it
        // was started for.
        if !first && shared.connector.running() > shared.connect_limit() {
            return;
        }
        first = false;
        let rejected = shared.health.rejected_in_a_row();
        if rejected > 0 {
            // Paces connects while checkouts keep rejecting new connections
            // (see the module docs); not a poll: callers are served by the
            // returns and connects that wake them, never by this timer.
            tokio::time::sleep(jittered(backoff_after(rejected))).await;
            if shared.is_closed() || shared.is_suspended() || !shared.wants_another() {
                return;
            }
        }
        let Some(slot) = shared.reserve() else { return };
        match shared.open().await {
            Ok(entry) => {
                backoff = FIRST_BACKOFF;
                slot.fill(entry);
                // Reopening: connectors for the rest of the demand at once,
                // within the larger bound, so the callers queued through an
                // outage are not served two connects at a time; over once
                // the pool is back to its size. `open` counts the slots
                // the other connectors reserved: their connects are under
                // way for the same gap, so the size is reached once they
                // finish, and none more is wanted for it; one that fails
                // is a failure seen, which records the size again.
                let open = shared.slots.open();
                if open < shared.health.reopen_target() {
                    shared.health.wake_all_pacing();
                    shared.request_connections();
                }
                shared.health.reopened(open, open >= shared.slots.limit());
            }
            Err(e) => {
                drop(slot);
                // Callers cut the back-off short only after a database
                // failure; not after a capacity refusal or a panic.
                let wakeable = match shared.connect_failed(e) {
                    // One failure alone: again at once, no caller told.
                    AfterFailure::RetryNow => continue,
                    AfterFailure::Pace { wakeable } => wakeable,
                };
                // Known down and nobody waiting: end now, so the next
                // `get()` starts an attempt at once.
                if shared.health.is_down() && shared.demand() == 0 {
                    return;
                }
                // Back-off between failed connects, not a poll: the loop ends
                // as soon as nobody wants a connection, and a caller that
                // queues meanwhile cuts it short (`Health::wake_pacing`):
                // the back-off paces attempts nobody is waiting for, never
                // a caller's.
                let pause = jittered(backoff);
                if wakeable {
                    shared.health.pace(pause).await;
                } else {
                    // A fleet ticket freed by another process, or code that
                    // stops panicking, sends no notification: a timed
                    // retry is all there is.
                    tokio::time::sleep(pause).await;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_claimed_only_within_the_limit_and_the_demand() {
        let c = Connector::new();
        assert!(c.claim(2, || 5));
        assert!(c.claim(2, || 5));
        assert!(!c.claim(2, || 5), "two run: the limit is reached");
        assert!(!c.has_room(2));
        c.leave();
        assert!(c.has_room(2));
        assert!(!c.claim(2, || 1), "one runs and one is wanted: none more");
        assert_eq!(c.running(), 1);
        c.leave();
        assert_eq!(
            c.running(),
            0,
            "each place is counted out when its connector ends"
        );
        assert!(!c.claim(4, || 0), "no demand, no connector");
    }
}
