//! The pool's connection slots: one per possible connection, allocated with
//! the pool. A slot index is the node the idle stack and the free list link
//! (see `index_stack.rs`); the slot holds the connection while it is idle,
//! its state (free, opening, idle, in use), how many times it was checked
//! out, and, when leak detection is on, who took it while it is in use.
//!
//! # Ownership
//!
//! A slot is owned by exactly one party at a time: a stack (the idle stack
//! or the free list, see `index_stack.rs`, "Ownership") or whoever holds
//! its token. The tokens are values, neither `Copy` nor `Clone`: a
//! [`Occupied`] owns a slot and the connection taken out of it, a [`Held`]
//! owns a slot whose connection is used in place (the caller's guard), a
//! [`Vacant`] owns an empty slot. Every way to get a slot yields one ([`Slots::reserve`],
//! [`Slots::pop_idle`], [`Slots::pop_held`], [`Slots::mark_waiting`], the [`Chain`] of
//! [`Slots::take_idle`] and [`Slots::close_idle`]) and every way to give one
//! up consumes one ([`Slots::push_idle`] and [`Slots::push_held`], which hand
//! it back on refusal, and [`Slots::free`]). The only `unsafe` access to a
//! slot's connection (`put`, `take`, and the borrows [`Slots::entry`] and
//! [`Slots::entry_mut`] through a `Held`) is private to this module, justified by the token or
//! the stack operation that proves ownership.
//!
//! State and checkout count live in the slot, written only by the slot's
//! owner with plain (uncontended) stores on a cache line of its own, instead
//! of in pool-wide counters every checkout and return would contend on. A
//! [`Census`] adds them up when someone asks: each slot is in exactly one
//! state, so `total == idle + in_use + opening <= max_size` holds for every
//! census.

pub(crate) mod leak;
mod parked;
mod slot;

pub(crate) use crate::entry::Entry;
use crate::index_stack::{IndexStack, Links, Popped, PushRefused, NIL};
use crate::slots::leak::LeakSlot;
use crate::sync::{AtomicU32, AtomicU64, AtomicU8, Ordering};
pub(crate) use parked::{publish, ParkOutcome};
pub(crate) use slot::{Census, Slot, State};

use crossbeam_utils::CachePadded;

use crate::sync::UnsafeCell;

/// A connection and the slot it occupies, owned by whoever holds this
/// value: popping the idle stack, filling a reservation or taking a chain
/// yields one, and pushing it back consumes it (and returns it on refusal).
/// Not `Copy`, not `Clone`: two holders of one slot cannot be written.
#[derive(Debug)]
pub(crate) struct Occupied<C> {
    index: u16,
    pub(crate) entry: Entry<C>,
}

impl<C> Occupied<C> {
    /// The connection leaves the pool's hands (closed or detached); the
    /// slot stays owned, empty, until [`Slots::free`] takes it.
    pub(crate) fn vacate(self) -> (Vacant, Entry<C>) {
        (Vacant(self.index), self.entry)
    }
}

/// An owned slot whose connection stays in it while its owner uses it:
/// the caller's guard holds this, so a checkout and a clean return move
/// two bytes instead of the connection and its [`Entry`]. Not `Copy`, not
/// `Clone`; [`Slots::entry`] and [`Slots::entry_mut`] reach the connection
/// through it, [`Slots::push_held`] gives the slot back to the idle stack,
/// and [`Slots::take_held`] takes the connection out as a [`Occupied`].
#[derive(Debug)]
pub(crate) struct Held(u16);

impl Held {
    /// The slot's index (for logs).
    pub(crate) fn index(&self) -> u16 {
        self.0
    }
}

/// An owned slot with no connection in it: reserved for a connect, or
/// emptied by a close. Not `Copy`: [`Slots::free`] consumes it. (The
/// engine wraps it in a `Reservation` whose `Drop` frees it.)
#[derive(Debug)]
pub(crate) struct Vacant(u16);

