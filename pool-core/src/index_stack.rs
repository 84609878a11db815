//! A lock-free LIFO stack of slot indices: the idle set and the free list.
//!
//! # Algorithm
//!
//! A Treiber stack (R. K. Treiber, *Systems Programming: Coping with
//! Parallelism*, IBM RJ 5118, 1986) over a fixed array of nodes addressed by
//! 16-bit index, with an ABA tag in the head word. Nodes are the pool's
//! slots, allocated once with the pool, so pushing and popping allocate
//! nothing and no memory is ever reclaimed while another thread may read it:
//! the only shared read of a node is its `next` link, itself an atomic.
//!
//! The whole state is one `AtomicU64`:
//!
//! ```text
//!  63                                18   17       16     15           0
//! +------------------------------------+--------+---------+-------------+
//! |  tag (46 bits, +1 on every change) | CLOSED | WAITERS | head index  |
//! +------------------------------------+--------+---------+-------------+
//! ```
//!
//! * `head index` is the top node, or `NIL` (`0xFFFF`) when empty.
//! * `tag` grows by one on every successful change, so a pop that read
//!   `(head = i, next = j)` cannot succeed after `i` was popped and pushed
//!   back over a different `j` in between (the ABA problem): the word it
//!   compares against no longer matches. 46 bits wrap after 7·10¹³ changes,
//!   far beyond what one preempted thread can sleep through.
//! * `WAITERS` (idle stack only) is set while callers queue for a connection.
//!   A push refuses while it is set, so a returned connection goes to the
//!   waiter queue instead of the stack, and the bit can only be set while
//!   the stack is empty. Hence the invariant **`WAITERS` ⇒ empty**: no
//!   connection ever sits idle while someone waits for one, and because the
//!   bit and the head are one word there is no window in which a push and a
//!   waiter's registration miss each other.
//! * `CLOSED` makes every later push and pop fail; it is set together with
//!   taking the whole chain, so closing owns every idle node at once.
//!
//! # Ownership
//!
//! A node index is owned by exactly one party at a time: a stack, or the
//! thread that popped it. Only the owner reads or writes the node's payload
//! (kept by the caller, see `slots.rs`). Ownership passes through the head
//! word: the Release CAS of `push` publishes the payload written before it,
//! and the Acquire CAS (or load) of `pop` and `take_all` makes it visible to
//! the new owner.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU16, AtomicU64, Ordering};

/// The index that means "no node".
pub(crate) const NIL: u16 = u16::MAX;

const INDEX_MASK: u64 = 0xFFFF;
/// Set while callers wait (idle stack only).
pub(crate) const WAITERS: u64 = 1 << 16;
/// Set once the pool is closed.
pub(crate) const CLOSED: u64 = 1 << 17;
const TAG_SHIFT: u32 = 18;
const TAG_ONE: u64 = 1 << TAG_SHIFT;

fn index_of(word: u64) -> u16 {
    (word & INDEX_MASK) as u16
}

/// `word` with its head replaced by `index` and its tag advanced.
fn next_word(word: u64, index: u16) -> u64 {
    (word & !INDEX_MASK).wrapping_add(TAG_ONE) | u64::from(index)
}

/// Why a push did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushRefused {
    /// Callers are waiting: hand the node to them instead.
    Waiters,
    /// The stack is closed.
    Closed,
}

/// What a pop found: a node index here, an owned connection when the
/// slots wrap it (`Slots::pop_idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Popped<T = u16> {
    /// The caller now owns this node.
    Node(T),
    /// Nothing to pop (and no one waiting).
    Empty,
    /// Nothing to pop and callers are already queued: queue behind them.
    Waiters,
    /// The stack is closed.
    Closed,
}

/// The links of every node: `links[i]` is the node below `i` while `i` is on
/// a stack. Shared by the idle stack and the free list, since a node is on
/// at most one of them.
#[derive(Debug)]
pub(crate) struct Links(Box<[AtomicU16]>);

impl Links {
    pub(crate) fn new(len: usize) -> Self {
        debug_assert!(
            len <= usize::from(NIL),
            "indices 0..len must stay below NIL ({NIL})"
        );
        Self((0..len).map(|_| AtomicU16::new(NIL)).collect())
    }

    fn get(&self, index: u16) -> &AtomicU16 {
        debug_assert!(
            usize::from(index) < self.0.len(),
            "node {index} out of range"
        );
        &self.0[usize::from(index)]
    }

