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
use std::ptr;
use std::task::{Context, Poll, Waker};

use crate::clock::Stamp;
use crate::index_stack::{IndexStack, Links, Popped};
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
    /// Neighbours in the queue (null at the ends); under the queue's lock.
    prev: UnsafeCell<*const Node<T>>,
    next: UnsafeCell<*const Node<T>>,
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

/// The linked list behind the queue's lock.
struct List<T> {
    head: *const Node<T>,
    tail: *const Node<T>,
    /// The deadline the sweeper sleeps until, if any.
    armed: Option<Stamp>,
}

impl<T> List<T> {
    fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Links `node` at the tail.
    ///
    /// # Safety
    ///
    /// `node` is pinned, not linked, and stays valid until it is unlinked;
    /// the caller holds the queue's lock.
    unsafe fn push_back(&mut self, node: &Node<T>) {
        let tail = self.tail;
        node.prev.with_mut(|p| *p = tail);
        node.next.with_mut(|p| *p = ptr::null());
        if tail.is_null() {
            self.head = node;
        } else {
            // SAFETY: linked nodes are valid while linked (the caller's lock).
            unsafe { (*tail).next.with_mut(|p| *p = node) };
        }
        self.tail = node;
    }

    /// Unlinks `node`.
    ///
    /// # Safety
    ///
    /// `node` is linked in this list; the caller holds the queue's lock.
    unsafe fn unlink(&mut self, node: *const Node<T>) {
        // SAFETY: `node` and its neighbours are linked, hence valid, and
        // only touched under the lock we hold.
        unsafe {
            let prev = (*node).prev.with_mut(|p| *p);
            let next = (*node).next.with_mut(|p| *p);
            if prev.is_null() {
                self.head = next;
            } else {
                (*prev).next.with_mut(|p| *p = next);
            }
            if next.is_null() {
                self.tail = prev;
            } else {
                (*next).prev.with_mut(|p| *p = prev);
            }
        }
    }
}

/// The FIFO queue of waiting callers.
///
/// Aligned to 128 bytes, like a padded atomic: its lock and count are
/// written by every queuing and every handoff, so they share one cache line
/// with each other and none with the pool's read-mostly fields.
#[repr(align(128))]
pub(crate) struct WaiterQueue<T> {
    list: Mutex<List<T>>,
    /// Callers queued and not yet served, closed or gone; read without the
    /// lock for metrics and connection demand. Decremented by whoever ends
    /// the wait (the handoff, the close, or the waiter itself when it gives
    /// up or was timed out), so each waiter is counted out exactly once.
    waiting: AtomicU32,
}

