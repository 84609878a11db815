//! The pool's connection slots: one per possible connection, allocated with
//! the pool. A slot index is the node the idle stack and the free list link
//! (see `index_stack.rs`); the slot holds the connection while it is idle
//! and, when leak detection is on, who took it while it is in use.

use std::time::Duration;

use crate::clock::Stamp;
use crate::index_stack::Links;
use crate::leak::LeakSlot;
use crate::sync::UnsafeCell;

/// A connection with what the pool knows about it. It moves with the
/// connection: in the slot while idle, in the guard while in use, in a
/// waiter's cell during a handoff.
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

pub(crate) struct Slot<C> {
    /// `Some` exactly while the slot is on the idle stack.
    ///
    /// # Safety
    ///
    /// Only the slot's owner (see `index_stack.rs`, "Ownership") may touch
    /// it: the thread that reserved or popped the index, before it pushes
    /// the index on a stack.
    entry: UnsafeCell<Option<Entry<C>>>,
    pub(crate) leak: LeakSlot,
}

pub(crate) struct Slots<C> {
    pub(crate) links: Links,
    slots: Box<[Slot<C>]>,
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
                .map(|_| Slot {
                    entry: UnsafeCell::new(None),
                    leak: LeakSlot::default(),
                })
                .collect(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
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
