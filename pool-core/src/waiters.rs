//! The queue of callers waiting for a connection: first come, first served,
//! woken by notification, never by polling.
//!
//! A waiter is a [`Cell`] the returning side fills directly (a *handoff*):
//! the connection goes from the releasing thread to the longest waiter
//! without touching the idle stack, so a newcomer cannot snatch it. The
//! queue's mutex is only taken on the slow paths (someone waits, someone
//! gives up); a return with no one waiting never sees it, because the idle
//! stack's `WAITERS` bit sends returns here only while the queue is in use
//! (see `index_stack.rs`). Lock order: queue, then cell.
//!
//! # Deadlines
//!
//! A waiter arms no timer of its own. Its deadline sits in its cell, and one
//! sweeper task per pool sleeps until the earliest deadline in the queue,
//! marks the cells that are due as timed out and wakes them. Registering
//! re-arms the sweeper only when its deadline is earlier than the armed one,
//! which with one `acquire_timeout` for every caller is almost never: a
//! wait that a handoff ends in microseconds no longer inserts into and
//! removes from tokio's timer wheel.
//!
//! # Cancel safety
//!
//! A waiter that gives up (dropped future) calls [`WaiterQueue::finish`]:
//! under its cell's lock it either finds a connection already handed to it,
//! which it returns to the caller to pass on, or marks the cell gone so that
//! no one hands it anything later. Gone cells are skipped by the returning
//! side and swept from the queue once they are half of it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use crate::index_stack::IndexStack;
use crate::sync::{lock, Arc, AtomicU32, Mutex, Ordering};

enum CellState<T> {
    /// Queued; the waker (if polled yet) wakes the waiting task.
    Waiting(Option<Waker>),
    /// A connection was handed over and not yet taken.
    Ready(T),
    /// The pool closed while this waiter was queued.
    PoolClosed,
    /// The sweeper found the waiter past its deadline.
    TimedOut,
    /// Taken, or the waiter gave up.
    Gone,
}

/// One waiting caller.
pub(crate) struct Cell<T> {
    state: Mutex<CellState<T>>,
    /// When the sweeper times this waiter out; `None`: never.
    deadline: Option<Instant>,
}

impl<T> std::fmt::Debug for Cell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cell")
    }
}

impl<T> Cell<T> {
    fn new(deadline: Option<Instant>) -> Self {
        Self {
            state: Mutex::new(CellState::Waiting(None)),
            deadline,
        }
    }

    /// Times the waiter out if it is still waiting and due; says whether it
    /// is still waiting afterwards.
    fn time_out_if_due(&self, now: Instant) -> bool {
        let waker = {
            let mut state = lock(&self.state);
            match &mut *state {
                CellState::Waiting(waker) if self.deadline.is_some_and(|d| d <= now) => {
                    let waker = waker.take();
                    *state = CellState::TimedOut;
                    waker
                }
                CellState::Waiting(_) => return true,
                _ => return false,
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
        false
    }

    /// Hands `value` to this waiter, or gives it back if the waiter is gone.
    fn offer(&self, value: T) -> Result<(), T> {
        let waker = {
            let mut state = lock(&self.state);
            match &mut *state {
                CellState::Waiting(waker) => {
                    let waker = waker.take();
                    *state = CellState::Ready(value);
                    waker
                }
                _ => return Err(value),
            }
        };
        // Woken outside the lock so the waiter does not block on it.
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    fn is_gone(&self) -> bool {
        matches!(*lock(&self.state), CellState::Gone)
    }

    /// Polls for a handoff.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Handed<T>> {
        let mut state = lock(&self.state);
        match std::mem::replace(&mut *state, CellState::Gone) {
            CellState::Ready(v) => Poll::Ready(Handed::Value(v)),
            CellState::PoolClosed => Poll::Ready(Handed::Closed),
            CellState::TimedOut => {
                // Left for `finish` to count out, so a timeout error built
                // before it still counts this caller as waiting.
                *state = CellState::TimedOut;
                Poll::Ready(Handed::TimedOut)
            }
            CellState::Waiting(waker) => {
                let waker = match waker {
                    Some(w) if w.will_wake(cx.waker()) => w,
                    _ => cx.waker().clone(),
                };
                *state = CellState::Waiting(Some(waker));
                Poll::Pending
            }
            CellState::Gone => Poll::Ready(Handed::Closed),
        }
    }

    /// Takes a handoff if one is there, without waiting (loom models).
    #[cfg(loom)]
    pub(crate) fn try_take(&self) -> Option<T> {
        let mut state = lock(&self.state);
        match std::mem::replace(&mut *state, CellState::Gone) {
            CellState::Ready(v) => Some(v),
            other => {
                *state = other;
                None
            }
        }
    }
}

/// How a wait ended.
#[derive(Debug)]
pub(crate) enum Handed<T> {
    Value(T),
    Closed,
    TimedOut,
}

/// A future resolving to how the wait ended.
pub(crate) struct Wait<'a, T> {
    cell: &'a Cell<T>,
}

impl<T> Future for Wait<'_, T> {
    type Output = Handed<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Handed<T>> {
        self.cell.poll_take(cx)
    }
}

