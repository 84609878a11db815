//! Thread affinity (HikariCP's `ConcurrentBag` thread-local list): a thread
//! checks out first the connections it returned last, so that where nobody
//! waits a checkout and a return by the same thread write no cache line
//! other threads write.
//!
//! The idle stack's head word is written by every checkout and return of
//! every thread; on many cores that one line bounces between them. With
//! `thread_affinity` on (the default), a clean return with no caller
//! waiting parks the connection in its own slot instead
//! (`Slots::park_held`, `slots/parked.rs`, which also states the ordering
//! argument) and this thread remembers the slot in a small list of its
//! own. A checkout on this thread tries that list, most recent first, with
//! one CAS on each remembered slot's own state word, before it pops the
//! stack. Others find parked connections by scanning the slots: the first
//! caller to queue, `try_get`, the housekeeper's sweep, `close`,
//! `soft_evict_all`, `resize` and `retain` (`Slots::claim_parked`,
//! `Slots::take_all_idle`). So a connection parked by a thread that then
//! goes idle or exits is still found by all of them; the thread's list is
//! only a hint and holds nothing but indices.
//!
//! # The list
//!
//! Each thread keeps up to [`REMEMBERED`] entries, each a pool's identity
//! and a slot index. The identity is a number drawn once per pool from a
//! process-wide counter, never reused, so an entry of a dropped pool
//! matches no live one and is dropped as the list turns over; a stale
//! entry of a live pool is harmless, since the CAS claims only a slot that
//! is parked now (and then rightly: a parked connection is anyone's). When
//! the list is full, the oldest entry makes room: if it is this pool's and
//! still parked, that connection is claimed and moved to the idle stack,
//! so none is left where only a scan finds it.
//!
//! # What stays as it was
//!
//! The bound (parking neither opens nor frees a slot), LIFO for a light
//! load (per thread: a thread gets back the connection it returned last,
//! and scans take the most recently used first), the handoff to waiters
//! (a return while anyone waits is never parked), idle and lifetime
//! retirement, `close`, `soft_evict_all`, and the counts (a parked
//! connection is counted idle).

use std::cell::Cell;
use std::sync::Arc;

use pool_api::ManageConnection;

use crate::index_stack::{Popped, CLOSED, WAITERS};
use crate::engine::Engine;
use crate::slots::{Held, Occupied, ParkOutcome};
use crate::stats::Reason;
use crate::sync::stat::AtomicU64;
use crate::sync::Ordering;

/// How many parked connections a thread remembers.
pub(crate) const REMEMBERED: usize = 8;

/// A pool's identity in the threads' lists.
#[derive(Debug)]
pub(crate) struct Affinity {
    /// Unique in the process, never zero; fits in 48 bits.
    id: u64,
}

impl Affinity {
    pub(crate) fn new() -> Self {
        /// The next pool's identity. Relaxed: only uniqueness matters, which
        /// the RMW gives.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed) & ID_MASK,
        }
    }
}

const ID_MASK: u64 = (1 << 48) - 1;

/// One thread's remembered slots: `(pool identity << 16) | slot index`,
/// oldest first; `len` in use.
struct List {
    entries: [Cell<u64>; REMEMBERED],
    len: Cell<usize>,
}

