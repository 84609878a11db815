//! One place that picks the synchronisation primitives: `std`'s normally,
//! loom's under `--cfg loom`, so the lock-free parts can be model-checked
//! unchanged. Every atomic in the engine comes from here.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::fence;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

pub(crate) use std::sync::atomic::Ordering;

/// Atomics that loom does not model, on purpose: the statistics (histogram
/// buckets, counters by reason) and the thread-shard picker. They are
/// Relaxed, pair with nothing, and no decision of the pool reads them, so
/// modelling them would add thousands of schedule points per execution and
/// check nothing; the shard picker is a `static`, which loom's atomics
/// cannot be.
pub(crate) mod stat {
    pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize};
}

/// An `UnsafeCell` with loom's closure API, so each access can be tracked by
/// loom under `--cfg loom` and costs nothing otherwise.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// An `UnsafeCell` with loom's closure API, so each access can be tracked by
/// loom under `--cfg loom` and costs nothing otherwise.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a raw pointer to the value; the caller upholds the
    /// aliasing rules when dereferencing it.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Locks a mutex, carrying on through poisoning: every critical section in
/// this crate leaves its data consistent before anything that can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> impl std::ops::DerefMut<Target = T> + '_ {
    #[cfg(not(loom))]
    {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    #[cfg(loom)]
    {
        m.lock().unwrap()
    }
}

/// [`lock`] for the `std` mutexes of the parts loom does not model.
pub(crate) fn lock_std<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
