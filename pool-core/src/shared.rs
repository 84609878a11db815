//! The pool's engine, shared by every `Pool` handle and checked-out
//! connection.
//!
//! # Implementation details
//!
//! **Slots and the bound.** The pool allocates `max_size` slots up front. A
//! connection always occupies one, from the moment its connect starts until
//! it is closed. Free slots sit on a lock-free free list; reserving one is a
//! pop, so the bound holds by construction: there are never more slots than
//! `max_size`, whatever interleaving, cancellation or panic happens. A slot
//! reserved for a connect is a [`Reservation`] whose `Drop` gives it back.
//!
//! **The idle set** is a Treiber stack of slot indices (`index_stack.rs`):
//! LIFO, so a light load keeps reusing the same few hot connections and the
//! rest idle out. Checkout pops, a clean return pushes; neither locks nor
//! allocates.
//!
//! **Waiting** (`waiters.rs`): a caller that finds the stack empty links a
//! node that lives in its own future into the waiter queue (no allocation)
//! and sets the stack's `WAITERS` bit in the same word as its head. While
//! the bit is set a return cannot push: it hands its connection to the
//! longest waiter under the queue's lock, and newcomers queue behind.
//! Waiters are woken by that handoff, never by polling. Their deadlines are
//! kept by one sweeper task per pool, not a timer per waiter.
//!
//! **Creation** is demand-driven and apart from callers (`connector.rs`):
//! queuing a waiter asks for connections; at most `max_concurrent_connects`
//! connector tasks open them, and each new connection is delivered exactly
//! like a returned one, to the longest waiter or onto the stack. A caller who
//! gives up does not abort a half-open connection.
//!
//! **Returns** (`release.rs`): broken or expired connections are closed; dirty
//! ones (`needs_reset`) or any with an `after_release` hook are reset in a
//! spawned task before anyone can get them; clean ones are delivered inline.
//!
//! **Counts** are kept per slot (`slots.rs`): each slot is in one state,
//! so every census satisfies `total == idle + in_use + opening <= max_size`,
//! and the hot path touches no pool-wide counter.

use std::error::Error;

use pool_api::{Hooks, ManageConnection, PoolConfig, PoolError, PoolState, TimeoutPhase};
use tokio::sync::Notify;

use crate::clock::{Clock, Stamp};

use crate::index_stack::{IndexStack, Popped};
use crate::slots::{Census, Entry, Handoff, Slots, State};
use crate::stats::{Reason, Stats};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::lock_std as lock;
use crate::waiters::WaiterQueue;

pub(crate) type LastError = Arc<dyn Error + Send + Sync>;

pub(crate) struct Shared<M: ManageConnection> {
    pub(crate) manager: M,
    pub(crate) config: PoolConfig,
    pub(crate) hooks: Option<Box<dyn Hooks<M>>>,
    pub(crate) slots: Slots<M::Connection>,
    pub(crate) idle: IndexStack,
    pub(crate) free: IndexStack,
    pub(crate) waiters: WaiterQueue<Handoff<M::Connection>>,
    /// Slots reserved: connections open or being opened. Changed only when
    /// a connection is opened or closed (never on checkout or return), so
    /// the slow paths can read it instead of adding up every slot.
    pub(crate) open: AtomicU32,
    /// Connector tasks running (bounded by `max_concurrent_connects`).
    pub(crate) connecting: AtomicU32,
    /// Checkout-check rejections in a row that replacing did not cure;
    /// connectors back off while it is not zero (see `connector.rs`).
    pub(crate) rejected_in_a_row: AtomicU32,
    /// When the last checkout check rejected a connection (stamp nanos).
    pub(crate) rejected_at: AtomicU64,
    /// `Pool` handles alive; at zero, nothing refills to `min_size` and the
    /// housekeeper stops.
    pub(crate) handles: AtomicU32,
    /// Bumped by `soft_evict_all`.
    pub(crate) generation: AtomicU64,
    pub(crate) housekeeper_started: AtomicU32,
    /// Wakes the deadline sweeper (`housekeeper.rs`).
    pub(crate) sweeper: Arc<Notify>,
    pub(crate) sweeper_started: AtomicU32,
    pub(crate) stats: Stats,
    last_error: Mutex<Option<LastError>>,
    /// Signalled when a slot is freed after close.
    pub(crate) drained: Notify,
    /// The source of every timestamp.
    pub(crate) clock: Clock,
    #[cfg(feature = "metrics")]
    pub(crate) export: crate::export::Export,
}