    /// The node below `index`. Only meaningful to the owner of a chain taken
    /// with [`IndexStack::take_all`] or [`IndexStack::close`].
    pub(crate) fn next(&self, index: u16) -> u16 {
        self.get(index).load(Ordering::Relaxed)
    }
}

/// A Treiber stack of node indices; see the module docs.
#[derive(Debug)]
pub(crate) struct IndexStack {
    /// The contended word; padded so it does not share a cache line with
    /// the pool's other hot atomics.
    word: CachePadded<AtomicU64>,
}

impl IndexStack {
    pub(crate) fn new() -> Self {
        Self {
            word: CachePadded::new(AtomicU64::new(u64::from(NIL))),
        }
    }

    /// Pushes `index`, which the caller owns and whose payload it has
    /// written. On success the stack owns it.
    pub(crate) fn push(&self, links: &Links, index: u16) -> Result<(), PushRefused> {
        debug_assert_ne!(index, NIL);
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur & CLOSED != 0 {
                return Err(PushRefused::Closed);
            }
            if cur & WAITERS != 0 {
                return Err(PushRefused::Waiters);
            }
            // Relaxed: the link is published by the Release CAS below.
            links.get(index).store(index_of(cur), Ordering::Relaxed);
            // Release: pairs with the Acquire in `pop`/`take_all`/`close`, so
            // the new owner sees the payload and the link written above.
            match self.word.compare_exchange_weak(
                cur,
                next_word(cur, index),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Pops the top node. Refuses (with `Waiters`) when callers are queued,
    /// so a newcomer never overtakes them.
    pub(crate) fn pop(&self, links: &Links) -> Popped {
        // Acquire: pairs with the Release CAS in `push` that made this head.
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            if cur & CLOSED != 0 {
                return Popped::Closed;
            }
            let top = index_of(cur);
            if top == NIL {
                return if cur & WAITERS != 0 {
                    Popped::Waiters
                } else {
                    Popped::Empty
                };
            }
            // Relaxed: written before the Release push we acquired above. If
            // `top` has since been popped and pushed again this value may be
            // stale, but then the tag has moved on and the CAS below fails.
            let below = links.get(top).load(Ordering::Relaxed);
            // Acquire on success: pairs with the Release CAS in `push` that
            // put `top` there (the payload of `top` becomes ours). Acquire on
            // failure: pairs with the Release CAS of the push that made the
            // new head, whose link we read next time round.
            match self.word.compare_exchange_weak(
                cur,
                next_word(cur, below),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Popped::Node(top),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Takes the whole chain, leaving the stack empty; the caller owns every
    /// node on it and walks it with [`Links::next`]. Returns `NIL` when empty.
    pub(crate) fn take_all(&self) -> u16 {
        self.swap_head(0)
    }

    /// Closes the stack and takes the whole chain, as [`take_all`](Self::take_all).
    pub(crate) fn close(&self) -> u16 {
        self.swap_head(CLOSED)
    }

    fn swap_head(&self, set: u64) -> u16 {
        // Relaxed: only the expected value of the CAS, which acquires.
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            // Acquire on success: pairs with the Release CAS of every push on
            // the chain (each later RMW on this word continues the release
            // sequence), so the payload of every node taken is visible.
            // Nothing is published here, and a failure only retries.
            match self.word.compare_exchange_weak(
                cur,
                next_word(cur, NIL) | set,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return index_of(cur),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Marks callers as waiting, which only succeeds on an empty stack.
    /// `Err(Popped::Node(i))` hands over a node found on top instead (the
    /// caller now owns it); `Err(Popped::Closed)` reports a closed stack.
    /// Called with the waiter queue locked.
    pub(crate) fn set_waiters(&self, links: &Links) -> Result<(), Popped> {
        // Relaxed: a node found here is taken by `pop`, which acquires it.
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur & CLOSED != 0 {
                return Err(Popped::Closed);
            }
            if cur & WAITERS != 0 {
                return Ok(());
            }
            if index_of(cur) != NIL {
                match self.pop(links) {
                    Popped::Node(i) => return Err(Popped::Node(i)),
                    Popped::Closed => return Err(Popped::Closed),
                    Popped::Empty | Popped::Waiters => {
                        cur = self.word.load(Ordering::Relaxed);
                        continue;
                    }
                }
            }
            // Relaxed both ways: an empty stack carries no payload to
            // publish or take, and a failure goes round again (a node
            // found then is acquired by `pop`).
            match self.word.compare_exchange_weak(
                cur,
                cur.wrapping_add(TAG_ONE) | WAITERS,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Clears `WAITERS` once the queue is empty. Called with the waiter queue
    /// locked, so no one sets it again meanwhile.
    pub(crate) fn clear_waiters(&self) {
        // Relaxed: the bit guards no data; pushes that saw it set took the
        // queue's lock, which orders them after this.
        self.word.fetch_and(!WAITERS, Ordering::Relaxed);
    }

    /// Whether callers are queued, as a hint: the bit may change right
    /// after. A return that sees it goes to the queue first, which decides
    /// under its lock.
    #[inline]
    pub(crate) fn has_waiters(&self) -> bool {
        self.word.load(Ordering::Relaxed) & WAITERS != 0
    }

    /// The head word's flag bits (`WAITERS`, `CLOSED`) now. Relaxed: the
    /// caller orders the load (see `Slots::park_held`).
    #[inline]
    pub(crate) fn flags(&self) -> u64 {
        self.word.load(Ordering::Relaxed) & (WAITERS | CLOSED)
    }

    /// Whether the stack is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.word.load(Ordering::Relaxed) & CLOSED != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn lifo_order() {
        let links = Links::new(4);
        let s = IndexStack::new();
        for i in 0..4 {
            s.push(&links, i).unwrap();
        }
        for i in (0..4).rev() {
            assert_eq!(s.pop(&links), Popped::Node(i));
        }
        assert_eq!(s.pop(&links), Popped::Empty);
    }

    #[test]
    fn waiters_bit_only_on_empty_and_blocks_push() {
        let links = Links::new(2);
        let s = IndexStack::new();
        s.push(&links, 1).unwrap();
        assert_eq!(s.set_waiters(&links), Err(Popped::Node(1)));
        assert_eq!(s.set_waiters(&links), Ok(()));
        assert_eq!(s.push(&links, 0), Err(PushRefused::Waiters));
        assert_eq!(s.pop(&links), Popped::Waiters);
        s.clear_waiters();
        s.push(&links, 0).unwrap();
        assert_eq!(s.pop(&links), Popped::Node(0));
    }

    #[test]
    fn take_all_and_close_hand_over_the_chain() {
        let links = Links::new(3);
        let s = IndexStack::new();
        for i in 0..3 {
            s.push(&links, i).unwrap();
        }
        let mut chain = vec![];
        let mut i = s.take_all();
        while i != NIL {
            chain.push(i);
            i = links.next(i);
        }
        assert_eq!(chain, [2, 1, 0]);
        s.push(&links, 0).unwrap();
        assert_eq!(s.close(), 0);
        assert!(s.is_closed());
        assert_eq!(s.push(&links, 1), Err(PushRefused::Closed));
        assert_eq!(s.pop(&links), Popped::Closed);
        assert_eq!(s.set_waiters(&links), Err(Popped::Closed));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Nodes with a payload each, guarded only by the stack's ownership rule.
    struct Nodes {
        links: Links,
        stack: IndexStack,
        payload: Vec<UnsafeCell<u32>>,
    }

    impl Nodes {
        fn new(n: u16) -> Arc<Self> {
            let nodes = Arc::new(Self {
                links: Links::new(n.into()),
                stack: IndexStack::new(),
                payload: (0..n).map(|_| UnsafeCell::new(0)).collect(),
            });
            for i in 0..n {
                nodes.stack.push(&nodes.links, i).unwrap();
            }
            nodes
        }

        /// Pops a node, bumps its payload (loom flags any concurrent access),
        /// pushes it back.
        fn cycle(&self) -> bool {
            match self.stack.pop(&self.links) {
                Popped::Node(i) => {
                    // SAFETY: the pop made this thread the node's only owner.
                    self.payload[usize::from(i)].with_mut(|p| unsafe { *p += 1 });
                    self.stack.push(&self.links, i).unwrap();
                    true
                }
                _ => false,
            }
        }
    }

    /// Two threads pop and push concurrently; every node is owned by one
    /// thread at a time and none is lost or duplicated.
    #[test]
    fn concurrent_push_pop() {
        loom::model(|| {
            let nodes = Nodes::new(2);
            let other = nodes.clone();
            let t = thread::spawn(move || other.cycle());
            let mine = nodes.cycle();
            let theirs = t.join().unwrap();
            let mut seen = vec![];
            let mut i = nodes.stack.take_all();
            while i != NIL {
                seen.push(i);
                i = nodes.links.next(i);
            }
            seen.sort_unstable();
            assert_eq!(seen, [0, 1]);
            let total: u32 = nodes
                .payload
                .iter()
                // SAFETY: all threads joined; this thread owns every node.
                .map(|p| p.with_mut(|p| unsafe { *p }))
                .sum();
            assert_eq!(total, u32::from(mine) + u32::from(theirs));
        });
    }

    /// The ABA scenario: one thread reads head A (next B) and stalls while
    /// the other pops A, pops B and pushes A back. The stalled pop must not
    /// install B (now owned by the other thread) as the head.
    #[test]
    fn aba_is_caught_by_the_tag() {
        loom::model(|| {
            let nodes = Nodes::new(3);
            let other = nodes.clone();
            let t = thread::spawn(move || {
                let a = other.stack.pop(&other.links);
                let b = other.stack.pop(&other.links);
                if let Popped::Node(a) = a {
                    other.stack.push(&other.links, a).unwrap();
                }
                b
            });
            let mine = nodes.stack.pop(&nodes.links);
            let held_by_other = t.join().unwrap();
            let mut on_stack = vec![];
            let mut i = nodes.stack.take_all();
            while i != NIL {
                on_stack.push(i);
                i = nodes.links.next(i);
            }
            // Every node is in exactly one place.
            let mut all = on_stack.clone();
            for p in [mine, held_by_other] {
                if let Popped::Node(i) = p {
                    assert!(!all.contains(&i), "node {i} owned twice");
                    all.push(i);
                }
            }
            all.sort_unstable();
            assert_eq!(all, [0, 1, 2]);
        });
    }

    /// Closing while a connection comes back: the returning thread either
    /// lands its push before the close (and the close takes the node with
    /// the chain) or is refused with `Closed` (and closes it itself). The
    /// node is never left on a closed stack, and never lost.
    #[test]
    fn concurrent_close() {
        loom::model(|| {
            // Node 0 starts on the stack; node 1 is being returned.
            let nodes = Arc::new(Nodes {
                links: Links::new(2),
                stack: IndexStack::new(),
                payload: vec![UnsafeCell::new(0), UnsafeCell::new(0)],
            });
            nodes.stack.push(&nodes.links, 0).unwrap();
            let other = nodes.clone();
            let t = thread::spawn(move || other.stack.push(&other.links, 1));
            let mut closed_with = vec![];
            let mut i = nodes.stack.close();
            while i != NIL {
                closed_with.push(i);
                i = nodes.links.next(i);
            }
            let pushed = t.join().unwrap();
            closed_with.sort_unstable();
            match pushed {
                Ok(()) => assert_eq!(closed_with, [0, 1]),
                Err(PushRefused::Closed) => assert_eq!(closed_with, [0]),
                Err(other) => panic!("unexpected refusal {other:?}"),
            }
            assert_eq!(
                nodes.stack.take_all(),
                NIL,
                "nothing left on a closed stack"
            );
            assert_eq!(nodes.stack.pop(&nodes.links), Popped::Closed);
        });
    }

    /// A push racing with a waiter's registration: either the push lands
    /// and the registration gets the node, or the registration lands and the
    /// push is refused with `Waiters`. Never both lost.
    #[test]
    fn push_vs_set_waiters() {
        loom::model(|| {
            let nodes = Arc::new(Nodes {
                links: Links::new(1),
                stack: IndexStack::new(),
                payload: vec![UnsafeCell::new(0)],
            });
            let other = nodes.clone();
            let t = thread::spawn(move || other.stack.push(&other.links, 0));
            let reg = nodes.stack.set_waiters(&nodes.links);
            let pushed = t.join().unwrap();
            match (reg, pushed) {
                (Err(Popped::Node(0)), Ok(())) => {}
                (Ok(()), Err(PushRefused::Waiters)) => {}
                (Ok(()), Ok(())) => {
                    panic!("waiter registered while a node sits idle")
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        });
    }
}
