//! The deadline sweeper: one task per pool that times out waiters past their
//! deadline (see `waiters.rs`, "Deadlines"), instead of a timer per waiter.
//!
//! It sleeps until the earliest deadline in the queue, unlinks the waiters
//! that are due as timed out (`WaiterQueue::sweep`) and wakes them, then
//! sleeps again. A waiter whose deadline is earlier than the armed one
//! wakes it early ([`Sweeper::rearm`]); with one `acquire_timeout` for every
//! caller that is almost never. It holds only a `Weak` reference to the
//! pool; the pool's drop wakes it to end, and it ends on close too.

use std::future::Future;
use std::sync::{Arc, Weak};

use pool_api::ManageConnection;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::housekeeper::spawn_once;
use crate::engine::Engine;
use crate::sync::AtomicU32;

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
            sweep(Arc::downgrade(shared), self.wake.clone())
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

/// The sweeper task; see the module docs.
async fn sweep<M: ManageConnection>(weak: Weak<Engine<M>>, wake: Arc<Notify>) {
    loop {
        let woken = wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let next = {
            let Some(shared) = weak.upgrade() else { return };
            if shared.is_closed() {
                return;
            }
            // Deadlines are pool stamps; the sleep is on tokio's clock.
            let now = shared.clock.now();
            let slots = &shared.slots;
            let next = shared.waiters.sweep(|| slots.clear_waiting(), now);
            next.map(|due| Instant::now() + due.since(now))
        };
        match next {
            Some(at) => {
                let sleep = tokio::time::sleep_until(at);
                tokio::pin!(sleep);
                // Whichever comes first: the deadline or a wake-up.
                std::future::poll_fn(|cx| {
                    if sleep.as_mut().poll(cx).is_ready() || woken.as_mut().poll(cx).is_ready() {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                })
                .await;
            }
            None => woken.await,
        }
    }
}
