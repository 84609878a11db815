//! One instance's seat accounting under fair share: the tickets its
//! connections hold, its share as last counted, what it is to give back,
//! and whether a connect may claim now. Pure: no I/O, no clock, no
//! runtime; the connect and return paths call it without I/O, and the
//! control task writes a recheck's outcome into it once per interval.
//!
//! Every atomic here is a counter or a flag read as a hint (Relaxed
//! throughout): nothing else is published through them, and a stale value
//! costs at most one interval's delay in a decision that the next recheck
//! makes again.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::share::{decide, Decision};

/// How a connect claims its ticket under fair share, decided before it
/// connects ([`FleetShare::admit`](super::FleetShare::admit)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub struct Claim {
    /// At or above its share: the ticket would be borrowed, and is not
    /// taken while another instance wants.
    pub(super) borrowing: bool,
}

/// What an instance knows of its fair share, as of its last recheck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetShareView {
    /// Live instances of the budget counted (0 before the first count).
    pub members: u32,
    /// This instance's guaranteed share (`fair_share(total, members)`).
    pub share: u32,
    /// This instance's connections holding a ticket.
    pub held: u32,
    /// Whether this instance signals need (holds its wanting lock).
    pub wanting: bool,
}

/// Why a connect is refused before it connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The control session knocked and has not joined yet: the control
    /// task is to try joining again now.
    Knocked,
    /// At or above its share while another instance wants.
    OthersWant,
}

/// The counts and flags of one instance's fair share.
#[derive(Debug)]
pub(super) struct Ledger {
    /// Connections of this instance holding a ticket.
    held: AtomicU32,
    /// Given back by `give_back_counted`, not yet closed (managers that
    /// count closes, not seats: `note_closed`).
    closing: AtomicU32,
    /// The guaranteed share, as last computed.
    share: AtomicU32,
    /// Live instances, as last counted (0: not yet).
    members: AtomicU32,
    /// Another instance holds its wanting lock (as last read).
    others_want: AtomicBool,
    /// Connections still to close on return.
    give_back: AtomicU32,
    /// A claim under the share found no ticket since the last recheck.
    refused: AtomicBool,
    /// This instance holds its wanting lock.
    wanting: AtomicBool,
    /// The control session holds its ticket and its member lock: the
    /// instance counts one more ticket than its connections hold.
    joined: AtomicBool,
    /// The control session found no ticket to join with and knocked: the
    /// instance's connects wait until it has joined (and counted once), so
    /// that the tickets the others give back go to the control session
    /// first.
    knocked: AtomicBool,
}

impl Ledger {
    /// The ledger of a budget of `total` tickets, before any count: the
    /// share is the whole budget, as without fair share.
    pub(super) fn new(total: u32) -> Self {
        Self {
            held: AtomicU32::new(0),
            closing: AtomicU32::new(0),
            share: AtomicU32::new(total),
            members: AtomicU32::new(0),
            others_want: AtomicBool::new(false),
            give_back: AtomicU32::new(0),
            refused: AtomicBool::new(false),
            wanting: AtomicBool::new(false),
            joined: AtomicBool::new(false),
            knocked: AtomicBool::new(false),
        }
    }

    /// Before a connect: refused while the control session is shut out,
    /// or at or above the share while another instance wants; else how to
    /// claim.
    pub(super) fn admit(&self) -> Result<Claim, Refusal> {
        if self.knocked.load(Ordering::Relaxed) {
            return Err(Refusal::Knocked);
        }
        let borrowing = self.tickets() >= self.share.load(Ordering::Relaxed);
        if borrowing && self.others_want.load(Ordering::Relaxed) {
            return Err(Refusal::OthersWant);
        }
        Ok(Claim { borrowing })
    }

    /// The tickets this instance holds: its connections', and its control
    /// session's once it has joined.
    fn tickets(&self) -> u32 {
        self.held.load(Ordering::Relaxed) + u32::from(self.joined.load(Ordering::Relaxed))
    }

    /// The connections holding a ticket, the control session's not counted.
    pub(super) fn held(&self) -> u32 {
        self.held.load(Ordering::Relaxed)
    }