// SAFETY: the raw pointers in `List` point at nodes of pinned `Waiter`s that
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
            list: Mutex::new(List {
                head: ptr::null(),
                tail: ptr::null(),
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
    /// waiting: the `WAITERS` bit is then cleared, so the caller can push
    /// the value on the idle stack.
    pub(crate) fn offer(&self, stack: &IndexStack, value: T) -> Result<(), T> {
        let waker = {
            let mut list = lock(&self.list);
            let node = list.head;
            if node.is_null() {
                stack.clear_waiters();
                return Err(value);
            }
            // SAFETY: `node` is linked (it is the head), so valid until its
            // state leaves QUEUED, which the store below does last.
            unsafe {
                list.unlink(node);
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
                if list.is_empty() {
                    stack.clear_waiters();
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
        stack: &IndexStack,
        state: u32,
        due: impl Fn(&Node<T>) -> bool,
    ) -> (Vec<Waker>, Option<Stamp>) {
        let mut wakers = Vec::new();
        let mut earliest: Option<Stamp> = None;
        let mut list = lock(&self.list);
        let mut cur = list.head;
        while !cur.is_null() {
            // SAFETY: linked nodes are valid while linked; we hold the lock
            // and read `next` before the node can leave the list.
            unsafe {
                let node = &*cur;
                let next = node.next.with_mut(|p| *p);
                if due(node) {
                    list.unlink(cur);
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
        if list.is_empty() {
            stack.clear_waiters();
        }
        list.armed = earliest;
        (wakers, earliest)
    }

    /// Fails every queued waiter with "closed". The stack must already be
    /// closed so no one registers afterwards.
    pub(crate) fn close_all(&self, stack: &IndexStack) {
        let (wakers, _) = self.unlink_where(stack, CLOSED, |_| true);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Times out every waiter past its deadline, takes them off the queue,
    /// and returns the next deadline to sleep until.
    pub(crate) fn sweep(&self, stack: &IndexStack, now: Stamp) -> Option<Stamp> {
        let (wakers, next) =
            self.unlink_where(stack, TIMED_OUT, |n| n.deadline.is_some_and(|d| d <= now));
        wakers.into_iter().for_each(Waker::wake);
        next
    }
}

/// What a [`Waiter`] needs from the pool around it.
pub(crate) trait WaitHost<T> {
    /// The queue to wait in.
    fn queue(&self) -> &WaiterQueue<T>;
    /// The idle stack whose `WAITERS` bit the queue keeps, and its links.
    fn idle(&self) -> (&IndexStack, &Links);
    /// Called once, right after the waiter queued (outside the lock):
    /// `rearm` when the sweeper must be told of an earlier deadline.
    fn queued(&self, rearm: bool);
    /// Takes back a value handed to a waiter that left without it.
    fn orphaned(&self, value: T);
}

/// How a wait ended.
#[derive(Debug)]
pub(crate) enum Handed<T> {
    /// A returning caller handed this over.
    Value(T),
    /// The idle stack had a node after all when queuing; the caller owns it.
    Node(u16),
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
                prev: UnsafeCell::new(ptr::null()),
                next: UnsafeCell::new(ptr::null()),
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
        let (stack, links) = self.host.idle();
        let node = &self.node;
        let rearm = {
            let mut list = lock(&queue.list);
            match stack.set_waiters(links) {
                Ok(()) => {}
                Err(Popped::Node(i)) => {
                    node.state.store(DONE, Ordering::Relaxed);
                    return Poll::Ready(Handed::Node(i));
                }
                Err(_) => {
                    node.state.store(DONE, Ordering::Relaxed);
                    return Poll::Ready(Handed::Closed);
                }
            }
            // SAFETY: the node is not linked yet (state NEW), so no one
            // else can reach its waker.
            node.waker.with_mut(|w| unsafe { *w = Some(waker.clone()) });
            // SAFETY: the node is pinned inside this `Waiter` (`poll` takes
            // it pinned) and its `Drop` unlinks it; it is not linked yet
            // (state NEW); we hold the lock.
            unsafe { list.push_back(node) };
            // Relaxed: others read it under the lock; the waiter itself
            // is this thread.
            node.state.store(QUEUED, Ordering::Relaxed);
            let rearm = match (node.deadline, list.armed) {
                (Some(d), Some(armed)) => d < armed,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if rearm {
                list.armed = node.deadline;
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
            let (stack, _) = self.host.idle();
            let mut list = lock(&queue.list);
            // Acquire: as above (the lock orders it too).
            state = node.state.load(Ordering::Acquire);
            if state == QUEUED {
                // SAFETY: QUEUED under the lock: the node is linked.
                unsafe { list.unlink(node) };
                node.state.store(DONE, Ordering::Relaxed);
                // Relaxed: as in `offer`.
                queue.waiting.fetch_sub(1, Ordering::Relaxed);
                if list.is_empty() {
                    stack.clear_waiters();
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

#[cfg(all(test, loom))]
mod loom_tests {
    //! Models of the handoff protocol: the real `IndexStack`, `WaiterQueue`
    //! and `Waiter`, driven the way `Shared::deliver` (return) and
    //! `Shared::acquire` (checkout) drive them, with a node index standing in
    //! for the connection. Waits block in loom's `block_on`, so a lost
    //! wake-up shows up as a deadlock.
    use super::*;
    use crate::index_stack::{PushRefused, NIL};
    use loom::future::block_on;
    use loom::sync::Arc;
    use loom::thread;

    struct Model {
        stack: IndexStack,
        links: Links,
        queue: WaiterQueue<u16>,
        /// Nodes a return found the stack closed for.
        evicted: Mutex<Vec<u16>>,
    }

    impl WaitHost<u16> for Model {
        fn queue(&self) -> &WaiterQueue<u16> {
            &self.queue
        }
        fn idle(&self) -> (&IndexStack, &Links) {
            (&self.stack, &self.links)
        }
        fn queued(&self, _rearm: bool) {}
        fn orphaned(&self, value: u16) {
            self.deliver(value);
        }
    }

    impl Model {
        fn new(nodes: usize) -> Arc<Self> {
            Arc::new(Self {
                stack: IndexStack::new(),
                links: Links::new(nodes),
                queue: WaiterQueue::new(),
                evicted: Mutex::new(Vec::new()),
            })
        }

        /// The return path, as `Shared::deliver`: to the longest waiter
        /// while the bit says someone waits, else push.
        fn deliver(&self, index: u16) {
            loop {
                if self.stack.has_waiters() && self.queue.offer(&self.stack, index).is_ok() {
                    return;
                }
                match self.stack.push(&self.links, index) {
                    Ok(()) => return,
                    Err(PushRefused::Closed) => return lock(&self.evicted).push(index),
                    Err(PushRefused::Waiters) => continue,
                }
            }
        }

        /// The checkout path: pop, else queue and wait.
        fn acquire(&self) -> Handed<u16> {
            match self.stack.pop(&self.links) {
                Popped::Node(i) => Handed::Node(i),
                Popped::Closed => Handed::Closed,
                Popped::Empty | Popped::Waiters => block_on(Waiter::new(self, None)),
            }
        }

        fn idle(&self) -> Vec<u16> {
            let mut out = vec![];
            let mut i = self.stack.take_all();
            while i != NIL {
                out.push(i);
                i = self.links.next(i);
            }
            out
        }
    }

    /// Polls `waiter` once; true if it is still waiting.
    fn poll_once<T, H: WaitHost<T>>(waiter: Pin<&mut Waiter<'_, T, H>>) -> bool {
        let mut waiter = waiter;
        block_on(std::future::poll_fn(|cx| {
            Poll::Ready(waiter.as_mut().poll(cx).is_pending())
        }))
    }

    fn got(h: Handed<u16>) -> u16 {
        match h {
            Handed::Value(i) | Handed::Node(i) => i,
            other => panic!("expected a node, got {other:?}"),
        }
    }

    /// A return racing a checkout that finds the stack empty: the checkout
    /// always ends up with the connection, popped or handed over; never
    /// queued while the connection sits idle (that would deadlock here).
    #[test]
    fn release_during_acquire() {
        loom::model(|| {
            let m = Model::new(1);
            let r = m.clone();
            let releaser = thread::spawn(move || r.deliver(0));
            assert_eq!(got(m.acquire()), 0);
            releaser.join().unwrap();
            assert!(m.idle().is_empty());
            assert_eq!(m.queue.waiting(), 0);
        });
    }

    /// A return racing a waiter that gives up ("poll once, then drop"): the
    /// connection ends up idle exactly once and nobody is left counted as
    /// waiting; later returns push again (the WAITERS bit was cleared).
    #[test]
    fn concurrent_cancel() {
        loom::model(|| {
            let m = Model::new(1);
            let r = m.clone();
            let mut waiter = Box::pin(Waiter::new(&*m, None));
            assert!(poll_once(waiter.as_mut()), "the stack starts empty");
            let releaser = thread::spawn(move || r.deliver(0));
            drop(waiter);
            releaser.join().unwrap();
            assert_eq!(m.idle(), [0]);
            assert_eq!(m.queue.waiting(), 0);
            m.stack.push(&m.links, 0).expect("WAITERS left set");
        });
    }

    /// Two queued waiters, the second giving up while a connection comes
    /// back: the first (longest) waiter is served, and nothing is lost.
    #[test]
    fn first_waiter_served_while_second_cancels() {
        loom::model(|| {
            let m = Model::new(1);
            let mut first = Box::pin(Waiter::new(&*m, None));
            let mut second = Box::pin(Waiter::new(&*m, None));
            assert!(poll_once(first.as_mut()));
            assert!(poll_once(second.as_mut()));
            let r = m.clone();
            let releaser = thread::spawn(move || r.deliver(0));
            drop(second);
            assert_eq!(
                got(block_on(first.as_mut())),
                0,
                "the longest waiter goes first"
            );
            releaser.join().unwrap();
            drop(first);
            assert!(m.idle().is_empty());
            assert_eq!(m.queue.waiting(), 0);
        });
    }

    /// Two returns racing two checkouts over two connections: each checkout
    /// gets exactly one connection and none is duplicated or lost.
    #[test]
    fn two_returns_two_checkouts() {
        loom::model(|| {
            let m = Model::new(2);
            let r = m.clone();
            let releaser = thread::spawn(move || {
                r.deliver(0);
                r.deliver(1);
            });
            let mut held = vec![got(m.acquire()), got(m.acquire())];
            releaser.join().unwrap();
            held.sort_unstable();
            assert_eq!(held, [0, 1]);
            assert!(m.idle().is_empty());
            assert_eq!(m.queue.waiting(), 0);
        });
    }

    /// The deadline sweeper racing a handoff to the same waiter: the waiter
    /// either gets the connection or times out, and in the second case the
    /// connection is idle; the count comes back to zero either way.
    #[test]
    fn sweep_races_handoff() {
        loom::model(|| {
            let m = Model::new(1);
            let due = Stamp::from_nanos(1);
            let mut waiter = Box::pin(Waiter::new(&*m, Some(due)));
            assert!(poll_once(waiter.as_mut()));
            let (r, s) = (m.clone(), m.clone());
            let releaser = thread::spawn(move || r.deliver(0));
            let sweeper = thread::spawn(move || s.queue.sweep(&s.stack, due));
            let outcome = block_on(waiter.as_mut());
            releaser.join().unwrap();
            assert_eq!(sweeper.join().unwrap(), None, "nothing left to sweep");
            match outcome {
                Handed::Value(0) => assert!(m.idle().is_empty()),
                Handed::TimedOut => {
                    assert_eq!(m.queue.waiting(), 1, "counted until dropped");
                    drop(waiter);
                    assert_eq!(m.idle(), [0]);
                }
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(m.queue.waiting(), 0);
        });
    }

    /// Closing the pool while a waiter queues and a connection comes back:
    /// the connection is handed over, or evicted by the closed stack, or
    /// idle when the close took the chain first; never lost or duplicated.
    #[test]
    fn close_races_return_and_waiter() {
        loom::model(|| {
            let m = Model::new(1);
            let mut waiter = Box::pin(Waiter::new(&*m, None));
            assert!(poll_once(waiter.as_mut()));
            let (r, c) = (m.clone(), m.clone());
            let releaser = thread::spawn(move || r.deliver(0));
            let closer = thread::spawn(move || {
                let mut chain = vec![];
                let mut i = c.stack.close();
                while i != NIL {
                    chain.push(i);
                    i = c.links.next(i);
                }
                c.queue.close_all(&c.stack);
                chain
            });
            let outcome = block_on(waiter.as_mut());
            releaser.join().unwrap();
            let mut seen = closer.join().unwrap();
            seen.extend(lock(&m.evicted).iter().copied());
            match outcome {
                Handed::Value(i) => seen.push(i),
                Handed::Closed => {}
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(seen, [0], "the connection is accounted for once");
            drop(waiter);
            assert_eq!(m.queue.waiting(), 0);
        });
    }
}
