//! Connections parked in their own slot: the slot half of thread affinity
//! (the thread half, each thread's list of the slots it parked, is
//! `affinity.rs`).
//!
//! A clean connection returned while nobody waits may stay in its slot,
//! off the idle stack, its state set to [`State::Parked`]. Such a slot is
//! owned by nobody: whoever compares-and-swaps its state from `Parked` to
//! something else owns it, connection included. The returning thread
//! lists the index and its next checkout claims it back with that one
//! CAS on the slot's own cache line, never touching the idle stack's head
//! word that every other thread writes. Anyone else may claim it the same
//! way: a caller about to queue, `try_get`, the housekeeper's sweep,
//! `close`, `soft_evict_all`, `resize` and `retain` scan the slots for
//! `Parked` ones ([`Slots::claim_parked`], [`Slots::take_parked`]).
//!
//! # Ownership
//!
//! Parking ([`Slots::park_held`]) is the owner's last touch: it stores
//! `Parked` with Release after its writes to the slot (the connection, its
//! `Entry`, the counts). A claim is a CAS from `Parked` with Acquire, which
//! reads that store, so the claimer sees them; a failed CAS touches
//! nothing. Stack slots are marked `Idle` and in-use ones `InUse`, never
//! `Parked`, so a claim can only take a parked slot, whatever stale index
//! a thread's list holds.
//!
//! # Parking against queuing (a Dekker race)
//!
//! A return must not park a connection while a caller waits (it goes to
//! the longest waiter), and a caller must not queue while a connection is
//! parked. The two sides write one location and read the other:
//!
//! ```text
//! return (park_held)               first caller to queue (mark_waiting)
//! state := Parked  (Release)        stack word |= WAITERS  (RMW)
//! fence(SeqCst)                     fence(SeqCst)          (claim_parked)
//! read stack word, limit            read every slot's state
//! ```
//!
//! Of the two SeqCst fences one precedes the other in the single total
//! order of SeqCst fences, and the side whose fence comes second reads the
//! other side's write (or a later one): either the return sees `WAITERS`
//! and takes its connection back to hand it over (if a scan has not
//! claimed it first), or the caller's scan sees `Parked` and claims it
//! instead of queuing; never neither. The same pairing serves `close`
//! (`CLOSED` set, then [`Slots::take_parked`]) and a shrinking `resize`
//! (the limit lowered, then the scan): a return racing them sees the flag
//! or is found by the scan. `loom_tests.rs` checks the protocol on the
//! real code.
//!
//! # The pool's reference
//!
//! A guard owns one strong count of the pool (`Arc<Engine>`). Cloning and
//! dropping it at every checkout and return would write the count's cache
//! line, which every thread shares, twice per cycle. A parked connection
//! keeps its guard's count instead: the owner's next checkout takes it
//! over without touching the count, and anyone else who claims a parked
//! slot releases it (they hold a count of their own, so the release never
//! frees the pool under them).
//!
//! The count must pass at the returning thread's last touch of the pool,
//! or a claimer could release it and the pool be freed while that thread
//! still reads it. Parking is therefore two steps: [`Slots::park_held`]
//! stores `Parking` (claimable, but the count is still the returner's)
//! and runs the Dekker check above; then [`publish`] moves `Parking` to
//! `Parked` with one CAS, the returner's last access to the pool. If a
//! claimer took the slot while it was `Parking`, the CAS fails and the
//! returner drops its count as usual. A claim reports which of the two
//! states it took, so exactly one party owns each count.
//!
//! # A late publish
//!
//! `Parking` does not say whose park it is. Thread A parks (`Parking`)
//! and, before it publishes, thread B claims the slot (a `try_get`), uses
//! the connection and returns it, parking it again (`Parking`, B's now).
//! A's `publish` then succeeds on B's park: A's count moves into the slot
//! although B is the one parking. Every party stays exact if each count
//! in a `Parked` slot is owned by whoever claims it from `Parked`,
//! whoever put it there:
//!
//! - B's own `publish` fails (the slot is already `Parked`), so B drops
//!   its own count as usual; the slot carries A's.
//! - If B's park is refused (callers queued, closed, over the bound), B
//!   takes its connection back with a claim that may find `Parked`: the
//!   count it takes over is A's, and [`ParkOutcome::Back`] hands it to B's
//!   caller to release. Dropping that flag leaked one count of the pool
//!   for good (the engine was never freed); `loom_late_publish_on_a_refused_park`
//!   is the three-party model of it.

use super::{Held, Occupied, Slots, State};
use crate::index_stack::{CLOSED, WAITERS};
use crate::sync::{fence, AtomicU8, Ordering};

