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
//! How many connections are wanted and how many connectors may run is
//! `demand.rs`'s: this file acts on those counts.

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

/// A connector's place, claimed by [`Connector::claim`](super::demand::Connector::claim) and owned by the
/// connector task from before its spawn (see `Connector`, "Places"):
/// counted out when dropped, however the task ends, or if it never runs.
pub(crate) struct Place<M: ManageConnection> {
    shared: Arc<Engine<M>>,
    /// Set by [`Engine::connector_done`]: the connector ended on its own
    /// and looks at the demand again itself.
    done: bool,
}

impl<M: ManageConnection> Place<M> {
    /// Takes over a place [`Connector::claim`](super::demand::Connector::claim) reserved.
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
        // Named by a timeout while it runs (`Engine::oldest_connect`).
        let running = self.health.connect_started(self.clock.now());
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
        drop(running);
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

/// The connector's entry ([`Starts::connector`](super::tasks::Starts)):
/// spawns one connector on `runtime` for the place just claimed.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn start<M: ManageConnection>(
    runtime: &tokio::runtime::Handle,
    engine: &Arc<Engine<M>>,
) -> tokio::task::JoinHandle<()> {
    runtime.spawn(connector(Place::adopt(engine.clone())))
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
    use std::io::{Error, ErrorKind};

    use pool_api::PoolConfig;

    use super::*;

    /// A manager whose errors are classed by their kind: permission denied
    /// is permanent, would-block a capacity refusal, any other transient.
    #[derive(Debug)]
    struct Classed;

    #[async_trait::async_trait]
    impl ManageConnection for Classed {
        type Connection = ();
        type Error = Error;

        async fn connect(&self) -> Result<(), Error> {
            Ok(())
        }

        async fn is_valid(&self, _: &mut ()) -> Result<(), Error> {
            Ok(())
        }

        fn classify_error(&self, e: &Error) -> ErrorClass {
            match e.kind() {
                ErrorKind::PermissionDenied => ErrorClass::Permanent,
                ErrorKind::WouldBlock => ErrorClass::CapacityRefusal,
                _ => ErrorClass::Transient,
            }
        }
    }

    fn engine(fail_fast: bool) -> Engine<Classed> {
        let config = PoolConfig::builder()
            .max_size(2)
            .min_size(0)
            .fail_fast(fail_fast)
            .build()
            .unwrap();
        Engine::new(Classed, config, None)
    }

    fn failed(kind: ErrorKind) -> OpenError<Error> {
        OpenError::Backend(Error::from(kind))
    }

    const PACE: AfterFailure = AfterFailure::Pace { wakeable: true };
    const PACE_UNWAKEABLE: AfterFailure = AfterFailure::Pace { wakeable: false };

    #[test]
    fn a_first_transient_failure_is_retried_and_a_second_fails_fast() {
        let e = engine(true);
        assert_eq!(
            e.connect_failed(failed(ErrorKind::ConnectionRefused)),
            AfterFailure::RetryNow
        );
        assert!(!e.health.is_down(), "one failure alone tells no caller");
        assert_eq!(e.connect_failed(failed(ErrorKind::ConnectionRefused)), PACE);
        assert!(e.health.is_down(), "nothing open could come back: down");
    }

    #[test]
    fn a_permanent_failure_is_not_retried_and_fails_fast_at_once() {
        let e = engine(true);
        assert_eq!(e.connect_failed(failed(ErrorKind::PermissionDenied)), PACE);
        assert!(e.health.is_down());
    }

    #[test]
    fn a_capacity_refusal_is_paced_unwakeably_and_never_fails_fast() {
        let e = engine(true);
        for _ in 0..3 {
            assert_eq!(
                e.connect_failed(failed(ErrorKind::WouldBlock)),
                PACE_UNWAKEABLE
            );
        }
        assert!(!e.health.is_down());
    }

    #[test]
    fn a_panicking_connect_is_paced_unwakeably_and_never_fails_fast() {
        let e = engine(true);
        for _ in 0..2 {
            let panic: Box<dyn std::any::Any + Send> = Box::new("connect panicked");
            assert_eq!(
                e.connect_failed(OpenError::Panicked(panic)),
                PACE_UNWAKEABLE
            );
        }
        assert!(!e.health.is_down());
    }

    #[test]
    fn without_fail_fast_failures_are_paced_and_the_database_never_down() {
        let e = engine(false);
        assert_eq!(
            e.connect_failed(failed(ErrorKind::ConnectionRefused)),
            AfterFailure::RetryNow
        );
        assert_eq!(e.connect_failed(failed(ErrorKind::ConnectionRefused)), PACE);
        assert_eq!(e.connect_failed(failed(ErrorKind::PermissionDenied)), PACE);
        assert!(!e.health.is_down());
    }
}
