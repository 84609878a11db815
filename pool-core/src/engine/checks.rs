//! The checkout checks: what a connection goes through between leaving
//! the idle set and reaching a caller. On the fast path, expiry and
//! `has_broken` (`check_not_broken`), and whether anything slower is due
//! (`needs_check`); on the slow path, `vet_handoff`: a connection opened
//! for this caller is handed over as it is, any other gets the fast
//! path's checks, and one that needs more goes to `check_handoff`, which
//! shows it to the `before_acquire` hook and, when due, `is_valid`
//! (`run_checks`), within `validation_timeout` and the caller's deadline,
//! while a `Floating` holds it (closing it if the caller gives up).
//! `is_broken` (the manager's `has_broken`, its panic caught) serves the
//! return too.
//!
//! Each check returns a verdict (`Option<Held>`, [`Vetted`],
//! `Result<_, Refused>`) and hands nothing out: the checkout
//! (`checkout.rs`) makes the guard. An unusable connection is closed here
//! (`evict`, the retirement sink).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use pool_api::{ConnectionInfo, ManageConnection, TimeoutPhase, ValidationMode};
use tokio::time::Instant;

use super::in_flight::Floating;
use super::Engine;
use crate::clock::Stamp;
use crate::slots::{Entry, Held};
use crate::stats::Reason;

/// What [`Engine::vet_handoff`] made of a connection handed to a waiter:
/// a verdict, which the checkout acts on.
pub(super) enum Vetted {
    /// It passed: the checkout makes the caller's guard of it.
    Pass(Held),
    /// It was unusable and closed; try another.
    Retry,
    /// It is due for the `before_acquire` hook or validation
    /// ([`Engine::check_handoff`]).
    Due(Held),
}

/// Why a checkout attempt did not produce a connection.
pub(super) enum Refused {
    /// That connection was unusable and closed; try another.
    Retry,
    /// The deadline passed during this phase.
    Timeout(TimeoutPhase),
}