impl<M: ManageConnection + std::fmt::Debug> std::fmt::Debug for Shared<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.config.name())
            .field("state", &self.state())
            .field("closed", &self.idle.is_closed())
            .field("manager", &self.manager)
            .finish_non_exhaustive()
    }
}

impl<M: ManageConnection> Shared<M> {
    pub(crate) fn new(manager: M, config: PoolConfig, hooks: Option<Box<dyn Hooks<M>>>) -> Self {
        let size = config.max_size() as usize;
        let slots = Slots::new(size);
        let free = IndexStack::new();
        for i in (0..size).rev() {
            // `i < max_size <= MAX_POOL_SIZE`, so it fits in u16 and is not NIL.
            let pushed = free.push(&slots.links, i as u16);
            debug_assert!(pushed.is_ok());
        }
        Self {
            manager,
            hooks,
            slots,
            idle: IndexStack::new(),
            free,
            waiters: WaiterQueue::new(),
            open: AtomicU32::new(0),
            connecting: AtomicU32::new(0),
            rejected_in_a_row: AtomicU32::new(0),
            rejected_at: AtomicU64::new(0),
            handles: AtomicU32::new(1),
            generation: AtomicU64::new(0),
            housekeeper_started: AtomicU32::new(0),
            sweeper: Arc::new(Notify::new()),
            sweeper_started: AtomicU32::new(0),
            stats: Stats::new(),
            last_error: Mutex::new(None),
            drained: Notify::new(),
            clock: Clock::new(),
            #[cfg(feature = "metrics")]
            export: crate::export::Export::new(config.name()),
            config,
        }
    }

    /// Connections open or being opened (cheap; see `open`).
    pub(crate) fn open_count(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }

    /// The slots' states added up.
    pub(crate) fn census(&self) -> Census {
        self.slots.census()
    }

    pub(crate) fn state(&self) -> PoolState {
        let c = self.census();
        PoolState::new(
            c.idle,
            c.in_use,
            c.opening,
            self.waiters.waiting(),
            self.config.max_size(),
        )
    }

    pub(crate) fn set_last_error(&self, e: LastError) {
        *lock(&self.last_error) = Some(e);
    }

    pub(crate) fn last_error(&self) -> Option<LastError> {
        lock(&self.last_error).clone()
    }

