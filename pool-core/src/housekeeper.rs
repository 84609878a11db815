//! The housekeeper: one task per pool that retires idle and old connections,
//! pings idle ones (keepalive), refills to `min_size`, reports leaks and
//! refreshes the exported gauges.
//!
//! It wakes every tick: `min(housekeeping_period, leak_detection_threshold,
//! keepalive_interval, 1 s)`. Every tick refills to `min_size`, reports
//! leaks and refreshes the gauges; a sweep (retirement and keepalive pings)
//! runs every `housekeeping_period`, or every tick while keepalive is on, so
//! a ping is at most one tick late.
//!
//! It holds only a `Weak` reference and drops its strong one before
//! sleeping, so dropping the last `Pool` handle stops it (and drops the
//! manager once the last checked-out connection is back). It stops on close
//! too. Nothing on the checkout path depends on it: an expired connection is
//! refused at checkout anyway, and creation is driven by waiters.
//!
//! Each sweep takes the idle stack's chain at once (a single CAS), sorts it,
//! and puts the keepers back in their order. During that instant a caller
//! finds the stack empty and queues; the keepers are then handed to it
//! directly (and `try_get` may find nothing).

use std::future::Future;
use crate::sync::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use pool_api::ManageConnection;
use tokio::time::Instant;

use crate::clock::Stamp;
use crate::connection::{OnDrop, PooledConnection};
use crate::index_stack::NIL;
use crate::shared::Shared;
use crate::slots::Handoff;
use crate::stats::{Reason, Stats};

/// The longest a tick may be apart, so gauges stay fresh.
const MAX_TICK: Duration = Duration::from_secs(1);

impl<M: ManageConnection> Shared<M> {
    /// Starts the housekeeper if it is not running and a runtime is at hand.
    pub(crate) fn ensure_housekeeper(self: &Arc<Self>) {
        spawn_once(&self.housekeeper_started, || run(Arc::downgrade(self)));
    }