    /// A claim took its ticket.
    pub(super) fn note_claimed(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection counted by [`note_claimed`](Self::note_claimed) is
    /// gone (its seat dropped); never below zero.
    pub(super) fn release(&self) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// A connection counted by [`note_claimed`](Self::note_claimed) closes
    /// (one given back by [`give_back_counted`](Self::give_back_counted)
    /// was counted out already).
    pub(super) fn note_closed(&self) {
        let closing = self
            .closing
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if closing.is_err() {
            self.release();
        }
    }

    /// A claim found no ticket: below the share, that is need. Whether the
    /// control task is to wake and take the wanting lock now.
    pub(super) fn refused(&self, claim: Claim) -> bool {
        if claim.borrowing {
            return false;
        }
        self.refused.store(true, Ordering::Relaxed);
        !self.wanting.load(Ordering::Relaxed)
    }

    /// Whether one more connection is to be given back now; takes it from
    /// the count. One load when there is nothing to give back.
    pub(super) fn take_give_back(&self) -> bool {
        self.give_back.load(Ordering::Relaxed) != 0
            && self
                .give_back
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
    }

    /// [`take_give_back`](Self::take_give_back) for a manager that counts
    /// closes: the connection given back is counted out now, and its close
    /// later is not counted again.
    pub(super) fn give_back_counted(&self) -> bool {
        if !self.take_give_back() {
            return false;
        }
        self.closing.fetch_add(1, Ordering::Relaxed);
        self.release();
        true
    }

    /// This instance's view: (live instances, share, tickets, wanting).
    pub(super) fn view(&self) -> FleetShareView {
        FleetShareView {
            members: self.members.load(Ordering::Relaxed),
            share: self.share.load(Ordering::Relaxed),
            held: self.tickets(),
            wanting: self.wanting.load(Ordering::Relaxed),
        }
    }

    /// Whether a claim was refused under the share since the last call.
    pub(super) fn take_refused(&self) -> bool {
        self.refused.swap(false, Ordering::Relaxed)
    }

    /// A recheck's outcome for a budget of `total` tickets: `members` live
    /// instances counted, `others_want` read, and whether this instance
    /// was refused lately. The control session's own ticket counts as
    /// held, and is never given back. The wanting lock is the caller's to
    /// take or drop ([`set_wanting`](Self::set_wanting)).
    pub(super) fn recheck(
        &self,
        total: u32,
        members: u32,
        others_want: bool,
        refused_lately: bool,
    ) -> Decision {
        let held = self.held.load(Ordering::Relaxed);
        let decision = decide(total, members, held + 1, others_want, refused_lately);
        self.members.store(members, Ordering::Relaxed);
        self.share.store(decision.share, Ordering::Relaxed);
        self.others_want.store(others_want, Ordering::Relaxed);
        self.give_back
            .store(decision.give_back.min(held), Ordering::Relaxed);
        decision
    }

    /// The wanting lock was taken (`true`) or dropped.
    pub(super) fn set_wanting(&self, wanting: bool) {
        self.wanting.store(wanting, Ordering::Relaxed);
    }

    /// The control session holds its ticket and its member lock.
    pub(super) fn set_joined(&self) {
        self.joined.store(true, Ordering::Relaxed);
    }

    /// The control session knocked (`true`: connects wait), or it no
    /// longer waits to join (joined and counted, or failing for another
    /// reason than a full budget).
    pub(super) fn set_knocked(&self, knocked: bool) {
        self.knocked.store(knocked, Ordering::Relaxed);
    }

    /// Whether the control session knocked and has not joined yet.
    pub(super) fn knocked(&self) -> bool {
        self.knocked.load(Ordering::Relaxed)
    }

    /// The control session is gone: forget what it read, so that this
    /// instance neither gives back nor holds back on stale news.
    pub(super) fn forget(&self) {
        self.joined.store(false, Ordering::Relaxed);
        self.knocked.store(false, Ordering::Relaxed);
        self.others_want.store(false, Ordering::Relaxed);
        self.give_back.store(0, Ordering::Relaxed);
        self.wanting.store(false, Ordering::Relaxed);
    }

    /// Connections still to give back (tests read what a recheck set).
    #[cfg(test)]
    pub(super) fn pending_give_back(&self) -> u32 {
        self.give_back.load(Ordering::Relaxed)
    }

    /// Whether another instance wants, as last read.
    #[cfg(test)]
    pub(super) fn others_want(&self) -> bool {
        self.others_want.load(Ordering::Relaxed)
    }

    /// Whether the control session has joined.
    #[cfg(test)]
    pub(super) fn joined(&self) -> bool {
        self.joined.load(Ordering::Relaxed)
    }

    /// Sets what a recheck would, for tests that need exact counts: the
    /// share, whether others want, and how many to give back.
    #[cfg(test)]
    pub(super) fn force(&self, share: u32, others_want: bool, give_back: u32) {
        self.share.store(share, Ordering::Relaxed);
        self.others_want.store(others_want, Ordering::Relaxed);
        self.give_back.store(give_back, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_borrow_politely_and_accounting_counts_each_connection_once() {
        let ledger = Ledger::new(4);
        // Before the first count the share is the whole budget.
        let claim = ledger.admit().expect("admitted");
        assert!(!claim.borrowing);

        for _ in 0..3 {
            ledger.note_claimed();
        }
        assert_eq!(ledger.view().held, 3);
        // A count of 2 instances: share 2, this one borrows one.
        ledger.share.store(2, Ordering::Relaxed);
        let claim = ledger.admit().expect("nobody wants");
        assert!(claim.borrowing);
        // Another wants: no connect, and one connection to give back.
        ledger.others_want.store(true, Ordering::Relaxed);
        assert_eq!(ledger.admit(), Err(Refusal::OthersWant));
        ledger.give_back.store(1, Ordering::Relaxed);
        assert!(ledger.take_give_back());
        assert!(!ledger.take_give_back(), "only the excess");
        for _ in 0..3 {
            ledger.release();
        }
        assert_eq!(ledger.view().held, 0);

        // Counted by closes (sqlx): a connection given back counts out at
        // once, and its close does not count it again.
        ledger.note_claimed();
        ledger.note_claimed();
        ledger.give_back.store(1, Ordering::Relaxed);
        assert!(ledger.give_back_counted());
        assert!(!ledger.give_back_counted());
        assert_eq!(ledger.view().held, 1);
        ledger.note_closed();
        assert_eq!(ledger.view().held, 1);
        ledger.note_closed();
        assert_eq!(ledger.view().held, 0);
        ledger.note_closed();
        assert_eq!(ledger.view().held, 0, "never below zero");

        // A refused claim under the share signals; a borrowing one does not.
        assert!(!ledger.refused(Claim { borrowing: true }));
        assert!(!ledger.refused.load(Ordering::Relaxed));
        assert!(ledger.refused(Claim { borrowing: false }), "wakes the task");
        assert!(ledger.refused.load(Ordering::Relaxed));
    }

    #[test]
    fn a_recheck_counts_the_control_ticket_and_never_gives_it_back() {
        let ledger = Ledger::new(20);
        ledger.set_joined();
        for _ in 0..5 {
            ledger.note_claimed();
        }
        // 5 members: share 4; 5 connections and the control ticket hold 6.
        let decision = ledger.recheck(20, 5, true, false);
        assert_eq!(decision.give_back, 2);
        assert_eq!(ledger.pending_give_back(), 2);
        assert_eq!(ledger.view().held, 6);
        assert_eq!(ledger.admit(), Err(Refusal::OthersWant));
        // The whole budget to others: only the connections go back.
        ledger.recheck(20, 40, true, false);
        assert_eq!(ledger.pending_give_back(), 5);
        // The control session gone: nothing given back, nothing held back.
        ledger.forget();
        assert_eq!(ledger.pending_give_back(), 0);
        assert_eq!(ledger.view().held, 5);
        assert!(!ledger.others_want() && !ledger.joined());
        // Shut out: refused whatever the counts, until it joins.
        ledger.set_knocked(true);
        assert_eq!(ledger.admit(), Err(Refusal::Knocked));
        ledger.set_knocked(false);
        assert!(ledger.admit().is_ok());
        // A refusal under the share is taken once.
        ledger.refused(Claim { borrowing: false });
        assert!(ledger.take_refused() && !ledger.take_refused());
        // Wanting already: a refusal need not wake the task.
        ledger.set_wanting(true);
        assert!(!ledger.refused(Claim { borrowing: false }));
        assert!(ledger.view().wanting);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        /// One step of an instance's life, as the connect and return paths
        /// and the control task drive its ledger.
        #[derive(Debug, Clone)]
        enum Step {
            /// A connect: admitted or not, and if so whether the server
            /// had a ticket free.
            Claim {
                free: bool,
            },
            /// One open connection closes: one given back (`given`) or
            /// another.
            Close {
                given: bool,
            },
            /// One open connection comes back to the pool, and is given
            /// back (closed soon) if due.
            Return,
            /// A recheck: the members counted (the fleet growing and
            /// shrinking), whether others want, and whether this instance
            /// was refused lately.
            Recheck {
                members: u32,
                others_want: bool,
                refused_lately: bool,
            },
            /// The control session joins, knocks, or is lost.
            Join,
            Knock,
            Forget,
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                4 => any::<bool>().prop_map(|free| Step::Claim { free }),
                2 => any::<bool>().prop_map(|given| Step::Close { given }),
                2 => Just(Step::Return),
                2 => (0_u32..10, any::<bool>(), any::<bool>()).prop_map(
                    |(members, others_want, refused_lately)| Step::Recheck {
                        members,
                        others_want,
                        refused_lately,
                    }
                ),
                1 => Just(Step::Join),
                1 => Just(Step::Knock),
                1 => Just(Step::Forget),
            ]
        }

        proptest! {
            /// Whatever the order of claims, returns, closes and rechecks:
            /// no seat is lost or counted twice (with seats, the count is
            /// the open connections; counted by closes, the count and the
            /// closes still due add up to them), a claim admitted while
            /// another instance wants never takes the instance past its
            /// share, and a give-back never exceeds the connections held
            /// and brings the instance down to its share.
            #[test]
            fn seats_are_never_lost_and_never_taken_past_the_share(
                total in 2_u32..64,
                counted in any::<bool>(),
                steps in proptest::collection::vec(step(), 1..200),
            ) {
                let ledger = Ledger::new(total);
                let close = |ledger: &Ledger| {
                    if counted {
                        ledger.note_closed();
                    } else {
                        ledger.release();
                    }
                };
                // Open connections holding a ticket, and of those the ones
                // given back, to close.
                let mut open = 0_u32;
                let mut given = 0_u32;
                for step in steps {
                    match step {
                        Step::Claim { free } => match ledger.admit() {
                            Ok(claim) if free => {
                                ledger.note_claimed();
                                open += 1;
                                let view = ledger.view();
                                if ledger.others_want() {
                                    prop_assert!(!claim.borrowing);
                                    prop_assert!(view.held <= view.share, "{view:?}");
                                }
                            }
                            Ok(claim) => {
                                ledger.refused(claim);
                            }
                            Err(Refusal::Knocked) => prop_assert!(ledger.knocked()),
                            Err(Refusal::OthersWant) => {
                                let view = ledger.view();
                                prop_assert!(ledger.others_want() && view.held >= view.share);
                            }
                        },
                        Step::Close { given: true } if given > 0 => {
                            given -= 1;
                            open -= 1;
                            close(&ledger);
                        }
                        Step::Close { .. } if open > given => {
                            open -= 1;
                            close(&ledger);
                        }
                        Step::Close { .. } => {}
                        Step::Return if open > given => {
                            let back = if counted {
                                ledger.give_back_counted()
                            } else {
                                ledger.take_give_back()
                            };
                            given += u32::from(back);
                        }
                        Step::Return => {}
                        Step::Recheck { members, others_want, refused_lately } => {
                            let held = ledger.held();
                            let decision = ledger.recheck(total, members, others_want, refused_lately);
                            let due = ledger.pending_give_back();
                            prop_assert!(due <= held, "never more than held");
                            if others_want && decision.share > 0 {
                                // Once given back, it holds at most its
                                // share, the control ticket included.
                                prop_assert!(held - due < decision.share);
                            }
                            if !others_want {
                                prop_assert_eq!(due, 0);
                            }
                        }
                        Step::Join => ledger.set_joined(),
                        Step::Knock => ledger.set_knocked(true),
                        Step::Forget => ledger.forget(),
                    }
                    let closing = ledger.closing.load(Ordering::Relaxed);
                    if counted {
                        prop_assert_eq!(ledger.held() + closing, open, "a seat lost or counted twice");
                    } else {
                        prop_assert_eq!(ledger.held(), open, "a seat lost or counted twice");
                        prop_assert_eq!(closing, 0);
                    }
                    let joined = u32::from(ledger.joined());
                    prop_assert_eq!(ledger.view().held, ledger.held() + joined);
                }
                // Every connection closed: nothing held, nothing pending.
                for _ in 0..open {
                    close(&ledger);
                }
                prop_assert_eq!(ledger.held(), 0);
                prop_assert_eq!(ledger.closing.load(Ordering::Relaxed), 0);
            }
        }
    }
}