/// What became of a connection offered to [`Slots::park_held`].
#[derive(Debug)]
pub(crate) enum ParkOutcome {
    /// Parked in place, at this slot index, for anyone to claim; the
    /// caller still owns its count of the pool and ends the park with
    /// [`publish`].
    Pending(u16),
    /// Not parked: callers queued, the pool closed or went over its bound
    /// meanwhile. Still the caller's, to deliver. The flag: taking it back
    /// took over a count of the pool that another returner's late
    /// [`publish`] left in the slot (see "A late publish"), now the
    /// caller's to release.
    Back(Held, bool),
    /// Parked, then callers queued (or the pool closed) and someone
    /// claimed it before the caller could take it back: theirs now (the
    /// caller keeps its count of the pool).
    Claimed,
}

/// Ends a park: moves the slot from `Parking` to `Parked`, passing the
/// returning thread's count of the pool to the slot. True if it passed;
/// false if a claimer took the slot first (the count is still the
/// caller's).
///
/// It is the returning thread's last access to the pool: once it
/// succeeds, a claimer may release the count and the pool may be freed,
/// so the caller must hold no reference into the pool across this call
/// but `state` itself (as `Arc`'s own drop does with its count).
#[inline]
pub(crate) fn publish(state: &AtomicU8) -> bool {
    // Release: the claimer that takes the count over (Acquire in
    // `claim`) sees everything the returner wrote. Relaxed on failure:
    // the slot is the claimer's, and nothing is read.
    state
        .compare_exchange(
            State::Parking as u8,
            State::Parked as u8,
            Ordering::Release,
            Ordering::Relaxed,
        )
        .is_ok()
}

impl<C> Slots<C> {
    /// Whether returns may park connections in place.
    #[inline]
    pub(crate) fn affinity(&self) -> bool {
        self.affinity
    }

    /// Turns parking in place on (`thread_affinity`); set once, before the
    /// pool is shared.
    pub(crate) fn set_affinity(&mut self, on: bool) {
        self.affinity = on;
    }

    /// Parks a held connection in its slot, marked `Parking`, unless
    /// callers wait, the pool is closed or over its bound (see "Parking
    /// against queuing"). The caller checked those before, as a hint; on
    /// [`ParkOutcome::Pending`] it finishes with [`publish`].
    #[inline]
    pub(crate) fn park_held(&self, h: Held) -> ParkOutcome {
        let slot = self.get(h.0);
        // Release: the owner's last touch of the connection; pairs with
        // the Acquire CAS in `claim`, which then sees the connection and
        // counts written before.
        slot.state.store(State::Parking as u8, Ordering::Release);
        // SeqCst: pairs with the fence in `claim_parked` / `take_parked`
        // (the Dekker race in the module docs): either this thread reads
        // the flag or limit set before that fence, or that scan reads
        // `Parking` (or `Parked`).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence above.
        let refused = self.idle.flags() & (WAITERS | CLOSED) != 0 || self.over_limit();
        if !refused {
            return ParkOutcome::Pending(h.0);
        }
        // Take it back to hand it over; whoever claimed it first owns it.
        // A count found in the slot is not ours (we have not published):
        // it is a late publish's, and goes to the caller to release.
        match self.claim(h.0, State::InUse) {
            Some(counted) => ParkOutcome::Back(h, counted),
            None => ParkOutcome::Claimed,
        }
    }