impl<M: ManageConnection> Engine<M> {
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
            self.saw_failure(now);
        }
        Ok(broken)
    }

    /// Whether a connection taken from idle must be shown to the
    /// `before_acquire` hook or validated before it is handed out: the
    /// hook sees every one, whoever opened it (a `min_size` connection
    /// included); validation skips one opened moments ago and never
    /// checked out, which its connect just showed to work.
    #[inline]
    pub(super) fn needs_check(&self, entry: &Entry<M::Connection>, now: Stamp) -> bool {
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
    pub(super) fn check_not_broken(self: &Arc<Self>, mut held: Held, now: Stamp) -> Option<Held> {
        let slots = &self.slots;
        match self.is_broken(&mut slots.entry_mut(&mut held).conn, now) {
            Ok(false) => Some(held),
            Ok(true) => {
                // A connection that is broken at once, connect after
                // connect, is a rejection streak like failed validations:
                // connectors back off by it instead of opening and closing
                // as fast as the server answers (see `engine/connect.rs`).
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
    /// The checks of a connection handed to a waiter that need no
    /// waiting: expiry, whether it was opened for this caller, and
    /// `has_broken`. A connection that passes them and needs nothing
    /// slower becomes the caller's guard at once, without an `await`.
    #[inline]
    pub(super) fn vet_handoff(self: &Arc<Self>, held: Held, now: Stamp) -> Vetted {
        let slots = &self.slots;
        let entry = slots.entry(&held);
        if let Some(reason) = self.expired(entry, now) {
            self.evict(slots.take_held(held), reason);
            return Vetted::Retry;
        }
        // Opened for this caller (or for a caller who left it to this
        // one) and never idle: handed out as is. `has_broken`, validation
        // and `before_acquire` are about a connection that was used or
        // waited; asking them here threw away connections nobody had
        // touched (a manager whose `has_broken` says true after first use
        // left every caller waiting out its timeout).
        if entry.from_connect {
            self.health.count_check(&self.clock, entry.created_at, true);
            return Vetted::Pass(held);
        }
        // The same check as the fast path's.
        let Some(held) = self.check_not_broken(held, now) else {
            return Vetted::Retry;
        };
        let entry = slots.entry(&held);
        if self.needs_check(entry, now) {
            return Vetted::Due(held);
        }
        self.health.count_check(&self.clock, entry.created_at, true);
        Vetted::Pass(held)
    }

    /// The checks of a connection [`vet_handoff`](Self::vet_handoff) found
    /// due for the `before_acquire` hook or validation, while a `Floating`
    /// holds it. `Ok`: it passed, back in its slot, with the time the
    /// checks ended; the checkout makes the caller's guard of it.
    pub(super) async fn check_handoff(
        self: &Arc<Self>,
        held: Held,
        now: Stamp,
        deadline: Option<Stamp>,
    ) -> Result<(Held, Stamp), Refused> {
        let slots = &self.slots;
        let entry = slots.entry(&held);
        let created_at = entry.created_at;
        let idle_for = entry.idle_for(now);
        // Opened moments ago and never checked out: its connect just
        // showed it works (the hook may still be why it is here).
        let validate = self.validation_due(entry, now) && !is_fresh(entry, now);
        // In flight until checked: dropping it (a cancelled `get()`) closes
        // the connection, which may be mid-ping.
        let mut conn = Floating::new(self.clone(), slots.take_held(held), Reason::Validation);
        // The checks' time: `validation_timeout`, or what is left of the
        // caller's when that is less.
        let allowed = match deadline {
            Some(d) => self.config.validation_timeout().min(d.since(now)),
            None => self.config.validation_timeout(),
        };
        let checked = self
            .run_checks(&mut conn, validate, idle_for, now, allowed, deadline)
            .await;
        self.health
            .count_check(&self.clock, created_at, checked.is_ok());
        checked?;
        let now = self.clock.now();
        let held = slots.hold(conn.land());
        Ok((held, now))
    }
    /// Validation (when due) and the `before_acquire` hook, within
    /// `allowed` from now; a refusal drops `conn`, which closes it.
    async fn run_checks(
        &self,
        conn: &mut Floating<M>,
        validate: bool,
        idle_for: Duration,
        now: Stamp,
        allowed: Duration,
        deadline: Option<Stamp>,
    ) -> Result<(), Refused> {
        // The checks run on tokio timers: the limit is a tokio instant.
        let limit = Instant::now().checked_add(allowed);
        let judge = |checked, what| self.judge(checked, deadline, what, allowed);
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
                    judge(other, "before_acquire hook")?;
                }
            }
        }
        if validate {
            conn.closes_as(Reason::Validation);
            let checked = run_until(limit, self.manager.is_valid(conn.conn_mut())).await;
            judge(checked, "validation")?;
            // Known alive now: past any failure epoch seen so far.
            conn.entry_mut().last_ping = self.clock.now();
        }
        Ok(())
    }
    /// Turns a failed check into `Retry` (recording the error) or, when the
    /// caller's deadline has passed, a timeout in that phase; `allowed`:
    /// the time the check was given.
    fn judge(
        &self,
        checked: Option<Result<(), M::Error>>,
        deadline: Option<Stamp>,
        what: &'static str,
        allowed: Duration,
    ) -> Result<(), Refused> {
        match checked {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                tracing::debug!(pool = self.config.name(), error = %pool_api::error_chain::ErrorChain(&e), "{what} failed; closing connection");
                self.health.set_last_error(std::sync::Arc::new(e));
                self.saw_failure(self.clock.now());
                Err(Refused::Retry)
            }
            None => {
                self.health
                    .set_last_error(std::sync::Arc::new(CheckTimedOut(what, allowed)));
                self.saw_failure(self.clock.now());
                if deadline.is_some_and(|d| self.clock.now() >= d) {
                    Err(Refused::Timeout(TimeoutPhase::Validation))
                } else {
                    Err(Refused::Retry)
                }
            }
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

/// A checkout check that ran past the time it was given
/// (`validation_timeout`, or what was left of the caller's deadline when
/// that was less); kept as the pool's last error: `validation did not
/// finish within 2s`.
#[derive(Debug)]
struct CheckTimedOut(&'static str, Duration);

impl std::fmt::Display for CheckTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let limit = to_the_millisecond(self.1);
        write!(f, "{} did not finish within {limit:?}", self.0)
    }
}

/// A limit as a person reads it, as the pool's other texts give theirs:
/// whole milliseconds from a millisecond up (a limit cut from what was
/// left of a deadline reads `2s`, not `1.999871002s`), whole microseconds
/// below.
fn to_the_millisecond(d: Duration) -> Duration {
    let unit: u128 = if d >= Duration::from_millis(1) {
        1_000_000
    } else {
        1_000
    };
    let nanos = (d.as_nanos() + unit / 2) / unit * unit;
    u64::try_from(nanos).map_or(d, Duration::from_nanos)
}

impl std::error::Error for CheckTimedOut {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_check_timeout_says_its_limit_rounded_for_people() {
        let text = |nanos| CheckTimedOut("validation", Duration::from_nanos(nanos)).to_string();
        assert_eq!(text(1_999_871_002), "validation did not finish within 2s");
        assert_eq!(text(250_000_000), "validation did not finish within 250ms");
        assert_eq!(text(41_600), "validation did not finish within 42µs");
        let max = CheckTimedOut("validation", Duration::MAX).to_string();
        assert_eq!(
            max,
            format!("validation did not finish within {:?}", Duration::MAX)
        );
    }
}
