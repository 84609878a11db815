//! A waiting caller: the [`Waiter`] future that owns a queue node, and what
//! it needs from the pool ([`WaitHost`]). The node protocol it follows is
//! described in the parent module (`waiters.rs`).

use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::{Node, WaiterQueue, DONE, FAILED, NEW, QUEUED, READY, TIMED_OUT};
use crate::clock::Stamp;
use crate::linked_list::Pointers;
use crate::sync::{lock, AtomicU32, Ordering, UnsafeCell};

/// What a [`Waiter`] needs from the pool around it.
pub(crate) trait WaitHost<T> {
    /// The queue to wait in.
    fn queue(&self) -> &WaiterQueue<T>;
    /// Called under the queue's lock when a waiter is about to queue: marks
    /// callers as waiting on the idle stack (its `WAITERS` bit), or returns
    /// how the wait ends at once instead (a connection found idle after
    /// all, or the pool closed).
    fn flag_waiting(&self) -> Result<(), Handed<T>>;
    /// Called under the queue's lock when it empties: clears the mark.
    fn unflag_waiting(&self);
    /// Called right after the waiter queued (outside the lock), `rearm`
    /// when the sweeper must be told of an earlier deadline; and again,
    /// without `rearm`, each time the waiter is polled while still queued
    /// (woken by [`WaiterQueue::nudge`], or by its task for something
    /// else), so that what only a task can start is asked for from the
    /// waiter's own.
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
    /// Connecting failed with nothing open that could come back (fail
    /// fast); the pool holds the error.
    Failed,
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
            if let Err(now) = self.host.flag_waiting() {
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
            // Relaxed: the waiter's write in the store-buffering protocol
            // (see `Connector` in `engine/connect.rs`); the SeqCst fence that
            // `request_connections` starts with, reached through `queued`
            // below, orders it before the connector count is read, so
            // either this waiter sees a connector leaving or that connector
            // sees this waiter.
            queue.waiting.fetch_add(1, Ordering::Relaxed);
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
                FAILED => {
                    this.node.state.store(DONE, Ordering::Relaxed);
                    return Poll::Ready(Handed::Failed);
                }
                QUEUED => {
                    // Still queued (nudged, or woken for something else):
                    // refresh the waker unless the stored one wakes the
                    // same task.
                    {
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
                    }
                    // Ask again from this task (outside the lock).
                    this.host.queued(false);
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
                    self.host.unflag_waiting();
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
