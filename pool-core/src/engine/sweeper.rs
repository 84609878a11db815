//! The deadline sweeper: one task per pool that times out waiters past their
//! deadline (see `waiters.rs`, "Deadlines"), instead of a timer per waiter.
//!
//! It sleeps until the earliest deadline in the queue, unlinks the waiters
//! that are due as timed out (`WaiterQueue::sweep`) and wakes them, then
//! sleeps again. A waiter whose deadline is earlier than the armed one
//! wakes it early ([`Sweeper::rearm`](super::tasks::Sweeper::rearm)); with one `acquire_timeout` for every
//! caller that is almost never. It holds only a `Weak` reference to the
//! pool; the pool's drop wakes it to end, and it ends on close too.

use std::future::Future;
use std::sync::{Arc, Weak};

use pool_api::ManageConnection;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::Engine;

/// The sweeper task (started by `Sweeper::ensure`, `tasks.rs`); see the
/// module docs.
/// The sweeper's entry ([`Starts::sweeper`](super::tasks::Starts)).
pub(crate) fn start<M: ManageConnection>(
    weak: Weak<Engine<M>>,
    wake: Arc<Notify>,
) -> super::tasks::Task {
    Box::pin(sweep(weak, wake))
}

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
