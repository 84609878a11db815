//! One instance's fair share state, as the managers hold it: the budget,
//! the seat accounting (`ledger.rs`), and what ties it to its control task
//! (the control session's id and pid, and the task's wake-up). The
//! connect and return paths call it without I/O; the control task
//! (`control.rs`) runs the I/O and writes what it read here.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::budget::{FleetBudget, FleetBudgetExhausted};
use super::ledger::{Claim, FleetShareView, Ledger, Refusal};
use super::sql::{self, Deference};

/// One instance's fair share state: counts and decisions the control task
/// writes once per interval, read without I/O on connect and return.
///
/// The fields the control task reads and writes are visible to the
/// `fleet` module; every atomic here is a hint (Relaxed throughout), as
/// in the seat accounting it holds.
#[doc(hidden)]
pub struct FleetShare {
    pub(super) budget: FleetBudget,
    pub(super) interval: Duration,
    pub(super) ledger: Ledger,
    /// The control session's backend pid (0: none).
    pub(super) control_pid: AtomicI32,
    /// This instance's id: the second key of its member lock, and what it
    /// notifies when it cannot join. Random, positive; drawn again if
    /// another instance holds the same.
    pub(super) id: AtomicI32,
    /// A control task is running for this instance.
    pub(super) running: AtomicBool,
    /// Wakes the control task: a refusal to signal, or this state dropped.
    pub(super) wake: Arc<Notify>,
}

impl fmt::Debug for FleetShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = self.ledger.view();
        f.debug_struct("FleetShare")
            .field("budget", &self.budget.name())
            .field("held", &self.ledger.held())
            .field("share", &view.share)
            .field("members", &view.members)
            .field("wanting", &view.wanting)
            .finish_non_exhaustive()
    }
}

impl Drop for FleetShare {
    fn drop(&mut self) {
        // The control task holds only a `Weak`: woken, it finds this gone,
        // closes its session and ends.
        self.wake.notify_one();
    }
}

impl FleetShare {
    /// The state for `budget`; `None` when its fair share is off.
    #[doc(hidden)]
    pub fn new(budget: &FleetBudget) -> Option<Arc<Self>> {
        let interval = budget.share_interval()?;
        Some(Arc::new(Self {
            budget: budget.clone(),
            interval,
            ledger: Ledger::new(budget.total()),
            control_pid: AtomicI32::new(0),
            id: AtomicI32::new(random_id()),
            running: AtomicBool::new(false),
            wake: Arc::new(Notify::new()),
        }))
    }

    /// Before a connect: `Err` when the instance is at or above its share
    /// while another wants (no connection is opened for a ticket it would
    /// not take), else how to claim.
    ///
    /// # Errors
    ///
    /// [`FleetBudgetExhausted`], as when no ticket is free.
    #[doc(hidden)]
    pub fn admit(&self) -> Result<Claim, FleetBudgetExhausted> {
        self.ledger.admit().map_err(|refusal| {
            if refusal == Refusal::Knocked {
                // The control session tries to join again now.
                self.wake.notify_one();
            }
            self.budget.exhausted()
        })
    }

    /// The claim query for `claim`, parameters written in: a borrowing
    /// claim takes no ticket while another instance holds its wanting lock.
    #[doc(hidden)]
    pub fn claim_sql(&self, claim: Claim) -> String {
        let budget = &self.budget;
        let defer = claim.borrowing.then(|| Deference {
            control_key: budget.control_key(),
            control_pid: self.control_pid.load(Ordering::Relaxed),
        });
        sql::claim(
            budget.key(),
            budget.total_i32(),
            budget.random_start(),
            defer,
        )
    }

    /// A claim took its ticket: counted until the returned seat drops.
    #[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
    #[doc(hidden)]
    pub fn seat(self: &Arc<Self>) -> FleetSeat {
        self.note_claimed();
        FleetSeat(Arc::clone(self))
    }

    /// A claim took its ticket, for a manager that calls
    /// [`note_closed`](Self::note_closed) when the connection closes.
    #[doc(hidden)]
    pub fn note_claimed(&self) {
        self.ledger.note_claimed();
    }

