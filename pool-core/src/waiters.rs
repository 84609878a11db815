//! The queue of callers waiting for a connection: first come, first served,
//! woken by notification, never by polling.
//!
//! A waiting caller is a [`Waiter`] future whose node lives inside the future
//! itself (an *intrusive* list): queuing links the node in, allocates
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
//! sweeper task per pool sleeps until the earliest deadline in the queue,
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

use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::clock::Stamp;
use crate::linked_list::{Linked, List, Pointers};
use crate::sync::{lock, AtomicU32, Mutex, Ordering, UnsafeCell};

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
        // SeqCst: pairs with the SeqCst increment in `Waiter::register` and
        // the SeqCst decrement of the connector count that a leaving
        // connector makes before it reads this (`connector.rs`): the
        // store-buffering protocol between the two counts.
        self.waiting.load(Ordering::SeqCst)
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
                // `register` takes part in the store-buffering protocol.
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
                    if state == CLOSED {
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

    /// Times out every waiter past its deadline, takes them off the queue,
    /// and returns the next deadline to sleep until.
    pub(crate) fn sweep(&self, cleared: impl Fn(), now: Stamp) -> Option<Stamp> {
        let (wakers, next) =
            self.unlink_where(cleared, TIMED_OUT, |n| n.deadline.is_some_and(|d| d <= now));
        wakers.into_iter().for_each(Waker::wake);
        next
    }
}

/// What a [`Waiter`] needs from the pool around it.
pub(crate) trait WaitHost<T> {
    /// The queue to wait in.
    fn queue(&self) -> &WaiterQueue<T>;
    /// Called under the queue's lock when a waiter is about to queue: marks
    /// callers as waiting on the idle stack (its `WAITERS` bit), or returns
    /// how the wait ends at once instead (a connection found idle after
    /// all, or the pool closed).
    fn mark_waiting(&self) -> Result<(), Handed<T>>;
    /// Called under the queue's lock when it empties: clears the mark.
    fn clear_waiting(&self);
    /// Called once, right after the waiter queued (outside the lock):
    /// `rearm` when the sweeper must be told of an earlier deadline.
    fn queued(&self, rearm: bool);
    /// Takes back a value handed to a waiter that left without it.
    fn orphaned(&self, value: T);
}

/// How a wait ended.
#[derive(Debug)]
pub(crate) enum Handed<T> {
    /// A returning caller handed this over, or it was found idle when
    /// queuing.
    Value(T),
    /// The pool is closed.
    Closed,
    /// The deadline passed. The waiter still counts as waiting until it is
    /// dropped.
    TimedOut,
}

/// A caller waiting for a handoff: a future resolving to how the wait
/// ended. It queues on its first poll; dropping it leaves the queue (see
/// "Cancel safety").
pub(crate) struct Waiter<'a, T, H: WaitHost<T>> {
    host: &'a H,
    node: Node<T>,
}

// SAFETY: the node is reached from other threads only through the queue's
// protocol (see the module docs); moving the future to another thread moves
// a `T` at most, hence `T: Send`, and the host is shared, hence `H: Sync`.
unsafe impl<T: Send, H: WaitHost<T> + Sync> Send for Waiter<'_, T, H> {}
// SAFETY: a shared `&Waiter` exposes nothing; every method takes it pinned
// and mutably.
unsafe impl<T: Send, H: WaitHost<T> + Sync> Sync for Waiter<'_, T, H> {}

impl<'a, T, H: WaitHost<T>> Waiter<'a, T, H> {
    pub(crate) fn new(host: &'a H, deadline: Option<Stamp>) -> Self {
        Self {
            host,
            node: Node {
                links: Pointers::new(),
                waker: UnsafeCell::new(None),
                value: UnsafeCell::new(None),
                deadline,
                state: AtomicU32::new(NEW),
                _pinned: PhantomPinned,
            },
        }
    }