/// The slots, the two stacks that link them (idle connections, free slots)
/// and the count of slots reserved. The only code that touches a slot's
/// connection: everything else holds [`Occupied`] and [`Vacant`] tokens.
pub(crate) struct Slots<C> {
    links: Links,
    /// The idle set: slots holding a connection nobody uses (with those
    /// parked in place, `Parked`: see `slots/parked.rs`).
    idle: IndexStack,
    /// The free list: slots with no connection, ready to reserve.
    free: IndexStack,
    /// Slots reserved: connections open or being opened. Changed only when
    /// a slot is reserved or freed (never on checkout or return), so the
    /// slow paths can read it instead of adding up every slot. Relaxed: a
    /// count for decisions that tolerate a stale value (demand, refill).
    open: AtomicU32,
    /// The bound on `open` (`max_size`, changed by `Pool::resize`); at most
    /// the number of slots. Relaxed: `reserve` checks it in the same CAS
    /// that counts the slot, so `open` never passes it by a reservation.
    limit: AtomicU32,
    /// Whether returns may park connections in place (`thread_affinity`);
    /// when off, no slot is ever `Parked` and nothing scans for them.
    affinity: bool,
    slots: Box<[CachePadded<Slot<C>>]>,
}

impl<C> std::fmt::Debug for Slots<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("len", &self.slots.len())
            .finish()
    }
}

/// A chain of idle connections taken off the stack at once; yields each
/// as an owned [`Occupied`], top first.
pub(crate) struct Chain<'a, C> {
    slots: &'a Slots<C>,
    next: u16,
}

impl<C> Iterator for Chain<'_, C> {
    type Item = Occupied<C>;

    fn next(&mut self) -> Option<Occupied<C>> {
        let index = self.next;
        if index == NIL {
            return None;
        }
        // Read before the take: the link belongs to the chain we own.
        self.next = self.slots.links.next(index);
        // SAFETY: `take_all`/`close` handed the whole chain to the `Chain`'s
        // maker, which owns every node on it; each is taken once.
        Some(unsafe { self.slots.take(index) })
    }
}

impl<C> Drop for Chain<'_, C> {
    fn drop(&mut self) {
        // Every connection of the chain must be accounted for: a chain
        // dropped half-walked would leak its slots.
        debug_assert!(
            self.next == NIL || std::thread::panicking(),
            "a chain of idle connections was dropped unwalked"
        );
    }
}

impl<C> Slots<C> {
    /// `len` free slots, all on the free list.
    pub(crate) fn new(len: usize) -> Self {
        let slots = Self {
            links: Links::new(len),
            idle: IndexStack::new(),
            free: IndexStack::new(),
            open: AtomicU32::new(0),
            limit: AtomicU32::new(len as u32),
            affinity: false,
            slots: (0..len)
                .map(|_| {
                    CachePadded::new(Slot {
                        entry: UnsafeCell::new(None),
                        state: AtomicU8::new(State::Free as u8),
                        checkouts: AtomicU64::new(0),
                        leak: LeakSlot::default(),
                    })
                })
                .collect(),
        };
        for i in (0..len).rev() {
            // `i < len <= MAX_POOL_SIZE`, so it fits in u16 and is not NIL.
            let pushed = slots.free.push(&slots.links, i as u16);
            debug_assert!(pushed.is_ok());
        }
        slots
    }

    /// Slots reserved (connections open or being opened).
    pub(crate) fn open(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }

