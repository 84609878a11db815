//! What the pool knows about a connection, kept next to it.

use std::time::Duration;

use crate::clock::Stamp;

/// A connection with what the pool knows about it. It moves with the
/// connection: in the slot while idle, in the guard while in use, in a
/// waiter's node during a handoff.
#[derive(Debug)]
pub(crate) struct Entry<C> {
    pub(crate) conn: C,
    pub(crate) created_at: Stamp,
    /// When it must be retired (max lifetime less jitter), or `NEVER`.
    pub(crate) expires_at: Stamp,
    /// When it was opened or last came back.
    pub(crate) last_used: Stamp,
    /// The pool's eviction generation when its connect started; an older
    /// generation than the pool's means `soft_evict_all` retired it.
    pub(crate) generation: u64,
    /// When the housekeeper last pinged it (keepalive).
    pub(crate) last_ping: Stamp,
    /// Never checked out and returned yet: opened by the pool, so a first
    /// checkout soon after its connect skips validation (it was just shown
    /// to work). Cleared at its first return.
    pub(crate) fresh: bool,
    /// On its way from its connect to the caller it was opened for: it
    /// has never sat idle nor been used, so that caller gets it without
    /// any checkout check (`has_broken`, validation, `before_acquire`);
    /// they are about connections that were used or waited. Cleared when
    /// it goes idle instead (`deliver`) and at its first return.
    pub(crate) from_connect: bool,
}

impl<C> Entry<C> {
    pub(crate) fn idle_for(&self, now: Stamp) -> Duration {
        now.since(self.last_used)
    }
}
