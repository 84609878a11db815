//! An intrusive doubly linked list: the nodes live inside their owners (the
//! waiter queue's nodes live in the `get()` futures), so linking allocates
//! nothing, and a node can unlink itself from the middle in O(1).
//!
//! The list holds raw pointers and knows nothing of locking: its user keeps
//! it behind a lock and upholds the rules written on each `unsafe` method
//! (a linked node is pinned and valid until unlinked; only the lock holder
//! touches the links). The node type says where its links are by
//! implementing [`Linked`].

use std::ptr;

use crate::sync::UnsafeCell;

/// A node's links: its neighbours, null at the ends. Touched only by the
/// [`List`] the node is linked in, under its user's lock.
#[derive(Debug)]
pub(crate) struct Pointers<T> {
    prev: UnsafeCell<*const T>,
    next: UnsafeCell<*const T>,
}

impl<T> Pointers<T> {
    pub(crate) fn new() -> Self {
        Self {
            prev: UnsafeCell::new(ptr::null()),
            next: UnsafeCell::new(ptr::null()),
        }
    }
}

/// A type whose values can be linked in a [`List`].
///
/// # Safety
///
/// `pointers` returns the same `Pointers` of `self` every time, and that
/// field is used by no one but the list.
pub(crate) unsafe trait Linked: Sized {
    fn pointers(&self) -> &Pointers<Self>;
}

/// The list: the first and last node (both null when empty).
#[derive(Debug)]
pub(crate) struct List<T: Linked> {
    head: *const T,
    tail: *const T,
}

impl<T: Linked> List<T> {
    pub(crate) const fn new() -> Self {
        Self {
            head: ptr::null(),
            tail: ptr::null(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// The first node, or null.
    pub(crate) fn head(&self) -> *const T {
        self.head
    }

    /// Links `node` at the tail.
    ///
    /// # Safety
    ///
    /// `node` is not linked, does not move and stays valid until it is
    /// unlinked; no other thread touches the list or its nodes' links
    /// meanwhile (the caller holds the user's lock).
    pub(crate) unsafe fn push_back(&mut self, node: &T) {
        let tail = self.tail;
        let links = node.pointers();
        // SAFETY: `node` is not linked, so no one else reaches its links.
        links.prev.with_mut(|p| unsafe { *p = tail });
        // SAFETY: as above.
        links.next.with_mut(|p| unsafe { *p = ptr::null() });
        if tail.is_null() {
            self.head = node;
        } else {
            // SAFETY: linked nodes are valid while linked, and their links
            // are ours (the caller's lock).
            unsafe { (*tail).pointers().next.with_mut(|p| *p = node) };
        }
        self.tail = node;
    }

    /// The node after `node`, or null.
    ///
    /// # Safety
    ///
    /// `node` is linked in this list; the caller holds the user's lock.
    pub(crate) unsafe fn next(&self, node: *const T) -> *const T {
        // SAFETY: a linked node is valid and its links are ours.
        unsafe { (*node).pointers().next.with_mut(|p| *p) }
    }

    /// Unlinks `node`.
    ///
    /// # Safety
    ///
    /// `node` is linked in this list; the caller holds the user's lock.
    pub(crate) unsafe fn unlink(&mut self, node: *const T) {
        // SAFETY: `node` and its neighbours are linked, hence valid, and
        // their links are only touched under the lock the caller holds.
        unsafe {
            let links = (*node).pointers();
            let prev = links.prev.with_mut(|p| *p);
            let next = links.next.with_mut(|p| *p);
            if prev.is_null() {
                self.head = next;
            } else {
                (*prev).pointers().next.with_mut(|p| *p = next);
            }
            if next.is_null() {
                self.tail = prev;
            } else {
                (*next).pointers().prev.with_mut(|p| *p = prev);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    struct Item {
        value: u32,
        links: Pointers<Item>,
    }

    // SAFETY: `pointers` always returns the `links` field, used only by the
    // list.
    unsafe impl Linked for Item {
        fn pointers(&self) -> &Pointers<Item> {
            &self.links
        }
    }

    fn item(value: u32) -> Item {
        Item {
            value,
            links: Pointers::new(),
        }
    }

    fn values(list: &List<Item>) -> Vec<u32> {
        let mut out = vec![];
        let mut cur = list.head();
        while !cur.is_null() {
            // SAFETY: `cur` is linked; the test is the only thread.
            unsafe {
                out.push((*cur).value);
                cur = list.next(cur);
            }
        }
        out
    }

    #[test]
    fn push_back_keeps_order_and_unlink_mends_both_sides() {
        let (a, b, c) = (item(1), item(2), item(3));
        let mut list = List::new();
        assert!(list.is_empty());
        // SAFETY: the items outlive the list's use of them and do not move;
        // each is linked once and unlinked before it is dropped.
        unsafe {
            list.push_back(&a);
            list.push_back(&b);
            list.push_back(&c);
            assert_eq!(values(&list), [1, 2, 3]);
            list.unlink(&b);
            assert_eq!(values(&list), [1, 3]);
            list.unlink(&c);
            assert_eq!(values(&list), [1]);
            list.push_back(&b);
            assert_eq!(values(&list), [1, 2]);
            list.unlink(&a);
            assert_eq!(values(&list), [2]);
            list.unlink(&b);
        }
        assert!(list.is_empty());
    }

    #[test]
    fn a_node_relinks_after_unlink() {
        let a = item(7);
        let mut list = List::new();
        for _ in 0..3 {
            // SAFETY: `a` outlives the list's use of it and is unlinked
            // before it is linked again.
            unsafe {
                list.push_back(&a);
                assert_eq!(values(&list), [7]);
                list.unlink(&a);
            }
            assert!(list.is_empty());
        }
    }
}