    /// The bound on open connections now (`max_size`).
    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Sets the bound on open connections (`Pool::resize`); at most the
    /// number of slots. Lowering it below `open` reserves nothing more
    /// until enough connections are closed.
    pub(crate) fn set_limit(&self, limit: u32) {
        debug_assert!(limit as usize <= self.slots.len());
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Whether more connections are open than the bound (after a shrink).
    #[inline]
    pub(crate) fn over_limit(&self) -> bool {
        self.open() > self.limit()
    }

    /// Reserves a free slot, marked opening; `None` when `limit` slots are
    /// reserved already.
    pub(crate) fn reserve(&self) -> Option<Vacant> {
        // Relaxed: the count is the bound; the CAS makes each reservation
        // see the others', so `open` passes `limit` only when the limit is
        // lowered under it.
        self.open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < self.limit.load(Ordering::Relaxed)).then_some(open + 1)
            })
            .ok()?;
        match self.free.pop(&self.links) {
            Popped::Node(index) => {
                self.get(index).set(State::Opening);
                Some(Vacant(index))
            }
            // Cannot happen while `limit <= slots`: `open < limit` leaves a
            // slot on the free list. Undo the count all the same.
            _ => {
                self.open.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Puts a new connection in a reserved slot; it stays counted as
    /// opening (the state `reserve` set) until it is delivered.
    pub(crate) fn fill(&self, slot: Vacant, entry: Entry<C>) -> Occupied<C> {
        Occupied {
            index: slot.0,
            entry,
        }
    }

    /// Marks a vacated slot as closing its connection (for the counts).
    /// The loom build has no close task (no runtime to spawn it on).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn mark_closing(&self, slot: &Vacant) {
        self.get(slot.0).set(State::Closing);
    }

    /// Gives a slot back to the free list.
    ///
    /// The slot is pushed before `open` is decremented: `reserve` counts
    /// itself in `open` first and then pops, so at every instant the free
    /// list holds at least `len - open` slots and a reservation that got
    /// under the bound always finds one. (Decrementing first left a window
    /// where a `reserve` could count itself and find the list empty: a
    /// spurious "full" for `Pool::add`, a connector started for nothing.)
    pub(crate) fn free(&self, slot: Vacant) {
        self.get(slot.0).set(State::Free);
        let pushed = self.free.push(&self.links, slot.0);
        debug_assert!(pushed.is_ok(), "the free list is never closed");
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// [`pop_held`](Self::pop_held), taken out of the slot (the tests'
    /// shorthand).
    #[cfg(test)]
    pub(crate) fn pop_idle(&self) -> Popped<Occupied<C>> {
        match self.pop_held() {
            Popped::Node(h) => Popped::Node(self.take_held(h)),
            Popped::Empty => Popped::Empty,
            Popped::Waiters => Popped::Waiters,
            Popped::Closed => Popped::Closed,
        }
    }

    /// Pops an idle connection, counted in use, and leaves it in its slot.
    #[inline]
    pub(crate) fn pop_held(&self) -> Popped<Held> {
        match self.idle.pop(&self.links) {
            Popped::Node(index) => Popped::Node(self.in_use(index)),
            Popped::Empty => Popped::Empty,
            Popped::Waiters => Popped::Waiters,
            Popped::Closed => Popped::Closed,
        }
    }

    /// Puts a connection back in its own slot, to be used in place.
    #[inline]
    pub(crate) fn hold(&self, h: Occupied<C>) -> Held {
        let Occupied { index, entry } = h;
        // SAFETY: the `Occupied` owned `index`; the `Held` made of it does.
        unsafe { self.put(index, entry) };
        Held(index)
    }

    /// Takes a held connection out of its slot (still owned, in use).
    #[inline]
    pub(crate) fn take_held(&self, h: Held) -> Occupied<C> {
        // SAFETY: the `Held` owned `index` and its slot's connection.
        unsafe { self.take(h.0) }
    }

    /// The connection a [`Held`] owns.
    #[inline]
    pub(crate) fn entry<'a>(&'a self, h: &'a Held) -> &'a Entry<C> {
        // SAFETY: `h` owns the slot, so nobody else touches the cell while
        // it is borrowed; a shared borrow of `h` only gives shared access.
        let entry = self.get(h.0).entry.with_mut(|e| unsafe { (*e).as_ref() });
        match entry {
            Some(entry) => entry,
            None => unreachable!("held slot {} held no connection", h.0),
        }
    }

    /// The connection a [`Held`] owns, mutably.
    #[inline]
    pub(crate) fn entry_mut<'a>(&'a self, h: &'a mut Held) -> &'a mut Entry<C> {
        // SAFETY: `h` owns the slot and is borrowed uniquely for as long as
        // the returned borrow lives: no other access to the cell exists.
        let entry = self.get(h.0).entry.with_mut(|e| unsafe { (*e).as_mut() });
        match entry {
            Some(entry) => entry,
            None => unreachable!("held slot {} held no connection", h.0),
        }
    }

    /// Parks a held connection on the idle stack, marked idle, without
    /// moving it. Refused while callers wait or once closed.
    #[inline]
    pub(crate) fn push_held(&self, h: Held) -> Result<(), (PushRefused, Held)> {
        // Marked idle before the push: once pushed, the slot is someone
        // else's to mark.
        self.get(h.0).set(State::Idle);
        match self.idle.push(&self.links, h.0) {
            Ok(()) => Ok(()),
            Err(refused) => Err((refused, h)),
        }
    }

    /// The slot a [`Held`] holds.
    #[inline]
    pub(crate) fn held_slot(&self, h: &Held) -> &Slot<C> {
        self.get(h.0)
    }

    /// [`push_held`](Self::push_held) of a connection put back in its
    /// slot (the tests' shorthand); a refused one comes back out of it.
    #[cfg(test)]
    pub(crate) fn push_idle(&self, h: Occupied<C>) -> Result<(), (PushRefused, Occupied<C>)> {
        self.push_held(self.hold(h))
            .map_err(|(why, back)| (why, self.take_held(back)))
    }

    /// Marks callers as waiting on the idle stack (with the waiter queue
    /// locked), or hands over a connection found idle after all
    /// (`Err((Popped::Node, counted))`, counted in use), on the stack or,
    /// for the first caller to queue, parked in place (`claim_parked`;
    /// `counted` says whether it carried a count of the pool, now the
    /// caller's), or reports it closed.
    pub(crate) fn mark_waiting(&self) -> Result<(), (Popped<Held>, bool)> {
        // Under the queue's lock the bit is set only here and cleared only
        // when the queue empties, so it is exact: clear means this caller
        // is the first to queue.
        let first = !self.idle.has_waiters();
        match self.idle.set_waiters(&self.links) {
            Ok(()) if first && self.affinity => match self.claim_parked() {
                // Found parked in place: this caller does not queue after
                // all, and the queue is still empty. The flag says whether
                // it came with a count of the pool (`slots/parked.rs`).
                Some((h, counted)) => {
                    self.idle.clear_waiters();
                    Err((Popped::Node(h), counted))
                }
                None => Ok(()),
            },
            Ok(()) => Ok(()),
            Err(Popped::Node(index)) => Err((Popped::Node(self.in_use(index)), false)),
            Err(_) => Err((Popped::Closed, false)),
        }
    }

    /// Clears the idle stack's `WAITERS` bit (the waiter queue emptied;
    /// called under its lock).
    pub(crate) fn clear_waiting(&self) {
        self.idle.clear_waiters();
    }

    /// Whether callers are queued (a hint; see `IndexStack::has_waiters`).
    #[inline]
    pub(crate) fn has_waiters(&self) -> bool {
        self.idle.has_waiters()
    }

    /// Whether the idle stack is closed (the pool is).
    pub(crate) fn is_closed(&self) -> bool {
        self.idle.is_closed()
    }

    /// Takes every idle connection at once (the housekeeper's sweep,
    /// `soft_evict_all`). The caller must walk the chain to its end.
    pub(crate) fn take_idle(&self) -> Chain<'_, C> {
        Chain {
            slots: self,
            next: self.idle.take_all(),
        }
    }

    /// Closes the idle stack and takes every idle connection, as
    /// [`take_idle`](Self::take_idle).
    pub(crate) fn close_idle(&self) -> Chain<'_, C> {
        Chain {
            slots: self,
            next: self.idle.close(),
        }
    }

    /// The slot a token holds.
    #[inline]
    pub(crate) fn slot(&self, h: &Occupied<C>) -> &Slot<C> {
        self.get(h.index)
    }

    /// Adds up the slots' states.
    pub(crate) fn census(&self) -> Census {
        let mut c = Census::default();
        for slot in self.slots.iter() {
            match slot.state.load(Ordering::Relaxed) {
                s if s == State::Idle as u8
                    || s == State::Parked as u8
                    || s == State::Parking as u8 =>
                {
                    c.idle += 1
                }
                s if s == State::InUse as u8 => c.in_use += 1,
                s if s == State::Opening as u8 => c.opening += 1,
                s if s == State::Closing as u8 => c.closing += 1,
                _ => {}
            }
        }
        c
    }

    /// Zero-wait checkouts over all slots.
    pub(crate) fn checkouts(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.checkouts.load(Ordering::Relaxed))
            .sum()
    }

    /// Every slot, for the leak scan.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Slot<C>> {
        self.slots.iter().map(|s| &**s)
    }

    fn get(&self, index: u16) -> &Slot<C> {
        debug_assert!(
            usize::from(index) < self.slots.len(),
            "slot {index} out of range"
        );
        &self.slots[usize::from(index)]
    }

    /// A slot just popped (or found idle when registering), marked in use
    /// and left holding its connection.
    #[inline]
    fn in_use(&self, index: u16) -> Held {
        self.get(index).set(State::InUse);
        Held(index)
    }

    /// Stores an idle connection in its slot before the index is pushed.
    ///
    /// # Safety
    ///
    /// The caller owns `index` (reserved or popped it, has not pushed it).
    unsafe fn put(&self, index: u16, entry: Entry<C>) {
        // SAFETY: the caller owns the slot, so no other thread accesses the
        // cell until a Release that passes the slot on publishes it: the
        // idle stack's push, or a handoff's store of `READY` in the waiter
        // queue (`waiters.rs`).
        self.get(index).entry.with_mut(|e| unsafe {
            debug_assert!((*e).is_none(), "slot {index} already holds a connection");
            *e = Some(entry);
        });
    }

    /// Takes the idle connection out of a slot.
    ///
    /// # Safety
    ///
    /// The caller owns `index` (popped it, took its chain, or is undoing
    /// its own `put`).
    unsafe fn take(&self, index: u16) -> Occupied<C> {
        // SAFETY: the caller owns the slot; the Acquire that gave it
        // ownership (the stack's pop, or the waiter's load of `READY`)
        // made the previous owner's writes visible.
        let entry = self.get(index).entry.with_mut(|e| unsafe { (*e).take() });
        match entry {
            Some(entry) => Occupied { index, entry },
            // An idle-stack index always has its entry; anything else is a
            // bug in this crate, not a user error.
            None => unreachable!("idle slot {index} held no connection"),
        }
    }
}

