//! The checkout path: `get()` and `try_get()`.
//!
//! Fast path: pop the idle stack (one CAS), check the connection's expiry,
//! skip validation inside the bypass window, hand out a guard. Slow path:
//! queue as a waiter (see `waiters.rs`), ask for connections, and wait for a
//! handoff until the deadline.

use std::time::Duration;

use pool_api::{ConnectionInfo, ManageConnection, PoolError, TimeoutPhase, ValidationMode};
use tokio::time::Instant;

use crate::connection::{OnDrop, PooledConnection};
use crate::counts::Counted;
use crate::index_stack::Popped;
use crate::shared::Shared;
use crate::slots::Handoff;
use crate::stats::Reason;
use crate::waiters::{Cell, Registered};
use std::sync::Arc;

/// Why a checkout attempt did not produce a connection.
enum Refused {
    /// That connection was unusable and closed; try another.
    Retry,
    /// The deadline passed during this phase.
    Timeout(TimeoutPhase),
}

/// Ends a registered wait; if the caller gave up after a connection was
/// handed to it, passes that connection on.
struct WaitGuard<'a, M: ManageConnection> {
    shared: &'a Arc<Shared<M>>,
    cell: crate::sync::Arc<Cell<Handoff<M::Connection>>>,
}

impl<M: ManageConnection> Drop for WaitGuard<'_, M> {
    fn drop(&mut self) {
        if let Some(h) = self.shared.waiters.finish(&self.cell, &self.shared.idle) {
            self.shared.deliver(h.index, h.entry, Counted::InUse);
        }
    }
}

impl<M: ManageConnection> Shared<M> {
    /// Pops an idle connection, counting it in use.
    fn pop_idle(&self) -> Result<Option<Handoff<M::Connection>>, PoolError<M::Error>> {
        match self.idle.pop(&self.slots.links) {
            Popped::Node(index) => Ok(Some(self.take_popped(index))),
            Popped::Empty | Popped::Waiters => Ok(None),
            Popped::Closed => Err(PoolError::Closed),
        }
    }

    fn take_popped(&self, index: u16) -> Handoff<M::Connection> {
        // SAFETY: the pop (or registration) that produced `index` made us its
        // owner.
        let entry = unsafe { self.slots.take(index) };
        self.counts.shift(Counted::Idle, Counted::InUse);
        Handoff { index, entry }
    }

    /// Waits for a handoff until `deadline`.
    async fn wait_for(
        self: &Arc<Self>,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<Handoff<M::Connection>, PoolError<M::Error>> {
        self.ensure_housekeeper();
        let cell = match self.waiters.register(&self.idle, &self.slots.links) {
            Registered::Queued(cell) => cell,
            Registered::Node(index) => return Ok(self.take_popped(index)),
            Registered::Closed => return Err(PoolError::Closed),
        };
        let guard = WaitGuard { shared: self, cell };
        self.request_connections();
        let wait = self.waiters.wait(&guard.cell);
        let handed = match deadline {
            Some(d) => tokio::time::timeout_at(d, wait).await.ok(),
            None => Some(wait.await),
        };
        match handed {
            Some(Some(h)) => Ok(h),
            Some(None) => Err(PoolError::Closed),
            None => {
                // Built while still queued, so the counts include this caller.
                let err = self.timeout_error(started, TimeoutPhase::Wait);
                drop(guard);
                Err(err)
            }
        }
    }

    /// `get()` with a total time limit.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<PooledConnection<M>, PoolError<M::Error>> {
        let started = Instant::now();
        // A limit too large to represent means no limit.
        let deadline = started.checked_add(timeout);
        let mut now = started;
        loop {
            let handoff = match self.pop_idle()? {
                Some(h) => h,
                None => {
                    let h = self.wait_for(started, deadline).await?;
                    now = Instant::now();
                    h
                }
            };
            match self.checkout(handoff, started, now, deadline).await {
                Ok(conn) => return Ok(conn),
                Err(Refused::Retry) => now = Instant::now(),
                Err(Refused::Timeout(phase)) => return Err(self.timeout_error(started, phase)),
            }
        }
    }