    /// A connection counted by [`note_claimed`](Self::note_claimed) closes
    /// (one given back by [`give_back_counted`](Self::give_back_counted)
    /// was counted out already).
    #[doc(hidden)]
    pub fn note_closed(&self) {
        self.ledger.note_closed();
    }

    /// A claim found no ticket: below the share, that is need, signalled
    /// at once (the control task wakes and takes the wanting lock).
    #[doc(hidden)]
    pub fn refused(&self, claim: Claim) {
        if self.ledger.refused(claim) {
            self.wake.notify_one();
        }
    }

    /// Whether one more connection is to be given back now; takes it from
    /// the count. No I/O: one load when there is nothing to give back.
    #[doc(hidden)]
    pub fn take_give_back(&self) -> bool {
        self.ledger.take_give_back()
    }

    /// [`take_give_back`](Self::take_give_back) for a manager that counts
    /// closes: the connection given back is counted out now, and its close
    /// later is not counted again.
    #[doc(hidden)]
    pub fn give_back_counted(&self) -> bool {
        self.ledger.give_back_counted()
    }

    /// This instance's view: (live instances, share, held, wanting).
    #[doc(hidden)]
    pub fn view(&self) -> FleetShareView {
        self.ledger.view()
    }

    /// The control session is gone: forget what it read, so that this
    /// instance neither gives back nor holds back on stale news.
    pub(super) fn forget(&self) {
        self.ledger.forget();
        self.control_pid.store(0, Ordering::Relaxed);
    }
}

/// A random instance id: positive, so that its negation (the wanting
/// lock) never meets a member lock.
pub(super) fn random_id() -> i32 {
    fastrand::i32(1..=i32::MAX)
}

/// One ticket counted for its instance; dropped with its connection.
#[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
#[doc(hidden)]
pub struct FleetSeat(Arc<FleetShare>);

impl FleetSeat {
    /// Whether this connection is to be given back (closed on return).
    #[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
    #[doc(hidden)]
    pub fn give_back(&self) -> bool {
        self.0.take_give_back()
    }
}

impl fmt::Debug for FleetSeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FleetSeat")
    }
}

impl Drop for FleetSeat {
    fn drop(&mut self) {
        self.0.ledger.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::sql::as_oid;

    #[test]
    fn a_budget_without_fair_share_has_no_share_state() {
        let budget = FleetBudget::new("x", 3).expect("valid");
        let off = budget.clone().with_share_interval(None).expect("off");
        assert!(FleetShare::new(&off).is_none());
        assert!(FleetShare::new(&budget).is_some());
    }

    #[test]
    fn claims_borrow_politely_and_seats_count_each_connection_once() {
        let budget = FleetBudget::new("a", 4).expect("valid");
        let share = FleetShare::new(&budget).expect("on");
        // Before the first count the share is the whole budget.
        let claim = share.admit().expect("admitted");
        assert!(!claim.borrowing);
        let sql = share.claim_sql(claim);
        assert!(!sql.contains('$') && !sql.contains("CASE"), "{sql}");
        assert!(
            sql.contains("pg_try_advisory_lock((-468965076)::int4, t)"),
            "{sql}"
        );

        let seats: Vec<FleetSeat> = (0..3).map(|_| share.seat()).collect();
        assert_eq!(share.view().held, 3);
        // A count of 2 instances: share 2, this one borrows one.
        share.ledger.force(2, false, 0);
        let claim = share.admit().expect("nobody wants");
        assert!(claim.borrowing);
        let sql = share.claim_sql(claim);
        assert!(
            sql.contains("CASE WHEN EXISTS") && sql.contains("ELSE pg_try_advisory_lock"),
            "{sql}"
        );
        assert!(
            sql.contains(&as_oid(budget.control_key()).to_string()),
            "{sql}"
        );
        // Another wants: no connect, and one connection to give back.
        share.ledger.force(2, true, 1);
        assert_eq!(share.admit(), Err(budget.exhausted()));
        assert!(seats[0].give_back());
        assert!(!seats[1].give_back(), "only the excess");
        drop(seats);
        assert_eq!(share.view().held, 0);
    }
}
