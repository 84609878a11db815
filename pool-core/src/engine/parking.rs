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
use crate::slots::{Held, Occupied, ParkOutcome};

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

    /// Takes a clean returned connection back into the idle set while
    /// nobody waits: parked in place and added to this thread's list, or, if
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
                self.deliver_in_place(held);
                None
            }
        }
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
            self.deliver_in_place(held);
        }
    }
}