    /// How many slots are `Parked` now (the count tests, the loom models).
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        (0..self.slots.len() as u16)
            .filter(|&i| self.get(i).state.load(Ordering::Relaxed) == State::Parked as u8)
            .count()
    }

    /// The state word of the slot at `index`, for [`publish`].
    #[inline]
    pub(crate) fn state_of(&self, index: u16) -> &AtomicU8 {
        &self.get(index).state
    }

    /// Claims the connection parked at `index`, if it still is, counted in
    /// use and left in place; with it, whether the slot carried a count of
    /// the pool (it was `Parked`), now the claimer's. An index out of
    /// range (a thread's stale entry) claims nothing.
    #[inline]
    pub(crate) fn claim_held(&self, index: u16) -> Option<(Held, bool)> {
        if usize::from(index) >= self.slots.len() {
            return None;
        }
        self.claim(index, State::InUse)
            .map(|counted| (Held(index), counted))
    }

    /// The idle stack's flag bits (`WAITERS`, `CLOSED`) now, as a hint.
    #[inline]
    pub(crate) fn stack_flags(&self) -> u64 {
        self.idle.flags()
    }

    /// Takes every idle connection, on the stack and parked in place, most
    /// recently used first (the order of the stack's chain): the
    /// housekeeper's sweep, `soft_evict_all`, `resize`, `retain`. With
    /// them, how many counts of the pool the parked ones carried, now the
    /// caller's to release.
    pub(crate) fn take_all_idle(&self) -> (Vec<Occupied<C>>, usize) {
        let mut taken: Vec<_> = self.take_idle().collect();
        let (parked, counts) = self.take_parked();
        if !parked.is_empty() {
            taken.extend(parked);
            // Stable: the stack's own order is kept among equals.
            taken.sort_by_key(|h| std::cmp::Reverse(h.entry.last_used));
        }
        (taken, counts)
    }

    /// Claims one connection parked in place, if any, counted in use and
    /// left in place, with whether it carried a count of the pool (now the
    /// caller's). Scans every slot, after the SeqCst fence that pairs with
    /// `park_held`'s (see the module docs): call it after setting the
    /// flag a return must see.
    pub(crate) fn claim_parked(&self) -> Option<(Held, bool)> {
        // SeqCst: see "Parking against queuing".
        fence(Ordering::SeqCst);
        (0..self.slots.len() as u16).find_map(|index| {
            if !self.is_cached(index) {
                return None;
            }
            self.claim(index, State::InUse)
                .map(|counted| (Held(index), counted))
        })
    }

    /// Claims every connection parked in place, counted idle and taken
    /// out, lowest slot first (the housekeeper's sweep, `close`,
    /// `soft_evict_all`, `resize`, `retain`), with how many counts of the
    /// pool they carried (now the caller's). Scans after the SeqCst fence
    /// that pairs with `park_held`'s: a return racing the flag set before
    /// the call sees it or is found here.
    pub(crate) fn take_parked(&self) -> (Vec<Occupied<C>>, usize) {
        if !self.affinity {
            return (Vec::new(), 0);
        }
        // SeqCst: see "Parking against queuing".
        fence(Ordering::SeqCst);
        let mut counts = 0;
        let taken = (0..self.slots.len() as u16)
            .filter(|&index| {
                self.is_cached(index)
                    && self.claim(index, State::Idle).is_some_and(|counted| {
                        counts += usize::from(counted);
                        true
                    })
            })
            // SAFETY: the claim made us the slot's owner.
            .map(|index| unsafe { self.take(index) })
            .collect();
        (taken, counts)
    }

    /// Whether the slot is parked now (a hint before the claiming CAS, so a
    /// scan writes only the lines it takes).
    #[inline]
    fn is_cached(&self, index: u16) -> bool {
        // Relaxed: the CAS that follows decides and acquires.
        let state = self.get(index).state.load(Ordering::Relaxed);
        state == State::Parked as u8 || state == State::Parking as u8
    }

    /// Moves a parked slot to `to`: `Some(true)` if this call claimed it
    /// `Parked` (with the pool's count it carried), `Some(false)` if it
    /// claimed it `Parking` (no count: the returner keeps its own), `None`
    /// if it was not parked.
    #[inline]
    fn claim(&self, index: u16, to: State) -> Option<bool> {
        let state = &self.get(index).state;
        // Acquire on success: pairs with the Release CAS in `publish` (or
        // the Release store in `park_held`), so the claimer sees the
        // parked connection. Relaxed on failure: nothing was taken.
        let cas = |from: State| {
            state.compare_exchange(from as u8, to as u8, Ordering::Acquire, Ordering::Relaxed)
        };
        // A published slot first: the owner's own checkout, the common case.
        match cas(State::Parked) {
            Ok(_) => return Some(true),
            Err(seen) if seen != State::Parking as u8 => return None,
            Err(_) => {}
        }
        // Parking: claimed without the count, unless the returner
        // published meanwhile (then the count comes with it).
        match cas(State::Parking) {
            Ok(_) => Some(false),
            Err(seen) if seen == State::Parked as u8 => cas(State::Parked).ok().map(|_| true),
            Err(_) => None,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::index_stack::Popped;
    use crate::slots::tests::entry;

    fn slots_with(conns: u32) -> Slots<u32> {
        let mut s = Slots::new(conns as usize + 1);
        s.set_affinity(true);
        for conn in 0..conns {
            let slot = s.reserve().unwrap();
            s.push_idle(s.fill(slot, entry(conn))).unwrap();
        }
        s
    }

    fn held(s: &Slots<u32>) -> Held {
        match s.pop_held() {
            Popped::Node(h) => h,
            other => panic!("expected an idle connection, got {other:?}"),
        }
    }

    /// Parks `h` and publishes it, as a return with nobody waiting does.
    fn park(s: &Slots<u32>, h: Held) -> u16 {
        let ParkOutcome::Pending(index) = s.park_held(h) else {
            panic!("nobody waits: parked")
        };
        assert!(publish(s.state_of(index)), "nobody claimed it meanwhile");
        index
    }

    #[test]
    fn parked_counts_idle_and_is_claimed_once() {
        let s = slots_with(1);
        let h = held(&s);
        let index = park(&s, h);
        assert_eq!(s.census().idle, 1, "a parked connection is idle");
        assert!(matches!(s.pop_held(), Popped::Empty), "not on the stack");
        let (h, counted) = s.claim_held(index).expect("still parked");
        assert!(counted, "a published slot carries the pool's count");
        assert!(s.claim_held(index).is_none(), "claimed twice");
        assert_eq!(s.census().in_use, 1);
        assert_eq!(s.entry(&h).conn, 0);
        s.push_held(h).unwrap();
        assert!(
            s.claim_held(index).is_none(),
            "a stack slot is not claimable"
        );
    }

    #[test]
    fn a_slot_claimed_before_it_is_published_carries_no_count() {
        let s = slots_with(1);
        let h = held(&s);
        let ParkOutcome::Pending(index) = s.park_held(h) else {
            panic!("nobody waits: parked")
        };
        assert_eq!(s.census().idle, 1, "counted idle while parking");
        let (h, counted) = s.claim_held(index).expect("claimable while parking");
        assert!(!counted, "the returner still owns its count");
        assert!(!publish(s.state_of(index)), "publish sees the claim");
        assert_eq!(s.census().in_use, 1, "the claimer's now");
        s.push_held(h).unwrap();
        assert!(!publish(s.state_of(index)), "a stack slot is not published");
    }

    #[test]
    fn scans_report_the_counts_they_take_over() {
        let s = slots_with(3);
        let a = held(&s);
        let b = held(&s);
        let c = held(&s);
        park(&s, a);
        park(&s, b);
        let ParkOutcome::Pending(_) = s.park_held(c) else {
            panic!("nobody waits: parked")
        };
        let (taken, counts) = s.take_parked();
        assert_eq!(taken.len(), 3, "published and parking ones alike");
        assert_eq!(counts, 2, "only the published ones carry a count");
        for h in taken {
            s.push_idle(h).unwrap();
        }
        let h = held(&s);
        park(&s, h);
        let (h, counted) = s.claim_parked().expect("one parked");
        assert!(counted);
        s.push_held(h).unwrap();
        let (all, counts) = s.take_all_idle();
        assert_eq!((all.len(), counts), (3, 0), "stack slots carry none");
        for h in all {
            s.free(h.vacate().0);
        }
    }

    #[test]
    fn a_return_while_callers_wait_is_not_parked() {
        let s = slots_with(1);
        let h = held(&s);
        assert!(s.mark_waiting().is_ok(), "empty: callers may wait");
        let ParkOutcome::Back(h, false) = s.park_held(h) else {
            panic!("callers wait: not parked")
        };
        assert_eq!(s.census().in_use, 1, "taken back, in use");
        s.clear_waiting();
        assert!(matches!(s.park_held(h), ParkOutcome::Pending(_)));
    }

    #[test]
    fn the_first_caller_to_queue_claims_a_parked_connection() {
        let s = slots_with(2);
        let a = held(&s);
        let b = held(&s);
        park(&s, a);
        park(&s, b);
        let Err((Popped::Node(h), true)) = s.mark_waiting() else {
            panic!("a parked connection is taken instead of queuing, with its count")
        };
        assert!(!s.has_waiters(), "the caller did not queue");
        assert_eq!(s.census().idle, 1);
        s.push_held(h).unwrap();
        let (taken, counts) = s.take_parked();
        assert_eq!((taken.len(), counts), (1, 1), "the other parked one");
        assert_eq!(s.census().idle, 2, "taken ones count idle");
        for h in taken {
            s.push_idle(h).unwrap();
        }
        for h in s.close_idle() {
            s.free(h.vacate().0);
        }
        assert_eq!(s.open(), 0);
    }

    #[test]
    fn closed_or_shrunk_refuses_to_park() {
        let s = slots_with(2);
        let h = held(&s);
        s.set_limit(1);
        let ParkOutcome::Back(h, false) = s.park_held(h) else {
            panic!("over the bound: not parked")
        };
        s.set_limit(3);
        for h in s.close_idle() {
            s.free(h.vacate().0);
        }
        assert!(
            matches!(s.park_held(h), ParkOutcome::Back(_, false)),
            "closed"
        );
    }
}
