//! One slot: what it holds, its state and counts, and the census of all.

use crate::entry::Entry;
use crate::slots::leak::LeakSlot;
use crate::sync::{AtomicU64, AtomicU8, Ordering, UnsafeCell};

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// Nothing: on the free list (or being freed).
    Free = 0,
    /// A connect is under way for it.
    Opening = 1,
    /// An idle connection (on the idle stack, or briefly with the
    /// housekeeper or a returning thread).
    Idle = 2,
    /// A connection out of the pool: held by a caller, handed to a waiter,
    /// or being reset or pinged.
    InUse = 3,
    /// Its connection is being closed (`Engine::close_in_slot`); the slot
    /// is freed once the close ends.
    Closing = 4,
    /// An idle connection parked in its own slot, off the idle stack, by
    /// the thread that returned it (`slots/parked.rs`): owned by nobody
    /// until a compare-and-swap of this state claims it. The slot carries
    /// one strong count of the pool, which its claimer takes over (the
    /// parking guard's; see "The pool's reference" there). Counted idle.
    Parked = 5,
    /// [`Parked`](State::Parked) while the returning thread still runs
    /// its checks: claimable the same way, but the pool's count is still
    /// the returning thread's, so the claimer takes none. Counted idle.
    Parking = 6,
}

/// The slots' states added up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Census {
    pub(crate) idle: u32,
    pub(crate) in_use: u32,
    pub(crate) opening: u32,
    pub(crate) closing: u32,
}

impl Census {
    pub(crate) fn total(&self) -> u32 {
        self.idle + self.in_use + self.opening + self.closing
    }
}

pub(crate) struct Slot<C> {
    /// `Some` exactly while the slot is on the idle stack or its
    /// connection is used in place through a `Held` (a caller's guard).
    ///
    /// # Safety
    ///
    /// Only the slot's owner (see `index_stack.rs`, "Ownership") may touch
    /// it: the thread that reserved or popped the index, before it pushes
    /// the index on a stack.
    pub(super) entry: UnsafeCell<Option<Entry<C>>>,
    /// A [`State`]; written by the owner (Relaxed: read only for counts),
    /// except that `Parking` and `Parked` are stored with Release and left
    /// only by a compare-and-swap, which passes ownership (see
    /// `slots/parked.rs`).
    pub(super) state: AtomicU8,
    /// Zero-wait checkouts of this slot; written by the owner only.
    pub(super) checkouts: AtomicU64,
    pub(crate) leak: LeakSlot,
}

impl<C> Slot<C> {
    /// Records the slot's new state; called by its owner.
    #[inline]
    pub(crate) fn set(&self, state: State) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    /// Records the slot's new state unless it is already in it, so that a
    /// connection passed from holder to holder leaves the line unwritten.
    #[inline]
    pub(crate) fn mark(&self, state: State) {
        if self.state.load(Ordering::Relaxed) != state as u8 {
            self.set(state);
        }
    }

    /// Counts a checkout that did not wait; called by the slot's owner, so a
    /// load and a store (no locked read-modify-write) suffice. Ownership
    /// passes with Release/Acquire, so the next owner sees this count.
    #[inline]
    pub(crate) fn count_checkout(&self) {
        let n = self.checkouts.load(Ordering::Relaxed);
        self.checkouts.store(n + 1, Ordering::Relaxed);
    }
}