struct Inner<T> {
    cells: VecDeque<Arc<Cell<T>>>,
    /// Cells in `cells` whose waiter gave up.
    gone: usize,
    /// The deadline the sweeper sleeps until, if any.
    armed: Option<Instant>,
}

/// The FIFO queue of waiting callers.
pub(crate) struct WaiterQueue<T> {
    inner: Mutex<Inner<T>>,
    /// Callers queued and not yet served, closed or gone; read without the
    /// lock for metrics and connection demand. Decremented by whoever ends
    /// the wait (the handoff, the close, or the waiter giving up), under the
    /// cell's lock, so each waiter is counted out exactly once.
    waiting: AtomicU32,
}

impl<T> std::fmt::Debug for WaiterQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaiterQueue")
            .field("waiting", &self.waiting())
            .finish()
    }
}

/// What registering found.
pub(crate) enum Registered<T> {
    /// Queued: wait on this cell. `true` when the sweeper must be told of
    /// an earlier deadline.
    Queued(Arc<Cell<T>>, bool),
    /// A node was on the idle stack after all; the caller owns it.
    Node(u16),
    /// The pool is closed.
    Closed,
}

impl<T> WaiterQueue<T> {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new(Inner {
                cells: VecDeque::new(),
                gone: 0,
                armed: None,
            }),
            waiting: AtomicU32::new(0),
        }
    }

    /// Callers waiting now.
    pub(crate) fn waiting(&self) -> u32 {
        // SeqCst: see `register`.
        self.waiting.load(Ordering::SeqCst)
    }

    /// Queues a caller behind the others, unless a node can be popped from
    /// `stack` (then the caller gets it) or the stack is closed.
    pub(crate) fn register(
        &self,
        stack: &IndexStack,
        links: &crate::index_stack::Links,
        deadline: Option<Instant>,
    ) -> Registered<T> {
        let mut inner = lock(&self.inner);
        match stack.set_waiters(links) {
            Ok(()) => {}
            Err(crate::index_stack::Popped::Node(i)) => return Registered::Node(i),
            Err(_) => return Registered::Closed,
        }
        let cell = Arc::new(Cell::new(deadline));
        inner.cells.push_back(cell.clone());
        let rearm = match (deadline, inner.armed) {
            (Some(d), Some(armed)) => d < armed,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if rearm {
            inner.armed = deadline;
        }
        // SeqCst: pairs with the SeqCst decrement of the connector count and
        // the load below it in `connector.rs`, so either this waiter sees a
        // connector leaving or that connector sees this waiter.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Registered::Queued(cell, rearm)
    }

    /// Hands `value` to the longest waiter. `Err(value)` when no one is left
    /// waiting: the `WAITERS` bit is then cleared, so the caller can push
    /// the value on the idle stack.
    pub(crate) fn offer(&self, stack: &IndexStack, mut value: T) -> Result<(), T> {
        let mut inner = lock(&self.inner);
        while let Some(cell) = inner.cells.pop_front() {
            match cell.offer(value) {
                Ok(()) => {
                    // Served: no longer counted as waiting, so a connector
                    // deciding whether to open another sees it at once.
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    if inner.cells.is_empty() {
                        stack.clear_waiters();
                        inner.gone = 0;
                    }
                    return Ok(());
                }
                Err(v) => {
                    inner.gone = inner.gone.saturating_sub(1);
                    value = v;
                }
            }
        }
        inner.gone = 0;
        stack.clear_waiters();
        Err(value)
    }

    /// Ends a wait that was registered: counts the waiter out and, if it gave
    /// up before taking its handoff, returns what was handed to it (the
    /// caller passes it on) and sweeps gone cells.
    pub(crate) fn finish(&self, cell: &Arc<Cell<T>>, stack: &IndexStack) -> Option<T> {
        let still_queued = {
            let mut state = lock(&cell.state);
            match std::mem::replace(&mut *state, CellState::Gone) {
                // Counted out by whoever handed it over.
                CellState::Ready(v) => return Some(v),
                CellState::Waiting(_) => {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    true
                }
                // Timed out by the sweeper, which took it off the queue.
                CellState::TimedOut => {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    false
                }
                // Already taken or closed: the cell left the queue.
                CellState::PoolClosed | CellState::Gone => false,
            }
        };
        if still_queued {
            let mut inner = lock(&self.inner);
            inner.gone += 1;
            if inner.gone * 2 >= inner.cells.len() {
                inner.cells.retain(|c| !c.is_gone());
                inner.gone = 0;
                if inner.cells.is_empty() {
                    stack.clear_waiters();
                }
            }
        }
        None
    }

    /// Fails every queued waiter with "closed". The stack must already be
    /// closed so no one registers afterwards.
    pub(crate) fn close_all(&self) {
        let cells = std::mem::take(&mut lock(&self.inner).cells);
        for cell in cells {
            let waker = {
                let mut state = lock(&cell.state);
                match std::mem::replace(&mut *state, CellState::PoolClosed) {
                    CellState::Waiting(w) => {
                        self.waiting.fetch_sub(1, Ordering::SeqCst);
                        w
                    }
                    other => {
                        *state = other;
                        None
                    }
                }
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }

    /// Times out every waiter past its deadline, takes them (and gone
    /// cells) off the queue, and returns the next deadline to sleep until.
    pub(crate) fn sweep(&self, stack: &IndexStack, now: Instant) -> Option<Instant> {
        let mut inner = lock(&self.inner);
        inner.cells.retain(|c| c.time_out_if_due(now));
        inner.gone = 0;
        if inner.cells.is_empty() {
            stack.clear_waiters();
        }
        inner.armed = inner.cells.iter().filter_map(|c| c.deadline).min();
        inner.armed
    }

    pub(crate) fn wait<'a>(&self, cell: &'a Cell<T>) -> Wait<'a, T> {
        Wait { cell }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Models of the handoff protocol: the real `IndexStack` and
    //! `WaiterQueue`, driven the way `Shared::deliver` (return) and
    //! `Shared::acquire` (checkout) drive them, with a node index standing in
    //! for the connection.
    use super::*;
    use crate::index_stack::{Links, Popped, PushRefused, NIL};
    use loom::thread;

    struct Model {
        stack: IndexStack,
        links: Links,
        queue: WaiterQueue<u16>,
    }

    enum Got {
        Now(u16),
        Queued(Arc<Cell<u16>>),
    }

    impl Model {
        fn new(nodes: usize) -> Arc<Self> {
            Arc::new(Self {
                stack: IndexStack::new(),
                links: Links::new(nodes),
                queue: WaiterQueue::new(),
            })
        }

        /// The return path: push, or hand to the longest waiter.
        fn deliver(&self, index: u16) {
            loop {
                match self.stack.push(&self.links, index) {
                    Ok(()) => return,
                    Err(PushRefused::Closed) => panic!("never closed here"),
                    Err(PushRefused::Waiters) => match self.queue.offer(&self.stack, index) {
                        Ok(()) => return,
                        Err(_) => continue,
                    },
                }
            }
        }

        /// The checkout path: pop, else queue.
        fn acquire(&self) -> Got {
            match self.stack.pop(&self.links) {
                Popped::Node(i) => Got::Now(i),
                Popped::Empty | Popped::Waiters => {
                    match self.queue.register(&self.stack, &self.links, None) {
                        Registered::Queued(cell, _) => Got::Queued(cell),
                        Registered::Node(i) => Got::Now(i),
                        Registered::Closed => panic!("never closed here"),
                    }
                }
                Popped::Closed => panic!("never closed here"),
            }
        }

        /// A waiter giving up; whatever it was handed goes back.
        fn cancel(&self, cell: &Arc<Cell<u16>>) {
            if let Some(i) = self.queue.finish(cell, &self.stack) {
                self.deliver(i);
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

    /// A return racing a checkout that finds the stack empty: the checkout
    /// always ends up with the connection, either popped or handed over;
    /// never queued while the connection sits idle (a lost wake-up).
    #[test]
    fn release_during_acquire() {
        loom::model(|| {
            let m = Model::new(1);
            let r = m.clone();
            let releaser = thread::spawn(move || r.deliver(0));
            let got = m.acquire();
            releaser.join().unwrap();
            match got {
                Got::Now(i) => assert_eq!(i, 0),
                Got::Queued(cell) => {
                    assert_eq!(cell.try_take(), Some(0), "queued while the node went idle");
                    m.queue.finish(&cell, &m.stack);
                }
            }
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
            let Got::Queued(cell) = m.acquire() else {
                panic!("the stack starts empty")
            };
            let r = m.clone();
            let releaser = thread::spawn(move || r.deliver(0));
            m.cancel(&cell);
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
            let (Got::Queued(first), Got::Queued(second)) = (m.acquire(), m.acquire()) else {
                panic!("the stack starts empty")
            };
            let r = m.clone();
            let releaser = thread::spawn(move || r.deliver(0));
            m.cancel(&second);
            releaser.join().unwrap();
            assert_eq!(first.try_take(), Some(0), "the longest waiter goes first");
            m.queue.finish(&first, &m.stack);
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
            let a = m.acquire();
            releaser.join().unwrap();
            let b = m.acquire();
            let mut held = vec![];
            for g in [a, b] {
                match g {
                    Got::Now(i) => held.push(i),
                    Got::Queued(cell) => {
                        if let Some(i) = cell.try_take() {
                            held.push(i);
                        }
                        m.cancel(&cell);
                    }
                }
            }
            let mut all = held.clone();
            all.extend(m.idle());
            all.sort_unstable();
            assert_eq!(all, [0, 1], "held {held:?}");
            assert_eq!(held.len(), 2, "both checkouts were served");
        });
    }
}