    /// Checks a connection about to be handed out.
    async fn checkout(
        self: &Arc<Self>,
        handoff: Handoff<M::Connection>,
        started: Instant,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Result<PooledConnection<M>, Refused> {
        let Handoff { index, entry } = handoff;
        if let Some(reason) = self.expired(&entry, now) {
            self.evict(index, entry, Counted::InUse, reason);
            return Err(Refused::Retry);
        }
        let idle_for = entry.idle_for(now);
        let validate = self.config.validation_mode() == ValidationMode::IsValid
            && idle_for >= self.config.validation_bypass();
        // Until checked, dropping the guard (a cancelled `get()`) closes the
        // connection: it may be mid-ping.
        let mut conn = PooledConnection::new(
            self.clone(),
            index,
            entry,
            now,
            OnDrop::Close(Reason::Validation),
        );
        if validate || self.hooks.is_some() {
            let limit = now.checked_add(self.config.validation_timeout());
            let limit = match (limit, deadline) {
                (Some(l), Some(d)) => Some(l.min(d)),
                (l, d) => l.or(d),
            };
            if validate {
                let checked = run_until(limit, self.manager.is_valid(&mut conn)).await;
                self.judge(checked, deadline, "validation")?;
            }
            if let Some(hooks) = &self.hooks {
                conn.on_drop = OnDrop::Close(Reason::Hook);
                let info = ConnectionInfo::new(conn.entry().created_at.elapsed(), idle_for);
                let checked = run_until(limit, hooks.before_acquire(&mut conn, info)).await;
                match checked {
                    Some(Ok(true)) => {}
                    Some(Ok(false)) => return Err(Refused::Retry),
                    other => {
                        let other = other.map(|r| r.map(|_| ()));
                        self.judge(other, deadline, "before_acquire hook")?;
                    }
                }
            }
            conn.checked_out_at = Instant::now();
        }
        conn.on_drop = OnDrop::Return;
        if conn.checked_out_at == started {
            self.stats.acquire_wait.record_zero();
        } else {
            self.stats
                .acquire_wait
                .record(conn.checked_out_at.saturating_duration_since(started));
        }
        #[cfg(feature = "metrics")]
        self.export
            .acquired(conn.checked_out_at.saturating_duration_since(started));
        if self.config.leak_detection_threshold().is_some() {
            self.slots
                .get(index)
                .leak
                .taken(self.epoch, conn.checked_out_at);
        }
        Ok(conn)
    }

    /// Turns a failed check into `Retry` (recording the error) or, when the
    /// caller's deadline has passed, a timeout in that phase.
    fn judge(
        &self,
        checked: Option<Result<(), M::Error>>,
        deadline: Option<Instant>,
        what: &'static str,
    ) -> Result<(), Refused> {
        match checked {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                tracing::debug!(pool = self.config.name(), error = %e, "{what} failed; closing connection");
                self.set_last_error(std::sync::Arc::new(e));
                Err(Refused::Retry)
            }
            None => {
                self.set_last_error(std::sync::Arc::new(CheckTimedOut(what)));
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    Err(Refused::Timeout(TimeoutPhase::Validation))
                } else {
                    Err(Refused::Retry)
                }
            }
        }
    }

    /// An idle connection now, or `None`; never waits, never connects.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<PooledConnection<M>> {
        loop {
            let Handoff { index, entry } = self.pop_idle().ok()??;
            let now = Instant::now();
            if let Some(reason) = self.expired(&entry, now) {
                self.evict(index, entry, Counted::InUse, reason);
                continue;
            }
            self.stats.acquire_wait.record_zero();
            #[cfg(feature = "metrics")]
            self.export.acquired(Duration::ZERO);
            if self.config.leak_detection_threshold().is_some() {
                self.slots.get(index).leak.taken(self.epoch, now);
            }
            return Some(PooledConnection::new(
                self.clone(),
                index,
                entry,
                now,
                OnDrop::Return,
            ));
        }
    }
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