    /// Time between ticks.
    fn tick(&self) -> Duration {
        let c = &self.config;
        [
            Some(c.housekeeping_period()),
            c.leak_detection_threshold(),
            c.keepalive_interval(),
            Some(MAX_TICK),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(MAX_TICK)
    }

    /// One housekeeping pass. `sweep` runs retirement and keepalive (every
    /// `housekeeping_period`, or every tick while keepalive is on); every
    /// tick refills, checks leaks and exports.
    pub(crate) async fn housekeep(self: &Arc<Self>, sweep: bool) {
        let now = self.clock.now();
        if sweep {
            let to_ping = self.retire_idle(now);
            self.ping(to_ping, now).await;
        }
        self.request_connections();
        self.report_leaks(now);
        #[cfg(feature = "metrics")]
        {
            let fast = self.slots.checkouts();
            let summary = self.stats.acquire_wait.summary_with_zeros(fast, []);
            self.export.refresh(
                self.state(),
                self.config.min_size(),
                summary.count,
                fast,
                self.stats.acquire_wait.shards(),
                self.stats.hold.shards(),
            );
        }
    }

    /// Closes idle connections past their idle timeout (never below
    /// `min_size`) or lifetime; returns those due a keepalive ping.
    fn retire_idle(self: &Arc<Self>, now: Stamp) -> Vec<Handoff<M::Connection>> {
        let mut taken = Vec::new();
        let mut index = self.idle.take_all();
        while index != NIL {
            let next = self.slots.links.next(index);
            // SAFETY: `take_all` handed us the whole chain.
            let entry = unsafe { self.slots.take(index) };
            taken.push(Handoff { index, entry });
            index = next;
        }
        let mut open = self.open_count();
        let min = self.config.min_size();
        let mut keep = Vec::with_capacity(taken.len());
        let mut to_ping = Vec::new();
        // Oldest use first: the bottom of the stack idles out first.
        for h in taken.into_iter().rev() {
            let idle_out = self
                .config
                .idle_timeout()
                .is_some_and(|t| h.entry.idle_for(now) >= t && open > min);
            let reason = self
                .expired(&h.entry, now)
                .or(idle_out.then_some(Reason::IdleTimeout));
            if let Some(reason) = reason {
                open -= 1;
                self.evict(h.index, h.entry, reason);
            } else if self
                .config
                .keepalive_interval()
                .is_some_and(|k| now.since(h.entry.last_ping.max(h.entry.last_used)) >= k)
            {
                to_ping.push(h);
            } else {
                keep.push(h);
            }
        }
        // Back in their order: the most recently used ends on top.
        for h in keep {
            self.deliver(h.index, h.entry);
        }
        to_ping
    }

    /// Pings idle connections concurrently; those that fail are closed.
    async fn ping(self: &Arc<Self>, to_ping: Vec<Handoff<M::Connection>>, now: Stamp) {
        if to_ping.is_empty() {
            return;
        }
        let mut pings = tokio::task::JoinSet::new();
        for h in to_ping {
            // Out of the idle set while pinged; a guard that closes the
            // connection if the ping is cancelled or fails.
            self.slots.get(h.index).set(crate::slots::State::InUse);
            let mut guard = PooledConnection::new(
                self.clone(),
                h.index,
                h.entry,
                now,
                OnDrop::Close(Reason::Validation),
            );
            let limit = self.config.validation_timeout();
            pings.spawn(async move {
                let shared = guard.shared.clone();
                match tokio::time::timeout(limit, shared.manager.is_valid(&mut guard)).await {
                    Ok(Ok(())) => {
                        let mut entry = guard.take_entry();
                        entry.last_ping = shared.clock.now();
                        shared.deliver(guard.index, entry);
                    }
                    Ok(Err(e)) => {
                        tracing::info!(pool = shared.config.name(), error = %e, "keepalive ping failed; closing connection");
                    }
                    Err(_) => {
                        tracing::info!(pool = shared.config.name(), "keepalive ping timed out; closing connection");
                    }
                }
            });
        }
        while let Some(done) = pings.join_next().await {
            if let Err(e) = done {
                tracing::error!(pool = self.config.name(), error = %e, "keepalive ping task failed");
            }
        }
    }

    /// Reports connections held past the leak threshold, once each.
    fn report_leaks(&self, now: Stamp) {
        let Some(threshold) = self.config.leak_detection_threshold() else {
            return;
        };
        for i in 0..self.slots.len() {
            // `i < max_size <= MAX_POOL_SIZE`.
            let slot = self.slots.get(i as u16);
            if let Some((held, trace)) = slot.leak.check(now, threshold) {
                Stats::bump(&self.stats.leaks);
                #[cfg(feature = "metrics")]
                self.export.leaked();
                tracing::warn!(
                    pool = self.config.name(),
                    held_ms = held.as_millis() as u64,
                    threshold_ms = threshold.as_millis() as u64,
                    "connection held past the leak detection threshold; acquired at:{trace}"
                );
            }
        }
    }
}

impl<M: ManageConnection> Shared<M> {
    /// Tells the sweeper (starting it if needed) that a waiter with an
    /// earlier deadline than it sleeps until has queued.
    pub(crate) fn rearm_sweeper(self: &Arc<Self>) {
        spawn_once(&self.sweeper_started, || {
            sweep(Arc::downgrade(self), self.sweeper.clone())
        });
        self.sweeper.notify_one();
    }
}

/// Spawns the task `make` builds, unless `started` says it already was;
/// does nothing outside a tokio runtime (the next call from inside one
/// starts it).
fn spawn_once<F>(started: &crate::sync::AtomicU32, make: impl FnOnce() -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    if started.load(Ordering::Relaxed) != 0 {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if started
        .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        runtime.spawn(make());
    }
}

/// The sweeper task: sleeps until the earliest waiter deadline, times out
/// the waiters that are due, and sleeps again; woken early when a waiter
/// with an earlier deadline queues. Holds only a `Weak` (the pool's drop
/// wakes it to end).
async fn sweep<M: ManageConnection>(weak: Weak<Shared<M>>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let woken = wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let next = {
            let Some(shared) = weak.upgrade() else { return };
            if shared.is_closed() {
                return;
            }
            // Deadlines are pool stamps; the sleep is on tokio's clock.
            let now = shared.clock.now();
            let next = shared.waiters.sweep(&shared.idle, now);
            next.map(|due| Instant::now() + due.since(now))
        };
        match next {
            Some(at) => {
                let sleep = tokio::time::sleep_until(at);
                tokio::pin!(sleep);
                // Whichever comes first: the deadline or a wake-up.
                std::future::poll_fn(|cx| {
                    if sleep.as_mut().poll(cx).is_ready() || woken.as_mut().poll(cx).is_ready() {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                })
                .await;
            }
            None => woken.await,
        }
    }
}

/// The housekeeper task.
async fn run<M: ManageConnection>(weak: Weak<Shared<M>>) {
    let mut last_sweep: Option<Instant> = None;
    loop {
        let tick = {
            let Some(shared) = weak.upgrade() else { return };
            if shared.is_closed() || shared.handles.load(Ordering::Relaxed) == 0 {
                return;
            }
            let now = Instant::now();
            // With keepalive on, sweep on every tick (at most
            // `keepalive_interval` and 1 s apart), so a connection is pinged
            // at most one tick after it is due, not up to a whole
            // `housekeeping_period` later.
            let sweep = shared.config.keepalive_interval().is_some()
                || last_sweep.is_none_or(|t| {
                    now.saturating_duration_since(t) >= shared.config.housekeeping_period()
                });
            if sweep {
                last_sweep = Some(now);
            }
            shared.housekeep(sweep).await;
            shared.tick()
            // The strong reference is dropped here, before sleeping.
        };
        tokio::time::sleep(tick).await;
    }
}