    /// Queues the node behind the others, unless a node can be popped from
    /// the idle stack (then the caller gets it) or the stack is closed.
    fn register(&self, waker: &Waker) -> Poll<Handed<T>> {
        let queue = self.host.queue();
        let node = &self.node;
        let rearm = {
            let mut q = lock(&queue.list);
            if let Err(now) = self.host.mark_waiting() {
                node.state.store(DONE, Ordering::Relaxed);
                return Poll::Ready(now);
            }
            // SAFETY: the node is not linked yet (state NEW), so no one
            // else can reach its waker.
            node.waker.with_mut(|w| unsafe { *w = Some(waker.clone()) });
            // SAFETY: the node is pinned inside this `Waiter` (`poll` takes
            // it pinned) and its `Drop` unlinks it; it is not linked yet
            // (state NEW); we hold the lock.
            unsafe { q.list.push_back(node) };
            // Relaxed: others read it under the lock; the waiter itself
            // is this thread.
            node.state.store(QUEUED, Ordering::Relaxed);
            let rearm = match (node.deadline, q.armed) {
                (Some(d), Some(armed)) => d < armed,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if rearm {
                q.armed = node.deadline;
            }
            // SeqCst: pairs with the SeqCst decrement of the connector count
            // and the load below it in `connector.rs`, so either this waiter
            // sees a connector leaving or that connector sees this waiter.
            queue.waiting.fetch_add(1, Ordering::SeqCst);
            rearm
        };
        self.host.queued(rearm);
        Poll::Pending
    }

    /// Takes the value of a `READY` node.
    fn take_value(&self) -> T {
        self.node.state.store(DONE, Ordering::Relaxed);
        // SAFETY: the caller saw READY with Acquire: the handing side wrote
        // the value before its Release store and no longer touches the node.
        let value = self.node.value.with_mut(|v| unsafe { (*v).take() });
        value.expect("a READY node holds its value")
    }
}

impl<T, H: WaitHost<T>> Future for Waiter<'_, T, H> {
    type Output = Handed<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Handed<T>> {
        // Only shared access from here on: the node never moves.
        let this = self.into_ref().get_ref();
        loop {
            // Acquire: pairs with the Release store of the final state in
            // `offer` or `unlink_where` that ended the wait.
            match this.node.state.load(Ordering::Acquire) {
                NEW => return this.register(cx.waker()),
                READY => return Poll::Ready(Handed::Value(this.take_value())),
                TIMED_OUT => return Poll::Ready(Handed::TimedOut),
                QUEUED => {
                    // Still queued (woken for something else): refresh the
                    // waker unless the stored one wakes the same task.
                    let list = lock(&this.host.queue().list);
                    // Acquire: as above (the lock orders it too).
                    if this.node.state.load(Ordering::Acquire) != QUEUED {
                        // Ended meanwhile: read the outcome.
                        drop(list);
                        continue;
                    }
                    // SAFETY: the node is linked and we hold the lock.
                    this.node.waker.with_mut(|w| unsafe {
                        if !(*w).as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            *w = Some(cx.waker().clone());
                        }
                    });
                    return Poll::Pending;
                }
                _ => {
                    this.node.state.store(DONE, Ordering::Relaxed);
                    return Poll::Ready(Handed::Closed);
                }
            }
        }
    }
}

impl<T, H: WaitHost<T>> Drop for Waiter<'_, T, H> {
    fn drop(&mut self) {
        let queue = self.host.queue();
        let node = &self.node;
        // Acquire: pairs with the Release store of the final state in
        // `offer` or `unlink_where`, as in `poll`.
        let mut state = node.state.load(Ordering::Acquire);
        if state == QUEUED {
            let mut q = lock(&queue.list);
            // Acquire: as above (the lock orders it too).
            state = node.state.load(Ordering::Acquire);
            if state == QUEUED {
                // SAFETY: QUEUED under the lock: the node is linked.
                unsafe { q.list.unlink(node) };
                node.state.store(DONE, Ordering::Relaxed);
                // Relaxed: as in `offer`.
                queue.waiting.fetch_sub(1, Ordering::Relaxed);
                if q.list.is_empty() {
                    self.host.clear_waiting();
                }
                return;
            }
        }
        match state {
            // Counted out by whoever handed it over; pass the value on.
            READY => self.host.orphaned(self.take_value()),
            // The sweeper left the count to us.
            TIMED_OUT => {
                node.state.store(DONE, Ordering::Relaxed);
                // Relaxed: as in `offer`.
                queue.waiting.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}