// SAFETY: an `Entry<C>` is only ever accessed by the slot's single owner (the
// rule on `Slot::entry`), and moving a `C: Send` between threads is sound.
// `Slots` itself never gives two threads a `&C` at once: `entry` and
// `entry_mut` need the slot's `Held` token, which one owner holds; a
// token handed to a waiter passes through the waiter queue's node, whose
// Release store and Acquire load of the node's state order the previous
// owner's last touch of the entry before the waiter's first. The one
// path that can share a `&C` between threads is a `&PooledConnection`
// (its `Deref`), and the guard carries a `PhantomData<C>` so that it is
// `Sync` only when `C: Sync`; `retain` runs its predicate on the caller's
// thread over connections it took out of the idle set.
unsafe impl<C: Send> Sync for Slots<C> {}
// SAFETY: as above; the slots own their connections.
unsafe impl<C: Send> Send for Slots<C> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::clock::Stamp;

    /// An idle entry holding `conn` (also used by `slots/parked.rs`'s tests).
    pub(super) fn entry(conn: u32) -> Entry<u32> {
        let t = Stamp::from_nanos(1);
        Entry {
            conn,
            created_at: t,
            expires_at: Stamp::NEVER,
            last_used: t,
            generation: 0,
            last_ping: t,
            fresh: false,
            from_connect: false,
        }
    }

    fn counts(s: &Slots<u32>) -> (u32, u32, u32, u32) {
        let c = s.census();
        (c.idle, c.in_use, c.opening, s.open())
    }

    #[test]
    fn reserve_fill_park_pop_and_free() {
        let s = Slots::new(2);
        let a = s.reserve().expect("free slot");
        let b = s.reserve().expect("free slot");
        assert!(s.reserve().is_none(), "two slots only");
        assert_eq!(counts(&s), (0, 0, 2, 2));
        s.push_idle(s.fill(a, entry(10))).unwrap();
        s.push_idle(s.fill(b, entry(20))).unwrap();
        assert_eq!(counts(&s), (2, 0, 0, 2));
        let Popped::Node(top) = s.pop_idle() else {
            panic!("two idle")
        };
        assert_eq!(top.entry.conn, 20, "LIFO");
        assert_eq!(counts(&s), (1, 1, 0, 2));
        let (slot, entry) = top.vacate();
        assert_eq!(entry.conn, 20);
        s.free(slot);
        assert_eq!(counts(&s), (1, 0, 0, 1));
        assert!(s.reserve().is_some(), "the freed slot is reserved again");
    }

    #[test]
    fn a_refused_push_gives_the_connection_back() {
        let s = Slots::new(1);
        let slot = s.reserve().unwrap();
        assert!(s.mark_waiting().is_ok(), "empty: callers may wait");
        let (why, back) = s.push_idle(s.fill(slot, entry(7))).unwrap_err();
        assert_eq!(why, PushRefused::Waiters);
        assert_eq!(back.entry.conn, 7);
        s.clear_waiting();
        s.push_idle(back).unwrap();
        for h in s.close_idle() {
            assert_eq!(h.entry.conn, 7);
            s.free(h.vacate().0);
        }
        let slot = s.reserve().unwrap();
        let (why, back) = s.push_idle(s.fill(slot, entry(8))).unwrap_err();
        assert_eq!(why, PushRefused::Closed);
        s.free(back.vacate().0);
        assert_eq!(counts(&s), (0, 0, 0, 0));
    }

    #[test]
    fn a_held_connection_is_used_and_parked_in_place() {
        let s = Slots::new(1);
        let slot = s.reserve().unwrap();
        s.push_idle(s.fill(slot, entry(5))).unwrap();
        let Popped::Node(mut held) = s.pop_held() else {
            panic!("one idle")
        };
        assert_eq!(counts(&s), (0, 1, 0, 1));
        s.entry_mut(&mut held).conn += 1;
        assert_eq!(s.entry(&held).conn, 6);
        s.push_held(held).unwrap();
        assert_eq!(counts(&s), (1, 0, 0, 1));
        // Taken out and put back: the same connection, still in use.
        let Popped::Node(held) = s.pop_held() else {
            panic!("parked again")
        };
        let h = s.take_held(held);
        assert_eq!(h.entry.conn, 6);
        let held = s.hold(h);
        assert!(s.mark_waiting().is_ok(), "empty: callers may wait");
        let (why, back) = s.push_held(held).unwrap_err();
        assert_eq!(why, PushRefused::Waiters);
        let (slot, entry) = s.take_held(back).vacate();
        assert_eq!(entry.conn, 6);
        s.free(slot);
        assert_eq!(counts(&s), (0, 0, 0, 0));
    }

    #[test]
    fn take_idle_yields_every_connection_once() {
        let s = Slots::new(3);
        for conn in 0..3 {
            let slot = s.reserve().unwrap();
            s.push_idle(s.fill(slot, entry(conn))).unwrap();
        }
        let taken: Vec<_> = s.take_idle().collect();
        let conns: Vec<u32> = taken.iter().map(|h| h.entry.conn).collect();
        assert_eq!(conns, [2, 1, 0], "top first");
        assert!(matches!(s.pop_idle(), Popped::Empty));
        for h in taken {
            s.push_idle(h).unwrap();
        }
        assert!(
            matches!(s.mark_waiting(), Err((Popped::Node(ref h), false)) if s.entry(h).conn == 0),
            "a waiter finds the top connection instead of queuing"
        );
    }
}
