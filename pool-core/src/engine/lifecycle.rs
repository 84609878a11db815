//! The pool's life as a whole: its first connections (`open_initial`,
//! for `Pool::new`) and one added from outside (`add`), closing,
//! resizing, retiring everything (`soft_evict_all`, `retain`), suspending
//! and resuming. Connections it closes go to the retirement sink
//! (`retire.rs`), those it keeps to the delivery path (`delivery.rs`).

use std::sync::Arc;

use pool_api::{ErrorClass, ManageConnection, PoolError, TimeoutPhase};
use tokio::time::Instant;

use super::Engine;
use crate::health::OpenError;
use crate::slots::{Entry, Held, Occupied, State};
use crate::stats::Reason;
use crate::suspend::Shelved;
use crate::sync::Ordering;

impl<M: ManageConnection> Engine<M> {
    /// Closes the pool: fails waiters, closes idle connections, and returns
    /// once every connection is closed.
    pub(crate) async fn close(self: &Arc<Self>) {
        self.shut();
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Armed before the check: a `notify_waiters` from a free after
            // it wakes this future, even unpolled.
            drained.as_mut().enable();
            if self.drained_now() {
                return;
            }
            drained.await;
        }
    }

    /// The synchronous half of [`close`](Self::close): closes the idle
    /// stack, closing the connections on it, and fails every waiter.
    pub(crate) fn shut(self: &Arc<Self>) {
        for h in self.slots.close_idle() {
            self.evict(h, Reason::Closed);
        }
        // After `CLOSED` is set: a return racing this sees it or is found
        // here (`slots/parked.rs`).
        for h in self.collect_parked() {
            self.evict(h, Reason::Closed);
        }
        self.close_shelved();
        self.waiters.close_all(|| self.slots.clear_waiting());
        self.drained.notify_waiters();
    }

    /// Resolves once the pool is closed (`Pool::close_event`).
    pub(crate) async fn closed(&self) {
        loop {
            let closed = self.drained.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if self.is_closed() {
                return;
            }
            closed.await;
        }
    }

    /// `Pool::resize`: sets the bound; shrinking closes idle connections
    /// (oldest use first) until the open count fits, and the rest close as
    /// they come back (`deliver`); growing asks for connections for the
    /// callers waiting.
    pub(crate) fn resize(self: &Arc<Self>, max_size: u32) -> Result<(), pool_api::ConfigError> {
        self.config.check_resize(max_size)?;
        self.slots.set_limit(max_size);
        if self.slots.over_limit() {
            // After the limit is lowered: a return racing this sees it or
            // is found here (`slots/parked.rs`).
            let idle = self.collect_idle();
            let mut keep = Vec::with_capacity(idle.len());
            for h in idle.into_iter().rev() {
                if self.slots.over_limit() {
                    self.evict(h, Reason::SoftEvict);
                } else {
                    keep.push(h);
                }
            }
            for h in keep {
                self.deliver(h);
            }
        }
        self.request_connections();
        Ok(())
    }

    /// Retires every connection: idle ones now, in-use ones at their return.
    pub(crate) fn soft_evict_all(self: &Arc<Self>) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        for h in self.collect_idle() {
            self.evict(h, Reason::SoftEvict);
        }
    }

    /// `Pool::retain`: closes the idle connections `keep` rejects (counted
    /// as soft evictions) and returns how many; the kept ones go back in
    /// their order.
    pub(crate) fn retain(
        self: &Arc<Self>,
        mut keep: impl FnMut(&M::Connection, pool_api::ConnectionInfo) -> bool,
    ) -> usize {
        let now = self.clock.now();
        let taken = self.collect_idle();
        let mut kept = Vec::with_capacity(taken.len());
        let mut closed = 0;
        for h in taken.into_iter().rev() {
            let info =
                pool_api::ConnectionInfo::new(now.since(h.entry.created_at), h.entry.idle_for(now));
            if keep(&h.entry.conn, info) {
                kept.push(h);
            } else {
                closed += 1;
                self.evict(h, Reason::SoftEvict);
            }
        }
        for h in kept {
            self.deliver(h);
        }
        closed
    }

    /// Suspends the pool (`suspend.rs`).
    pub(crate) fn suspend(&self) {
        self.suspension.suspend();
        tracing::info!(pool = self.config.name(), "pool suspended");
    }

    /// Resumes the pool: the shelved connections go to the waiters or the
    /// idle stack, and the connections waiters still need are opened.
    pub(crate) fn resume(self: &Arc<Self>) {
        let shelved = self.suspension.resume();
        tracing::info!(pool = self.config.name(), "pool resumed");
        for h in shelved {
            self.deliver(h);
        }
        self.request_connections();
    }

    /// A connection a waiter got: returned to use it, or, while suspended,
    /// shelved (`None`, marked idle), and the waiter waits again. After
    /// close it is closed (`None`; the waiter then finds the pool closed).
    #[inline]
    pub(crate) fn shelve_if_suspended(self: &Arc<Self>, held: Held) -> Option<Held> {
        // Not suspended (the common case): the connection stays in its
        // slot. `shelve` decides again under its lock.
        if !self.is_suspended() {
            return Some(held);
        }
        self.shelve_suspended(self.slots.take_held(held))
    }

    #[cold]
    fn shelve_suspended(self: &Arc<Self>, h: Occupied<M::Connection>) -> Option<Held> {
        let shelved = self.suspension.shelve(
            h,
            || !self.is_closed(),
            |h| self.slots.slot(h).set(State::Idle),
        );
        match shelved {
            Shelved::No(h) => Some(self.slots.hold(h)),
            Shelved::Yes => None,
            Shelved::Refused(h) => {
                self.evict(h, Reason::Closed);
                None
            }
        }
    }

    /// Closes the shelved connections (the pool is closing).
    pub(crate) fn close_shelved(self: &Arc<Self>) {
        for h in self.suspension.take_all() {
            self.evict(h, Reason::Closed);
        }
    }

    /// `Pool::add`: puts a connection opened elsewhere in a free slot and
    /// delivers it (to the longest waiter, else idle); gives it back when
    /// every slot is taken or the pool is closed.
    pub(crate) fn add(self: &Arc<Self>, conn: M::Connection) -> Result<(), M::Connection> {
        if self.is_closed() {
            return Err(conn);
        }
        let Some(slot) = self.reserve() else {
            return Err(conn);
        };
        if self.health.is_down() {
            self.health.recovered();
        }
        let now = self.clock.now();
        slot.fill(Entry {
            conn,
            created_at: now,
            expires_at: self.lifetime_deadline(now),
            last_used: now,
            generation: self.generation(),
            last_ping: now,
            // Not opened by the pool: checked at its first checkout.
            fresh: false,
            from_connect: false,
        });
        Ok(())
    }

    /// Opens the first connections of `Pool::new` before it returns: one
    /// first, failing fast, then the rest of `min_size`,
    /// `max_concurrent_connects` at a time; all of it within
    /// `acquire_timeout`, each connect cut to the time left when that is
    /// less than `connect_timeout`.
    pub(crate) async fn open_initial(self: &Arc<Self>) -> Result<(), PoolError<M::Error>> {
        let start = StartUp::new(self.config.acquire_timeout());
        let wanted = self.config.min_size().max(1);
        self.open_one_initial(start).await?;
        let mut left = wanted - 1;
        while left > 0 {
            let batch = left.min(self.config.max_concurrent_connects());
            let mut opening = tokio::task::JoinSet::new();
            for _ in 0..batch {
                let shared = self.clone();
                opening.spawn(async move { shared.open_one_initial(start).await });
            }
            while let Some(done) = opening.join_next().await {
                match done {
                    Ok(result) => result?,
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => return Err(PoolError::Closed),
                }
            }
            left -= batch;
        }
        Ok(())
    }

    /// Opens one connection of `Pool::new`'s first ones, within the time
    /// `start` has left. A first failure that the manager does not call
    /// permanent is retried once at once, as connectors do, if time is
    /// left; the second is the caller's error.
    async fn open_one_initial(self: &Arc<Self>, start: StartUp) -> Result<(), PoolError<M::Error>> {
        let connect_timeout = self.config.connect_timeout();
        if start.left(connect_timeout).is_zero() {
            return Err(self.start_up_timed_out(start));
        }
        let Some(slot) = self.reserve() else {
            return Ok(());
        };
        let first = self.open_within(start.left(connect_timeout)).await;
        let retry = match &first {
            Err(OpenError::Backend(e)) => self.manager.classify_error(e) != ErrorClass::Permanent,
            Err(OpenError::TimedOut(_)) => true,
            _ => false,
        };
        let left = start.left(connect_timeout);
        let opened = if retry && !left.is_zero() {
            match &first {
                Err(OpenError::Backend(e)) => {
                    tracing::warn!(pool = self.config.name(), error = %pool_api::error_chain::ErrorChain(e), "connect failed; retrying once");
                }
                Err(OpenError::TimedOut(e)) => {
                    tracing::warn!(pool = self.config.name(), error = %e, "connect timed out; retrying once");
                }
                _ => {}
            }
            self.count_creation_error();
            self.open_within(left).await
        } else {
            first
        };
        match opened {
            Ok(entry) => {
                slot.fill(entry);
                Ok(())
            }
            // The slot is given back quietly: `Pool::new` is failing, and a
            // refill connect started now would only delay its error.
            Err(OpenError::Backend(e)) => {
                slot.abandon();
                // Returned to the caller, not kept as the last error, but
                // counted like any failed connect.
                self.count_creation_error();
                Err(PoolError::Backend(e))
            }
            // As if `Pool::new` had called `connect` itself.
            Err(OpenError::Panicked(panic)) => {
                slot.abandon();
                self.count_creation_error();
                std::panic::resume_unwind(panic)
            }
            Err(e @ OpenError::TimedOut(_)) => {
                slot.abandon();
                self.connect_failed(e);
                Err(self.start_up_timed_out(start))
            }
        }
    }

    /// `Pool::new`'s timeout: how long the start-up ran, the counts (with
    /// the oldest connect of its own still running, if one is), and the
    /// last connect error.
    fn start_up_timed_out(&self, start: StartUp) -> PoolError<M::Error> {
        let state = self.state();
        PoolError::Timeout {
            waited: start.began.elapsed(),
            phase: TimeoutPhase::Connect,
            state,
            last_error: self.health.last_error(),
            oldest_connect: self.oldest_connect(&state, self.clock.now()),
            holders: pool_api::HolderSites::default(),
        }
    }
}

/// When `Pool::new`'s start-up began and when its `acquire_timeout` ends
/// (`None`: too far to count).
#[derive(Clone, Copy)]
struct StartUp {
    began: Instant,
    deadline: Option<Instant>,
}

impl StartUp {
    fn new(limit: std::time::Duration) -> Self {
        let began = Instant::now();
        Self {
            began,
            deadline: began.checked_add(limit),
        }
    }

    /// The time a connect may take now: `connect_timeout`, or the time left
    /// when that is less (zero once it is up).
    fn left(&self, connect_timeout: std::time::Duration) -> std::time::Duration {
        self.deadline.map_or(connect_timeout, |deadline| {
            deadline
                .saturating_duration_since(Instant::now())
                .min(connect_timeout)
        })
    }
}
