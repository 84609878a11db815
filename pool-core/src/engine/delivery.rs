//! The one delivery path: every phase that puts a connection back in
//! service (a return, a reset, a ping, a connect, a resize, a resume)
//! ends here, and this calls no phase back; only the retirement sink
//! (`retire.rs`), for a connection above the bound or a closed pool.
//!
//! [`Engine::deliver`] hands a connection to the longest waiter while
//! callers wait (`WaiterQueue::offer` in `waiters.rs`, which wakes it),
//! else puts it on the idle stack. No lock, no allocation, no task unless
//! someone waits.

use std::sync::Arc;

use pool_api::ManageConnection;

use super::Engine;
use crate::index_stack::PushRefused;
use crate::slots::{Held, Occupied, State};
use crate::stats::Reason;

impl<M: ManageConnection> Engine<M> {
    /// Puts a connection the caller owns back in service: to the longest
    /// waiter, else on top of the idle stack. Lock-free unless someone is
    /// waiting.
    pub(crate) fn deliver(self: &Arc<Self>, h: Occupied<M::Connection>) {
        self.deliver_in_place(self.slots.hold(h));
    }

    /// [`deliver`](Self::deliver) for a connection in its slot, which it
    /// never leaves: a waiter is handed the slot's token.
    pub(crate) fn deliver_in_place(self: &Arc<Self>, mut held: Held) {
        let slots = &self.slots;
        // Above the bound after `Pool::resize` shrank it: retire it.
        if slots.over_limit() {
            return self.evict(slots.take_held(held), Reason::SoftEvict);
        }
        loop {
            // Callers queued (the bit is only a hint here; `offer` decides
            // under the queue's lock): hand the connection straight over,
            // without parking it on the stack and taking it back.
            if slots.has_waiters() {
                // Marked in use before the waiter can see it; a returned
                // connection already is, and its slot's line stays clean.
                slots.held_slot(&held).mark(State::InUse);
                match self.waiters.offer(|| slots.clear_waiting(), held) {
                    Ok(()) => return,
                    // The queue emptied meanwhile and the bit is cleared.
                    Err(back) => held = back,
                }
            }
            // Going idle: whoever takes it next did not ask for it to be
            // opened, and checks it as any idle connection.
            slots.entry_mut(&mut held).from_connect = false;
            match slots.push_held(held) {
                Ok(()) => return,
                Err((PushRefused::Closed, back)) => {
                    return self.evict(slots.take_held(back), Reason::Closed)
                }
                // Refused for waiters that queued since the check: loop to
                // hand it over.
                Err((PushRefused::Waiters, back)) => held = back,
            }
        }
    }
}
