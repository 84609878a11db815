//! What the connectors are for: how many connections are wanted
//! (`demand`: the callers waiting, less the connections on their way
//! back, plus the shortfall below `min_size` and `min_idle`), how many
//! connectors may run (`connect_limit`), and the connectors' count
//! ([`Connector`]) with the store-buffering protocol that keeps a queuing
//! caller from being missed; `saw_failure` records the size to reopen to.
//! Counts and reads of them: nothing here starts, delivers or closes
//! anything; `request_connections` (`connect.rs`) acts on them.
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

use std::sync::Arc;

use pool_api::ManageConnection;

use super::Engine;
use crate::clock::Stamp;
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
/// A claimed place is a `Place` (`connect.rs`), made before the connector task is
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
    /// for the callers waiting (see `Returning` in `engine/returning.rs`).
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
    /// connector holding it (a `Place`).
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
    pub(super) fn returning(&self) -> u32 {
        self.returning.load(Ordering::Relaxed)
    }

    /// Connectors running now (a hint: see [`Engine::wants_another`]).
    pub(super) fn running(&self) -> u32 {
        self.running.load(Ordering::Relaxed)
    }

    /// Gives back a place [`claim`](Self::claim) reserved (a `Place`'s
    /// drop).
    pub(super) fn leave(&self) {
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

impl<M: ManageConnection> Engine<M> {
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
                let task = (self.starts.connector)(&runtime, self);
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
    pub(super) fn wants_another(&self) -> bool {
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
