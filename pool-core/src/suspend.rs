//! Pool suspension (HikariCP's `suspendPool` / `resumePool`), for
//! maintenance or a planned failover.
//!
//! While suspended, nothing is handed out and nothing is opened: `get()`
//! skips the idle stack and waits (within its time limit), `try_get()`
//! returns `None`, connectors and the housekeeper open nothing and the
//! housekeeper retires nothing. Connections in use keep working and come
//! back as usual: onto the idle stack, or, while callers wait, to a waiter
//! that sets it aside in the *shelved* set here (marked idle) and waits
//! again, so the shelved set and the stack together are the idle set.
//! `resume()` delivers the shelved connections to the waiters (the longest
//! first) or the stack, and asks for the connections the waiters still
//! need. `close()` closes the shelved ones with the rest.
//!
//! The flag is read once per checkout on the fast path (one Relaxed load of
//! a line that is only written by `suspend` and `resume`). Shelving and
//! resuming take the set's lock, and `resume` clears the flag under it, so
//! a connection shelved concurrently with `resume` is delivered, never
//! stranded.
//!
//! This file is the state and its rules, over any item (`T`, the engine's
//! owned slots); the engine decides what a shelved item means
//! (`engine/lifecycle.rs`).

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use crate::sync::lock_std as lock;
use crate::sync::Ordering;

/// The suspension flag and the connections set aside while suspended.
pub(crate) struct Suspension<T> {
    /// `std`, not the loom shim: read on the fast path only to skip it;
    /// written under `shelved`'s lock.
    suspended: AtomicBool,
    shelved: Mutex<Vec<T>>,
}

impl<T> std::fmt::Debug for Suspension<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Suspension")
            .field("suspended", &self.suspended.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What [`Suspension::shelve`] did with an item.
#[derive(Debug)]
pub(crate) enum Shelved<T> {
    /// Not suspended: the item is the caller's to use.
    No(T),
    /// Suspended: the item is shelved until `resume`.
    Yes,
    /// Suspended, and `keep` refused it (the pool closed): the caller's
    /// to close.
    Refused(T),
}

impl<T> Suspension<T> {
    pub(crate) fn new() -> Self {
        Self {
            suspended: AtomicBool::new(false),
            shelved: Mutex::new(Vec::new()),
        }
    }

    /// Whether the pool is suspended.
    #[inline]
    pub(crate) fn is_suspended(&self) -> bool {
        // Relaxed: a hint for the fast path; the decision that matters
        // (shelve or hand out) is taken again under the lock.
        self.suspended.load(Ordering::Relaxed)
    }

    /// Sets the flag, under the set's lock (see the module docs).
    pub(crate) fn suspend(&self) {
        let _shelved = lock(&self.shelved);
        self.suspended.store(true, Ordering::Relaxed);
    }

    /// Clears the flag under the set's lock and returns what was shelved:
    /// an item shelved concurrently is either in the result or sees the
    /// flag cleared and stays with its caller.
    pub(crate) fn resume(&self) -> Vec<T> {
        let mut shelved = lock(&self.shelved);
        self.suspended.store(false, Ordering::Relaxed);
        std::mem::take(&mut *shelved)
    }

    /// Shelves `item` while suspended, deciding under the set's lock;
    /// `keep` (run under it, when suspended) may refuse it, and
    /// `on_shelve` marks it before it joins the set.
    pub(crate) fn shelve(
        &self,
        item: T,
        keep: impl FnOnce() -> bool,
        on_shelve: impl FnOnce(&T),
    ) -> Shelved<T> {
        if !self.is_suspended() {
            return Shelved::No(item);
        }
        let mut shelved = lock(&self.shelved);
        if !self.suspended.load(Ordering::Relaxed) {
            return Shelved::No(item);
        }
        if !keep() {
            return Shelved::Refused(item);
        }
        on_shelve(&item);
        shelved.push(item);
        Shelved::Yes
    }

    /// Everything shelved, taken out (the pool is closing).
    pub(crate) fn take_all(&self) -> Vec<T> {
        std::mem::take(&mut *lock(&self.shelved))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn shelves_only_while_suspended_and_resume_returns_in_order() {
        let s = Suspension::new();
        assert!(matches!(s.shelve(1, || true, |_| {}), Shelved::No(1)));
        s.suspend();
        assert!(s.is_suspended());
        let mut marked = Vec::new();
        assert!(matches!(
            s.shelve(2, || true, |i| marked.push(*i)),
            Shelved::Yes
        ));
        assert!(matches!(s.shelve(3, || true, |_| {}), Shelved::Yes));
        assert!(matches!(s.shelve(4, || false, |_| {}), Shelved::Refused(4)));
        assert_eq!(marked, [2]);
        assert_eq!(s.resume(), [2, 3]);
        assert!(!s.is_suspended());
        assert!(s.resume().is_empty());
    }

    #[test]
    fn take_all_empties_the_set_and_keeps_the_flag() {
        let s = Suspension::new();
        s.suspend();
        let _ = s.shelve("a", || true, |_| {});
        assert_eq!(s.take_all(), ["a"]);
        assert!(s.take_all().is_empty());
        assert!(s.is_suspended());
    }
}