impl List {
    const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)]
        const EMPTY: Cell<u64> = Cell::new(0);
        Self {
            entries: [EMPTY; REMEMBERED],
            len: Cell::new(0),
        }
    }

    /// Removes entry `i`, keeping the order of the others.
    fn remove(&self, i: usize) {
        let len = self.len.get();
        for j in i + 1..len {
            self.entries[j - 1].set(self.entries[j].get());
        }
        self.len.set(len - 1);
    }

    /// Forgets each of pool `id`'s entries, newest first, until `claim`
    /// takes one; returns what it took.
    #[inline]
    fn recall<T>(&self, id: u64, mut claim: impl FnMut(u16) -> Option<T>) -> Option<T> {
        let mut i = self.len.get();
        while i > 0 {
            i -= 1;
            let entry = self.entries[i].get();
            if entry >> 16 == id {
                self.remove(i);
                if let Some(t) = claim(entry as u16) {
                    return Some(t);
                }
            }
        }
        None
    }

    /// Remembers `entry` as the newest; returns the oldest entry when it
    /// had to make room.
    #[inline]
    fn remember(&self, entry: u64) -> Option<u64> {
        let len = self.len.get();
        // The same slot remembered before (parked, claimed by another,
        // parked again): keep one entry.
        if let Some(i) = (0..len).find(|&i| self.entries[i].get() == entry) {
            self.remove(i);
            return self.remember(entry);
        }
        let mut out = None;
        if len == REMEMBERED {
            out = Some(self.entries[0].get());
            self.remove(0);
        }
        let len = self.len.get();
        self.entries[len].set(entry);
        self.len.set(len + 1);
        out
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static LIST: List = const { List::new() };
}

#[cfg(loom)]
loom::thread_local! {
    static LIST: List = List::new();
}

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
            if let Some((held, counted)) = self.recall() {
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
                self.remember(index);
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

    /// Claims one of the connections this thread parked, newest first,
    /// with whether it carried the pool's count.
    #[inline]
    fn recall(&self) -> Option<(Held, bool)> {
        let id = self.affinity.id;
        let slots = &self.slots;
        LIST.try_with(|list| list.recall(id, |index| slots.claim_held(index)))
            .ok()
            .flatten()
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

    /// Remembers a slot this thread parked; when the list is full, the
    /// oldest entry makes room (see "The list").
    #[inline]
    fn remember(self: &Arc<Self>, index: u16) {
        let id = self.affinity.id;
        let Ok(out) = LIST.try_with(|list| list.remember(id << 16 | u64::from(index))) else {
            // No thread-local storage any more (a thread-local's
            // destructor returned it): forget nothing, a scan finds it.
            return;
        };
        if let Some(out) = out.filter(|out| out >> 16 == id) {
            let slots = &self.slots;
            if let Some((held, counted)) = slots.claim_held(out as u16) {
                // Released first, so nothing `deliver` runs can leak it; the
                // returning guard still holds its own count (its park is
                // published after this).
                self.release_parked_counts(usize::from(counted));
                self.deliver(slots.take_held(held));
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn entry(pool: u64, index: u16) -> u64 {
        pool << 16 | u64::from(index)
    }

    #[test]
    fn newest_first_and_only_this_pools() {
        let list = List::new();
        assert_eq!(list.remember(entry(1, 3)), None);
        assert_eq!(list.remember(entry(2, 4)), None);
        assert_eq!(list.remember(entry(1, 5)), None);
        let mut tried = Vec::new();
        let got = list.recall(1, |i| {
            tried.push(i);
            None::<()>
        });
        assert_eq!(got, None);
        assert_eq!(tried, [5, 3], "newest first, pool 2's skipped");
        assert_eq!(list.len.get(), 1, "tried entries are forgotten");
        assert_eq!(list.recall(2, Some), Some(4));
    }

    #[test]
    fn a_full_list_gives_up_its_oldest_and_keeps_no_duplicate() {
        let list = List::new();
        for i in 0..REMEMBERED as u16 {
            assert_eq!(list.remember(entry(1, i)), None);
        }
        assert_eq!(list.remember(entry(1, 3)), None, "already remembered");
        assert_eq!(list.len.get(), REMEMBERED);
        assert_eq!(list.remember(entry(1, 99)), Some(entry(1, 0)));
        assert_eq!(list.recall(1, Some), Some(99));
        assert_eq!(list.recall(1, Some), Some(3), "moved up when re-parked");
    }

    #[test]
    fn pool_identities_are_distinct() {
        let (a, b) = (Affinity::new(), Affinity::new());
        assert_ne!(a.id, b.id);
        assert_ne!(a.id, 0);
    }
}
