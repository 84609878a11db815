//! The queue of callers waiting for a connection: first come, first served,
//! woken by notification, never by polling.
//!
//! A waiting caller is a [`Waiter`] future (`waiters/waiter.rs`) whose node
//! lives inside the future itself (an *intrusive* list, `linked_list.rs`):
//! queuing links the node in, allocates
//! nothing, and the returning side fills it directly (a *handoff*): the
//! connection goes from the releasing thread to the longest waiter without
//! touching the idle stack, so a newcomer cannot snatch it. The queue's mutex
//! is only taken on the slow paths (someone queues, someone is served or
//! gives up); a return with no one waiting never sees it, because the idle
//! stack's `WAITERS` bit sends returns here only while the queue is in use
//! (see `index_stack.rs`).
//!
//! # The node protocol
//!
//! A node's links and waker are touched only under the queue's lock. Its
//! `state` is written only under that lock while the node is linked, and the
//! waiter reads it without the lock: whoever ends a wait (a handoff, the
//! deadline sweeper, close) unlinks the node, takes its waker, writes the
//! value (a handoff) and stores the final state with `Release` as its last
//! touch of the node; the waiter's `Acquire` load of that state then owns
//! the node again, value included. So a served waiter takes its connection
//! without locking, and a waiter leaving early locks only if its node may
//! still be linked.
//!
//! # Deadlines
//!
//! A waiter arms no timer of its own. Its deadline sits in its node, and one
//! sweeper task per pool (`engine/sweeper.rs`) sleeps until the earliest deadline
//! in the queue,
//! unlinks the nodes that are due as timed out and wakes them. Registering
//! re-arms the sweeper only when its deadline is earlier than the armed one,
//! which with one `acquire_timeout` for every caller is almost never.
//!
//! # Cancel safety
//!
//! Dropping a [`Waiter`] (a dropped `get()` future) unlinks its node under
//! the lock if it is still queued; if a connection was already handed to it,
//! the drop passes that connection on through [`WaitHost::orphaned`], so
//! nothing is lost.

use std::marker::PhantomPinned;
use std::task::Waker;

use crate::clock::Stamp;
use crate::linked_list::{Linked, List, Pointers};
use crate::sync::{lock, AtomicU32, Mutex, Ordering, UnsafeCell};

mod waiter;

pub(crate) use waiter::{Handed, WaitHost, Waiter};

/// Not queued yet.
const NEW: u32 = 0;
/// Linked in the queue.
const QUEUED: u32 = 1;
/// Unlinked by a handoff; the value is in the node.
const READY: u32 = 2;
/// Unlinked by `close_all`.
const CLOSED: u32 = 3;
/// Unlinked by the deadline sweeper; still counted in `waiting` until the
/// waiter is dropped, so a timeout error built before that counts it.
const TIMED_OUT: u32 = 4;
/// Finished: nothing left to take, nothing to undo.
const DONE: u32 = 5;
/// Unlinked by `fail_all`: connecting failed with nothing open that could
/// come back (fail fast); the error is the pool's, not the node's.
const FAILED: u32 = 6;

/// One waiting caller's place in the queue. Lives inside its [`Waiter`],
/// which is pinned while the node may be linked.
struct Node<T> {
    /// Neighbours in the queue; under the queue's lock.
    links: Pointers<Node<T>>,
    /// Wakes the waiting task; under the queue's lock while linked.
    waker: UnsafeCell<Option<Waker>>,
    /// The handed value: written under the lock before `state` becomes
    /// `READY`, read by the waiter after it sees `READY`.
    value: UnsafeCell<Option<T>>,
    /// When the sweeper times this waiter out; `None`: never.
    deadline: Option<Stamp>,
    /// One of `NEW`..`DONE`; see "The node protocol".
    state: AtomicU32,
    _pinned: PhantomPinned,
}

// SAFETY: `pointers` always returns the `links` field, which only the
// queue's list touches.
unsafe impl<T> Linked for Node<T> {
    fn pointers(&self) -> &Pointers<Self> {
        &self.links
    }
}

/// What the queue's lock guards.
struct Queued<T> {
    list: List<Node<T>>,
    /// The deadline the sweeper sleeps until, if any.
    armed: Option<Stamp>,
}

/// The FIFO queue of waiting callers.
///
/// Aligned to 128 bytes, like a padded atomic: its lock and count are
/// written by every queuing and every handoff, so they share one cache line
/// with each other and none with the pool's read-mostly fields.
#[repr(align(128))]
pub(crate) struct WaiterQueue<T> {
    list: Mutex<Queued<T>>,
    /// Callers queued and not yet served, closed or gone; read without the
    /// lock for metrics and connection demand. Decremented by whoever ends
    /// the wait (the handoff, the close, or the waiter itself when it gives
    /// up or was timed out), so each waiter is counted out exactly once.
    waiting: AtomicU32,
}

// SAFETY: the raw pointers in the `List` point at nodes of pinned `Waiter`s that
// are only dereferenced under the list's mutex (see "The node protocol");
// values of `T` cross threads through the nodes, hence `T: Send`.
unsafe impl<T: Send> Send for WaiterQueue<T> {}
// SAFETY: as above; every shared access goes through the mutex or atomics.
unsafe impl<T: Send> Sync for WaiterQueue<T> {}

