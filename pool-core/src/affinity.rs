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
//! argument) and this thread adds the slot to a small list of its own. A checkout
//! on this thread tries that list, most recent first, with one CAS on
//! each listed slot's own state word, before it pops the
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

//!
//! A leaf: it knows the slots ([`Slots::claim_held`]) and nothing of the
//! engine, which delivers what a full list gives up (`engine/parking.rs`).

use std::cell::Cell;

use crate::slots::{Held, Slots};
use crate::sync::stat::AtomicU64;
use crate::sync::Ordering;

/// How many parked connections a thread's list holds.
pub(crate) const LIST_LEN: usize = 8;

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

/// One thread's parked slots: `(pool identity << 16) | slot index`,
/// oldest first; `len` in use.
struct List {
    entries: [Cell<u64>; LIST_LEN],
    len: Cell<usize>,
}

impl List {
    const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)]
        const EMPTY: Cell<u64> = Cell::new(0);
        Self {
            entries: [EMPTY; LIST_LEN],
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
    fn pop_parked<T>(&self, id: u64, mut claim: impl FnMut(u16) -> Option<T>) -> Option<T> {
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

    /// Adds `entry` as the newest; returns the oldest entry when it
    /// had to make room.
    #[inline]
    fn push_parked(&self, entry: u64) -> Option<u64> {
        let len = self.len.get();
        // The same slot listed before (parked, claimed by another,
        // parked again): keep one entry.
        if let Some(i) = (0..len).find(|&i| self.entries[i].get() == entry) {
            self.remove(i);
            return self.push_parked(entry);
        }
        let mut out = None;
        if len == LIST_LEN {
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

impl Affinity {
    /// Claims one of the connections this thread parked in `slots`,
    /// newest first, with whether it carried the pool's count
    /// (`Slots::claim_held`).
    #[inline]
    pub(crate) fn pop_parked<C>(&self, slots: &Slots<C>) -> Option<(Held, bool)> {
        let id = self.id;
        LIST.try_with(|list| list.pop_parked(id, |index| slots.claim_held(index)))
            .ok()
            .flatten()
    }

    /// Adds a slot this thread parked in `slots` to its list. When the
    /// list was full, its oldest entry made room: if that one is this
    /// pool's and still parked, it is claimed and returned (with whether it
    /// carried the pool's count), for the caller to put in the idle set.
    #[inline]
    pub(crate) fn push_parked<C>(&self, slots: &Slots<C>, index: u16) -> Option<(Held, bool)> {
        let id = self.id;
        let Ok(out) = LIST.try_with(|list| list.push_parked(id << 16 | u64::from(index))) else {
            // No thread-local storage any more (a thread-local's
            // destructor returned it): a scan finds the parked one.
            return None;
        };
        out.filter(|out| out >> 16 == id)
            .and_then(|out| slots.claim_held(out as u16))
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
        assert_eq!(list.push_parked(entry(1, 3)), None);
        assert_eq!(list.push_parked(entry(2, 4)), None);
        assert_eq!(list.push_parked(entry(1, 5)), None);
        let mut tried = Vec::new();
        let got = list.pop_parked(1, |i| {
            tried.push(i);
            None::<()>
        });
        assert_eq!(got, None);
        assert_eq!(tried, [5, 3], "newest first, pool 2's skipped");
        assert_eq!(list.len.get(), 1, "tried entries are forgotten");
        assert_eq!(list.pop_parked(2, Some), Some(4));
    }

    #[test]
    fn a_full_list_gives_up_its_oldest_and_keeps_no_duplicate() {
        let list = List::new();
        for i in 0..LIST_LEN as u16 {
            assert_eq!(list.push_parked(entry(1, i)), None);
        }
        assert_eq!(list.push_parked(entry(1, 3)), None, "already listed");
        assert_eq!(list.len.get(), LIST_LEN);
        assert_eq!(list.push_parked(entry(1, 99)), Some(entry(1, 0)));
        assert_eq!(list.pop_parked(1, Some), Some(99));
        assert_eq!(list.pop_parked(1, Some), Some(3), "moved up when re-parked");
    }

    #[test]
    fn pool_identities_are_distinct() {
        let (a, b) = (Affinity::new(), Affinity::new());
        assert_ne!(a.id, b.id);
        assert_ne!(a.id, 0);
    }
}
