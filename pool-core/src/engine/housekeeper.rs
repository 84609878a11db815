//! The housekeeper: one task per pool that retires idle and old connections,
//! pings idle ones (keepalive), refills to `min_size`, reports leaks and
//! refreshes the exported gauges.
//!
//! It wakes every tick: `min(housekeeping_period, leak_detection_threshold,
//! keepalive_interval, 1 s)`. Every tick refills to `min_size` and tops up
//! `min_idle`, reports
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

use std::sync::{Arc, Weak};
use std::time::Duration;

use pool_api::ManageConnection;
use tokio::time::Instant;

use crate::clock::Stamp;
use crate::engine::in_flight::Floating;
use crate::engine::returning::Returning;
use crate::engine::Engine;
use crate::slots::{Occupied, State};
use crate::stats::Reason;

/// The longest a tick may be apart, so gauges stay fresh.
const MAX_TICK: Duration = Duration::from_secs(1);

impl<M: ManageConnection> Engine<M> {
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
        // Suspended: nothing is retired (nor opened: see
        // `request_connections`).
        if sweep && !self.is_suspended() {
            let to_ping = self.retire_idle(now);
            self.ping(to_ping).await;
        }
        self.request_connections();
        self.report_leaks(now);
        #[cfg(feature = "metrics")]
        {
            let fast = self.slots.checkouts();
            let stats = &self.stats;
            let summary = stats.acquire_wait.summary_with_zeros(fast, []);
            self.export.refresh(
                self.state(),
                self.config.min_size(),
                summary.count,
                fast,
                stats.acquire_wait.shards(),
                stats.hold.shards(),
            );
        }
    }

    /// Closes idle connections past their idle timeout (never below
    /// `min_size` open nor below `min_idle` idle) or lifetime; returns
    /// those due a keepalive ping.
    pub(crate) fn retire_idle(self: &Arc<Self>, now: Stamp) -> Vec<Occupied<M::Connection>> {
        let taken = self.collect_idle();
        let mut open = self.slots.open();
        let config = &self.config;
        let min = config.min_size();
        let min_idle = config.min_idle() as usize;
        let mut idle = taken.len();
        let mut keep = Vec::with_capacity(taken.len());
        let mut to_ping = Vec::new();
        // Oldest use first: the bottom of the stack idles out first.
        for h in taken.into_iter().rev() {
            let idle_out = config
                .idle_timeout()
                .is_some_and(|t| h.entry.idle_for(now) >= t && open > min && idle > min_idle);
            let reason = self
                .expired(&h.entry, now)
                .or(idle_out.then_some(Reason::IdleTimeout));
            if let Some(reason) = reason {
                open -= 1;
                idle -= 1;
                self.evict(h, reason);
            } else if config
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
            self.deliver(h);
        }
        to_ping
    }

    /// Pings idle connections concurrently; those that fail are closed.
    async fn ping(self: &Arc<Self>, to_ping: Vec<Occupied<M::Connection>>) {
        if to_ping.is_empty() {
            return;
        }
        let mut pings = tokio::task::JoinSet::new();
        for h in to_ping {
            // Out of the idle set while pinged, in flight: closed if the
            // ping is cancelled or fails.
            self.slots.slot(&h).set(State::InUse);
            let mut conn = Floating::new(self.clone(), h, Reason::Validation);
            // Idle again in a moment: supply for a caller queuing meanwhile
            // (`returning.rs`, "On the way back"), counted before the spawn.
            let mut supply = Returning::new(self.clone());
            let limit = self.config.validation_timeout();
            pings.spawn(async move {
                let shared = conn.shared().clone();
                let name = shared.config.name();
                let ping = tokio::time::timeout(limit, shared.manager.is_valid(conn.conn_mut()));
                match supply.within_grace(ping).await {
                    Ok(Ok(())) => {
                        let mut h = conn.land();
                        h.entry.last_ping = shared.clock.now();
                        shared.deliver(h);
                        drop(supply);
                    }
                    Ok(Err(e)) => {
                        tracing::info!(pool = name, error = %pool_api::error_chain::ErrorChain(&e), "keepalive ping failed; closing connection");
                    }
                    Err(_) => {
                        tracing::info!(pool = name, "keepalive ping timed out; closing connection");
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
        let backtrace = self.config.leak_detection_backtrace();
        for slot in self.slots.iter() {
            let leak = if backtrace {
                slot.leak.check(now, threshold)
            } else {
                slot.leak.check_site(now, threshold)
            };
            if let Some(leak) = leak {
                self.leaked(leak, threshold);
            }
        }
    }
}

/// The housekeeper task (started by `Housekeeper::ensure`, `tasks.rs`).
/// The housekeeper's entry ([`Starts::housekeeper`](super::tasks::Starts)).
pub(crate) fn start<M: ManageConnection>(weak: Weak<Engine<M>>) -> super::tasks::Task {
    Box::pin(run(weak))
}

async fn run<M: ManageConnection>(weak: Weak<Engine<M>>) {
    // The first sweep comes one period after the start, not at once: the
    // housekeeper starts when a caller first waits, the moment a sweep
    // (which takes the idle set for an instant) would send the callers
    // behind it to queue and ask for connections they do not need. A
    // connection idle too long meanwhile is still refused at checkout
    // (expiry) or validated (the bypass window).
    let mut last_sweep: Option<Instant> = Some(Instant::now());
    loop {
        let tick = {
            let Some(shared) = weak.upgrade() else { return };
            if shared.is_closed() || !shared.has_handles() {
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