impl<T> std::fmt::Debug for WaiterQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaiterQueue")
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl<T> WaiterQueue<T> {
    pub(crate) fn new() -> Self {
        Self {
            list: Mutex::new(Queued {
                list: List::new(),
                armed: None,
            }),
            waiting: AtomicU32::new(0),
        }
    }

    /// Callers waiting now.
    pub(crate) fn waiting(&self) -> u32 {
        // Relaxed: where the connector decision reads it, the SeqCst fence
        // at the top of `request_connections` orders it (the
        // store-buffering protocol, see `Connector` in `engine/connect.rs`);
        // elsewhere it is a figure for metrics.
        self.waiting.load(Ordering::Relaxed)
    }

    /// Hands `value` to the longest waiter. `Err(value)` when no one is
    /// waiting: `cleared` (which clears the idle stack's `WAITERS` bit) has
    /// then run under the lock, so the caller can push the value on the
    /// idle stack.
    pub(crate) fn offer(&self, cleared: impl Fn(), value: T) -> Result<(), T> {
        let waker = {
            let mut q = lock(&self.list);
            let node = q.list.head();
            if node.is_null() {
                cleared();
                return Err(value);
            }
            // SAFETY: `node` is linked (it is the head), so valid until its
            // state leaves QUEUED, which the store below does last.
            unsafe {
                q.list.unlink(node);
                let node = &*node;
                let waker = node.waker.with_mut(|w| (*w).take());
                node.value.with_mut(|v| *v = Some(value));
                // Release: publishes the value; pairs with the Acquire
                // load of `state` in `Waiter::poll` and `Waiter::drop`,
                // after which the waiter owns the node again.
                node.state.store(READY, Ordering::Release);
                // Served: no longer counted as waiting. Relaxed: a
                // connector that still sees the old count opens one
                // connection too many at worst; only the increment in
                // `Waiter::register` takes part in the store-buffering
                // protocol.
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                if q.list.is_empty() {
                    cleared();
                }
                waker
            }
        };
        // Woken outside the lock so the waiter does not block on it.
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Wakes the longest waiter without serving it: its task polls it
    /// again and, still queued, asks the host for connections from there
    /// ([`WaitHost::queued`]). For a slot freed where no connect can start
    /// (a thread outside any runtime) and a connector cut off by its
    /// runtime's shutdown: the waiter's own task runs where one can.
    pub(crate) fn nudge(&self) {
        if self.waiting() == 0 {
            return;
        }
        let waker = {
            let q = lock(&self.list);
            let node = q.list.head();
            if node.is_null() {
                return;
            }
            // SAFETY: `node` is linked (it is the head), so valid while we
            // hold the lock, under which its waker is read.
            unsafe { (*node).waker.with_mut(|w| (*w).clone()) }
        };
        // Woken outside the lock, as in `offer`.
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Unlinks every node `due` picks, giving it `state`; returns their
    /// wakers and the earliest deadline left.
    fn unlink_where(
        &self,
        cleared: impl Fn(),
        state: u32,
        due: impl Fn(&Node<T>) -> bool,
    ) -> (Vec<Waker>, Option<Stamp>) {
        let mut wakers = Vec::new();
        let mut earliest: Option<Stamp> = None;
        let mut q = lock(&self.list);
        let mut cur = q.list.head();
        while !cur.is_null() {
            // SAFETY: linked nodes are valid while linked; we hold the lock
            // and read `next` before the node can leave the list.
            unsafe {
                let node = &*cur;
                let next = q.list.next(cur);
                if due(node) {
                    q.list.unlink(cur);
                    if let Some(w) = node.waker.with_mut(|w| (*w).take()) {
                        wakers.push(w);
                    }
                    if state == CLOSED || state == FAILED {
                        // Relaxed: as in `offer`.
                        self.waiting.fetch_sub(1, Ordering::Relaxed);
                    }
                    // Release: the last touch of the node; pairs with the
                    // Acquire load of `state` in `Waiter::poll` and
                    // `Waiter::drop` (see the module docs).
                    node.state.store(state, Ordering::Release);
                } else if let Some(d) = node.deadline {
                    earliest = Some(earliest.map_or(d, |e| e.min(d)));
                }
                cur = next;
            }
        }
        if q.list.is_empty() {
            cleared();
        }
        q.armed = earliest;
        (wakers, earliest)
    }

    /// Fails every queued waiter with "closed". The idle stack must
    /// already be closed so no one registers afterwards; `cleared` clears
    /// its `WAITERS` bit.
    pub(crate) fn close_all(&self, cleared: impl Fn()) {
        let (wakers, _) = self.unlink_where(cleared, CLOSED, |_| true);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Fails every queued waiter: connecting failed and nothing open could
    /// come back to them (fail fast). Each reads the error from the pool.
    pub(crate) fn fail_all(&self, cleared: impl Fn()) {
        let (wakers, _) = self.unlink_where(cleared, FAILED, |_| true);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Times out every waiter past its deadline, takes them off the queue,
    /// and returns the next deadline to sleep until.
    pub(crate) fn sweep(&self, cleared: impl Fn(), now: Stamp) -> Option<Stamp> {
        let (wakers, next) =
            self.unlink_where(cleared, TIMED_OUT, |n| n.deadline.is_some_and(|d| d <= now));
        wakers.into_iter().for_each(Waker::wake);
        next
    }
}