    pub(crate) fn timeout_error(&self, started: Stamp, phase: TimeoutPhase) -> PoolError<M::Error> {
        Stats::bump(&self.stats.timeouts);
        #[cfg(feature = "metrics")]
        self.export.timeout();
        PoolError::Timeout {
            waited: self.clock.now().since(started),
            phase,
            state: self.state(),
            last_error: self.last_error(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.idle.is_closed()
    }

    /// Why `entry` must not be handed out or kept, if it must not.
    pub(crate) fn expired(&self, entry: &Entry<M::Connection>, now: Stamp) -> Option<Reason> {
        if entry.generation < self.generation.load(Ordering::Relaxed) {
            return Some(Reason::SoftEvict);
        }
        (entry.expires_at <= now).then_some(Reason::MaxLifetime)
    }

    /// Reserves a free slot for a connect; `None` at `max_size`.
    pub(crate) fn reserve(self: &Arc<Self>) -> Option<Reservation<M>> {
        match self.free.pop(&self.slots.links) {
            Popped::Node(index) => {
                self.slots.get(index).set(State::Opening);
                self.open.fetch_add(1, Ordering::Relaxed);
                Some(Reservation {
                    shared: self.clone(),
                    index,
                    settled: false,
                })
            }
            _ => None,
        }
    }

    /// Gives a slot back. Called after the connection in it was dropped and
    /// uncounted, so the bound counts the closing connection until it is
    /// really gone.
    pub(crate) fn free_slot(self: &Arc<Self>, index: u16) {
        self.free_slot_quietly(index);
        if self.is_closed() {
            self.drained.notify_waiters();
        } else {
            self.request_connections();
        }
    }

    /// Gives a slot back without asking for a replacement connection.
    fn free_slot_quietly(&self, index: u16) {
        self.slots.get(index).set(State::Free);
        self.open.fetch_sub(1, Ordering::Relaxed);
        let pushed = self.free.push(&self.slots.links, index);
        debug_assert!(pushed.is_ok(), "the free list is never closed");
    }

    /// Closes a connection the caller owns and frees its slot.
    pub(crate) fn evict(self: &Arc<Self>, index: u16, entry: Entry<M::Connection>, reason: Reason) {
        tracing::debug!(
            pool = self.config.name(),
            reason = reason.label(),
            "closing connection"
        );
        drop(entry);
        self.stats.evicted(reason);
        #[cfg(feature = "metrics")]
        self.export.evicted(reason);
        self.free_slot(index);
    }

    /// Puts a connection the caller owns back in service: to the longest
    /// waiter, else on top of the idle stack. Lock-free unless someone is
    /// waiting.
    pub(crate) fn deliver(self: &Arc<Self>, index: u16, mut entry: Entry<M::Connection>) {
        let slot = self.slots.get(index);
        loop {
            // Callers queued (the bit is only a hint here; `offer` decides
            // under the queue's lock): hand the connection straight over,
            // without parking it in the slot and taking it back.
            if self.idle.has_waiters() {
                // Marked in use before the waiter can see it; a returned
                // connection already is, and its slot's line stays clean.
                slot.mark(State::InUse);
                match self.waiters.offer(&self.idle, Handoff { index, entry }) {
                    Ok(()) => return,
                    // The queue emptied meanwhile and the bit is cleared.
                    Err(h) => entry = h.entry,
                }
            }
            // Marked idle before the push: once pushed, the slot is someone
            // else's to mark.
            slot.set(State::Idle);
            // SAFETY: the caller owns `index`; it becomes the stack's only on
            // a successful push.
            unsafe { self.slots.put(index, entry) };
            let refused = match self.idle.push(&self.slots.links, index) {
                Ok(()) => return,
                Err(refused) => refused,
            };
            // SAFETY: the push failed, so we still own `index` and undo our put.
            entry = unsafe { self.slots.take(index) };
            if refused == crate::index_stack::PushRefused::Closed {
                return self.evict(index, entry, Reason::Closed);
            }
            // Refused for waiters that queued since the check: loop to
            // hand it over.
        }
    }

    /// Closes the pool: fails waiters, closes idle connections, and returns
    /// once every connection is closed.
    pub(crate) async fn close(self: &Arc<Self>) {
        let mut index = self.idle.close();
        while index != crate::index_stack::NIL {
            let next = self.slots.links.next(index);
            // SAFETY: `close` handed us the whole chain; we own every node.
            let entry = unsafe { self.slots.take(index) };
            self.evict(index, entry, Reason::Closed);
            index = next;
        }
        self.waiters.close_all(&self.idle);
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.open_count() == 0 {
                return;
            }
            drained.await;
        }
    }

    /// Retires every connection: idle ones now, in-use ones at their return.
    pub(crate) fn soft_evict_all(self: &Arc<Self>) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        let mut index = self.idle.take_all();
        while index != crate::index_stack::NIL {
            let next = self.slots.links.next(index);
            // SAFETY: `take_all` handed us the whole chain.
            let entry = unsafe { self.slots.take(index) };
            self.evict(index, entry, Reason::SoftEvict);
            index = next;
        }
    }
}

impl<M: ManageConnection> Drop for Shared<M> {
    fn drop(&mut self) {
        // The sweeper holds only a `Weak`: wake it so it sees the pool gone.
        self.sweeper.notify_one();
    }
}

/// A reserved slot with no connection in it yet; dropping it gives the slot
/// back (a cancelled or failed connect never leaks a slot).
pub(crate) struct Reservation<M: ManageConnection> {
    shared: Arc<Shared<M>>,
    index: u16,
    settled: bool,
}

impl<M: ManageConnection> Reservation<M> {
    /// Gives the slot back after a failed connect that is reported to the
    /// caller (`Pool::new`), without starting another connect for it.
    pub(crate) fn abandon(mut self) {
        self.settled = true;
        self.shared.free_slot_quietly(self.index);
    }

    /// Puts the new connection in service.
    pub(crate) fn fill(mut self, entry: Entry<M::Connection>) {
        self.settled = true;
        self.shared.deliver(self.index, entry);
    }
}

impl<M: ManageConnection> Drop for Reservation<M> {
    fn drop(&mut self) {
        if !self.settled {
            self.shared.free_slot(self.index);
        }
    }
}
