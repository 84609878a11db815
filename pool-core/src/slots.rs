//! The pool's connection slots: one per possible connection, allocated with
//! the pool. A slot index is the node the idle stack and the free list link
//! (see `index_stack.rs`); the slot holds the connection while it is idle,
//! its state (free, opening, idle, in use), how many times it was checked
//! out, and, when leak detection is on, who took it while it is in use.
//!
//! State and checkout count live in the slot, written only by the slot's
//! owner with plain (uncontended) stores on a cache line of its own, instead
//! of in pool-wide counters every checkout and return would contend on. A
//! [`Census`] adds them up when someone asks: each slot is in exactly one
//! state, so `total == idle + in_use + opening <= max_size` holds for every
//! census.

use std::time::Duration;

use crate::clock::Stamp;
use crate::index_stack::Links;
use crate::leak::LeakSlot;
use crate::sync::{AtomicU64, AtomicU8, Ordering};

use crossbeam_utils::CachePadded;

use crate::sync::UnsafeCell;

/// A connection with what the pool knows about it. It moves with the
/// connection: in the slot while idle, in the guard while in use, in a
/// waiter's node during a handoff.
#[derive(Debug)]
pub(crate) struct Entry<C> {
    pub(crate) conn: C,
    pub(crate) created_at: Stamp,
    /// When it must be retired (max lifetime less jitter), or `NEVER`.
    pub(crate) expires_at: Stamp,
    /// When it was opened or last came back.
    pub(crate) last_used: Stamp,
    /// The pool's eviction generation when its connect started; an older
    /// generation than the pool's means `soft_evict_all` retired it.
    pub(crate) generation: u64,
    /// When the housekeeper last pinged it (keepalive).
    pub(crate) last_ping: Stamp,
}

impl<C> Entry<C> {
    pub(crate) fn idle_for(&self, now: Stamp) -> Duration {
        now.since(self.last_used)
    }
}

/// A connection in a given slot, owned by whoever holds this value.
#[derive(Debug)]
pub(crate) struct Handoff<C> {
    pub(crate) index: u16,
    pub(crate) entry: Entry<C>,
}

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
}

/// The slots' states added up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Census {
    pub(crate) idle: u32,
    pub(crate) in_use: u32,
    pub(crate) opening: u32,
}

impl Census {
    pub(crate) fn total(&self) -> u32 {
        self.idle + self.in_use + self.opening
    }
}

pub(crate) struct Slot<C> {
    /// `Some` exactly while the slot is on the idle stack.
    ///
    /// # Safety
    ///
    /// Only the slot's owner (see `index_stack.rs`, "Ownership") may touch
    /// it: the thread that reserved or popped the index, before it pushes
    /// the index on a stack.
    entry: UnsafeCell<Option<Entry<C>>>,
    /// A [`State`]; written by the owner (Relaxed: read only for counts).
    state: AtomicU8,
    /// Zero-wait checkouts of this slot; written by the owner only.
    checkouts: AtomicU64,
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

pub(crate) struct Slots<C> {
    pub(crate) links: Links,
    slots: Box<[CachePadded<Slot<C>>]>,
}

impl<C> std::fmt::Debug for Slots<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("len", &self.slots.len())
            .finish()
    }
}

impl<C> Slots<C> {
    pub(crate) fn new(len: usize) -> Self {
        Self {
            links: Links::new(len),
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
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Adds up the slots' states.
    pub(crate) fn census(&self) -> Census {
        let mut c = Census::default();
        for slot in self.slots.iter() {
            match slot.state.load(Ordering::Relaxed) {
                s if s == State::Idle as u8 => c.idle += 1,
                s if s == State::InUse as u8 => c.in_use += 1,
                s if s == State::Opening as u8 => c.opening += 1,
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

    pub(crate) fn get(&self, index: u16) -> &Slot<C> {
        debug_assert!(
            usize::from(index) < self.slots.len(),
            "slot {index} out of range"
        );
        &self.slots[usize::from(index)]
    }

    /// Stores an idle connection in its slot before the index is pushed.
    ///
    /// # Safety
    ///
    /// The caller owns `index` (reserved or popped it, has not pushed it).
    pub(crate) unsafe fn put(&self, index: u16, entry: Entry<C>) {
        // SAFETY: the caller owns the slot, so no other thread accesses the
        // cell until the Release push that follows publishes it.
        self.get(index).entry.with_mut(|e| unsafe {
            debug_assert!((*e).is_none(), "slot {index} already holds a connection");
            *e = Some(entry);
        });
    }

    /// Takes the idle connection out of a slot just popped.
    ///
    /// # Safety
    ///
    /// The caller owns `index` (popped it, or is undoing its own `put`).
    pub(crate) unsafe fn take(&self, index: u16) -> Entry<C> {
        // SAFETY: the caller owns the slot; the Acquire pop that gave it
        // ownership made the pusher's write visible.
        let entry = self.get(index).entry.with_mut(|e| unsafe { (*e).take() });
        match entry {
            Some(e) => e,
            // An idle-stack index always has its entry; anything else is a
            // bug in this crate, not a user error.
            None => unreachable!("idle slot {index} held no connection"),
        }
    }
}

// SAFETY: an `Entry<C>` is only ever accessed by the slot's single owner (the
// rule on `Slot::entry`), and moving a `C: Send` between threads is sound.
unsafe impl<C: Send> Sync for Slots<C> {}
// SAFETY: as above; the slots own their connections.
unsafe impl<C: Send> Send for Slots<C> {}
