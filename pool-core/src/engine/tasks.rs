//! The handles of the pool's background tasks, the housekeeper
//! (`housekeeper.rs`), the deadline sweeper (`sweeper.rs`) and the
//! connectors (`connect.rs`): whether each runs, starting it
//! ([`spawn_once`]) and waking it. Starting a task is not calling it: the
//! task runs later on its own stack. Each task's entry is a function the
//! engine is given when it is built ([`Starts`], filled by `Engine::new`),
//! so these handles, and the phases that ask for a task, name no task's
//! file: the tasks call the phases, never the other way round.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use pool_api::ManageConnection;
use tokio::sync::Notify;

use super::Engine;
use crate::sync::{AtomicU32, Ordering};

/// The housekeeper's handle in the pool: whether its task runs.
#[derive(Debug)]
pub(crate) struct Housekeeper {
    started: Arc<AtomicU32>,
}

impl Housekeeper {
    pub(crate) fn new() -> Self {
        Self {
            started: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Starts the housekeeper if it is not running and a runtime is at hand.
    #[inline]
    pub(crate) fn ensure<M: ManageConnection>(&self, shared: &Arc<Engine<M>>) {
        spawn_once(&self.started, || {
            (shared.starts.housekeeper)(Arc::downgrade(shared))
        });
    }
}

/// A background task's future, boxed once per start.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where each background task begins, given to the engine when it is built.
pub(crate) struct Starts<M: ManageConnection> {
    /// Spawns one connector on `runtime` for a place just claimed.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) connector:
        fn(&tokio::runtime::Handle, &Arc<Engine<M>>) -> tokio::task::JoinHandle<()>,
    /// The housekeeper's loop.
    pub(crate) housekeeper: fn(Weak<Engine<M>>) -> Task,
    /// The deadline sweeper's loop, woken through the `Notify`.
    pub(crate) sweeper: fn(Weak<Engine<M>>, Arc<Notify>) -> Task,
}

/// The sweeper's handle in the pool: its wake-up and whether it runs.
#[derive(Debug)]
pub(crate) struct Sweeper {
    wake: Arc<Notify>,
    started: Arc<AtomicU32>,
}

impl Sweeper {
    pub(crate) fn new() -> Self {
        Self {
            wake: Arc::new(Notify::new()),
            started: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Starts the sweeper if it does not run (a new pool, or one whose
    /// runtime ended: see `spawn_once`). A sweeper that starts sweeps at
    /// once, and so learns every deadline already queued.
    #[inline]
    pub(crate) fn ensure<M: ManageConnection>(&self, shared: &Arc<Engine<M>>) {
        spawn_once(&self.started, || {
            (shared.starts.sweeper)(Arc::downgrade(shared), self.wake.clone())
        });
    }

    /// Tells the sweeper that a waiter with an earlier deadline than it
    /// sleeps until has queued.
    pub(crate) fn rearm(&self) {
        self.wake.notify_one();
    }

    /// Wakes the sweeper (the pool is going away).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }
}

impl<M: ManageConnection> Engine<M> {
    /// Starts the housekeeper if it is not running and a runtime is at hand.
    #[inline]
    pub(crate) fn ensure_housekeeper(self: &Arc<Self>) {
        self.housekeeper.ensure(self);
    }
}

impl<M: ManageConnection> Drop for Engine<M> {
    fn drop(&mut self) {
        // The sweeper holds only a `Weak`: wake it so it sees the pool gone.
        self.sweeper.wake();
    }
}

/// Spawns the task `make` builds, unless `started` says it runs; does
/// nothing outside a tokio runtime (the next call from inside one starts
/// it). Inlined: every waiting checkout calls it, and the task is almost
/// always running.
///
/// The flag is held by a [`Started`] that lives in the task's future: when
/// the runtime drops the task (it shut down, whether the task was polled
/// or not) the flag falls back, and the next call, from the runtime that
/// uses the pool now, starts the task there. A flag set for good left a
/// pool used on a second runtime (one pool in a `static` shared by tests,
/// each on its runtime) with no task: waiters never timed out and nothing
/// was refilled. A task that ends on its own (the pool closed or gone)
/// keeps the flag: nothing is left for it to do.
#[inline]
pub(crate) fn spawn_once<F>(started: &Arc<AtomicU32>, make: impl FnOnce() -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    // Relaxed: a flag that orders nothing; the CAS decides who spawns.
    if started.load(Ordering::Relaxed) == 0 {
        spawn_first(started, make);
    }
}

#[cold]
fn spawn_first<F>(started: &Arc<AtomicU32>, make: impl FnOnce() -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if started
        .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        // Made before the spawn and moved into the future: a task dropped
        // unpolled drops it too.
        let flag = Started {
            flag: started.clone(),
            ended: false,
        };
        let task = make();
        runtime.spawn(async move {
            task.await;
            flag.keep();
        });
    }
}

/// A background task's "started" flag, held by its future (see
/// [`spawn_once`]): cleared when the future is dropped before the task
/// ended on its own.
struct Started {
    flag: Arc<AtomicU32>,
    /// The task ended on its own: the flag stays set.
    ended: bool,
}

impl Started {
    /// The task ended on its own: leaves the flag set. (A method taking
    /// the value, so the task's future owns the whole guard: an
    /// assignment to the field alone would have captured a copy of the
    /// `bool` and left the guard to drop at the spawn.)
    fn keep(mut self) {
        self.ended = true;
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if !self.ended {
            // Relaxed: as in `spawn_once`.
            self.flag.store(0, Ordering::Relaxed);
        }
    }
}
