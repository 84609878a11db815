//! The count hand-over between a guard and its slot, with thread
//! affinity on: a clean return parks its connection in its own slot
//! (`Slots::park_held`) and this thread's list records it (`affinity.rs`);
//! the fast path claims it back (`claim_or_pop`). A parked slot keeps the
//! returning guard's count of the pool, which the claim takes over
//! (`slots/parked.rs`, "The pool's reference"): a checkout and a return on
//! one thread touch neither the stack's head word nor the `Arc`'s count.
//! The engine's collections of idle connections (`collect_idle`,
//! `collect_parked`) release the counts the parked ones carried.

use std::sync::Arc;

use pool_api::ManageConnection;

use super::Engine;
use crate::index_stack::{Popped, CLOSED, WAITERS};
use crate::slots::{Held, Occupied, ParkOutcome};
use crate::stats::Reason;

impl<M: ManageConnection> Engine<M> {
    /// Releases `n` counts of the pool that parked connections carried
    /// and a claim took over (`slots/parked.rs`, "The pool's reference").
    #[inline]
    pub(crate) fn release_parked_counts(self: &Arc<Self>, n: usize) {
        for _ in 0..n {
            // SAFETY: the pointer comes from the `Arc` itself, so it covers
            // the whole allocation, count included (one made from `&Shared`
            // would cover the value only). Each of the `n` counts was taken
            // over by the caller's claim, so it is the caller's to release.
            // `self` is a count of the caller's own besides (a `Pool`
            // handle, the housekeeper's upgraded `Weak`, or a guard's), so
            // none of these releases frees the pool.
            unsafe { Arc::decrement_strong_count(Arc::as_ptr(self)) };
        }
    }

    /// Every idle connection, on the stack and parked in place
    /// (`Slots::take_all_idle`); the parked ones' counts of the pool are
    /// released.
    pub(crate) fn collect_idle(self: &Arc<Self>) -> Vec<Occupied<M::Connection>> {
        let (taken, counts) = self.slots.take_all_idle();
        self.release_parked_counts(counts);
        taken
    }

    /// Every connection parked in place (`Slots::take_parked`); their
    /// counts of the pool are released.
    pub(crate) fn collect_parked(self: &Arc<Self>) -> Vec<Occupied<M::Connection>> {
        let (taken, counts) = self.slots.take_parked();
        self.release_parked_counts(counts);
        taken
    }

    /// An idle connection for the fast path, counted in use and left in
    /// its slot: one this thread parked, most recent first, else the top of
    /// the idle stack. With it, the pool's count the parked slot carried
    /// (`slots/parked.rs`, "The pool's reference"): the guard's reference,
    /// taken over without touching the count.
    #[inline]
    pub(crate) fn claim_or_pop(self: &Arc<Self>) -> (Popped<Held>, Option<Arc<Self>>) {
        let slots = &self.slots;
        if slots.affinity() {
            if let Some((held, counted)) = self.affinity.pop_parked(&self.slots) {
                return self.recalled(held, counted.then(|| self.adopt_parked_count()));
            }
        }
        (slots.pop_held(), None)
    }

    /// [`claim_or_pop`](Self::claim_or_pop), and when the stack is empty with
    /// nobody waiting, any connection parked by another thread
    /// (`try_get`: every idle connection counts).
    pub(crate) fn claim_or_pop_any(self: &Arc<Self>) -> (Popped<Held>, Option<Arc<Self>>) {
        let slots = &self.slots;
        match self.claim_or_pop() {
            (Popped::Empty, _) if slots.affinity() => match slots.claim_parked() {
                Some((h, counted)) => (
                    Popped::Node(slots.hold(h)),
                    counted.then(|| self.adopt_parked_count()),
                ),
                None => (Popped::Empty, None),
            },
            popped => popped,
        }
    }

    /// The pool's count that a claimed `Parked` slot carried, as an `Arc`.
    #[inline]
    fn adopt_parked_count(self: &Arc<Self>) -> Arc<Self> {
        // SAFETY: the claim that reported the count made it the caller's
        // (`Slots::claim`): the parking guard's count, left in the slot by
        // `publish` instead of being dropped. Rebuilding the `Arc` from the
        // pointer takes it over; the caller's own `Arc` is untouched.
        unsafe { Arc::from_raw(Arc::as_ptr(self)) }
    }

    /// Takes a clean returned connection back into the idle set while
    /// nobody waits: parked in place and remembered by this thread, or, if
    /// callers queued or the pool closed or shrank meanwhile, delivered.
    /// `Some(index)` when parked: the caller ends the park with
    /// [`publish`](crate::slots::publish) as its last touch of the pool,
    /// passing its count to the slot.
    #[inline]
    pub(crate) fn park_returned(self: &Arc<Self>, held: Held) -> Option<u16> {
        let slots = &self.slots;
        match slots.park_held(held) {
            ParkOutcome::Pending(index) => {
                self.push_parked(index);
                Some(index)
            }
            // Taken by a caller that queued, or by close, meanwhile.
            ParkOutcome::Claimed => None,
            ParkOutcome::Back(held, counted) => {
                // A late publish's count (`slots/parked.rs`): ours to
                // release. `self` is the returning guard's own count, so
                // this never frees the pool under us.
                self.release_parked_counts(usize::from(counted));
                self.deliver(slots.take_held(held));
                None
            }
        }
    }

    /// A connection claimed from this thread's list, unless the pool closed
    /// (closed, and the checkout fails) or callers queued (handed to them,
    /// and the checkout queues behind them) meanwhile; `lease` is dropped
    /// then (the caller holds a `Pool` handle, so that never frees it).
    #[inline]
    fn recalled(
        self: &Arc<Self>,
        held: Held,
        lease: Option<Arc<Self>>,
    ) -> (Popped<Held>, Option<Arc<Self>>) {
        let slots = &self.slots;
        // Relaxed: a check, as the stack's pop makes; the word is written
        // only when the pool closes or callers queue, so this line is read
        // from this core's cache.
        let flags = slots.stack_flags();
        if flags & CLOSED != 0 {
            self.evict(slots.take_held(held), Reason::Closed);
            return (Popped::Closed, None);
        }
        if flags & WAITERS != 0 {
            self.deliver(slots.take_held(held));
            return (Popped::Waiters, None);
        }
        (Popped::Node(held), lease)
    }

    /// Adds a slot this thread parked to its list; when the list is full,
    /// its oldest entry makes room, and a connection still parked there is
    /// moved to the idle set (`affinity.rs`, "The list").
    #[inline]
    fn push_parked(self: &Arc<Self>, index: u16) {
        if let Some((held, counted)) = self.affinity.push_parked(&self.slots, index) {
            // Released first, so nothing `deliver` runs can leak it; the
            // returning guard still holds its own count (its park is
            // published after this).
            self.release_parked_counts(usize::from(counted));
            self.deliver(self.slots.take_held(held));
        }
    }
}
