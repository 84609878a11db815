//! The database's health as the connectors see it: the back-off between
//! failed connects, the failure epoch, the fail-fast state and the last
//! error. A leaf: it keeps the state and its rules; the engine's connect
//! flow (`engine/connect.rs`) and checkout (`engine/checkout.rs`) decide
//! when to consult it.
//!
//! * **Back-off**: 5 ms after a failed connect, doubling, at most 1 s, each
//!   wait jittered by ±20 % so a fleet of processes does not reconnect in
//!   step ([`backoff_after`], [`jittered`]). A sleeping connector can be
//!   woken by a caller who queues ([`Health::pace`], [`Health::wake_pacing`]).
//! * **Failures in a row**: the first is retried at once by the connector;
//!   fail fast starts at the second ([`Health::count_failure`]).
//! * **Down**: with fail fast on, the failure callers fail with while no
//!   connection is open ([`Health::mark_down`], [`Health::failure`]),
//!   cleared by the next successful connect ([`Health::recovered`]).
//! * **Failure epoch**: when a failure was last seen; connections not
//!   checked since are validated at their next checkout
//!   ([`Health::failed_since`]).
//! * **Rejections in a row**: checkout checks that rejected connections
//!   opened after the previous rejection; connectors back off while there
//!   are any ([`Health::count_check`]), until a check passes or a connect
//!   fails ([`Health::count_failure`]: the server went down, and the one
//!   that comes back starts clean).
//! * **Reopening**: the size the pool had, or was asked for, when failures
//!   were seen (open connections plus callers waiting, the largest since
//!   the pool last got back to it); while the pool is below it and connects
//!   succeed, connectors may run up to `max_concurrent_reconnects` at once,
//!   so the callers of an outage are served together
//!   ([`Health::reopen_target`], [`Health::reopened`]).
//! * **Connects running**: when each began ([`Health::connect_started`]),
//!   so a caller that times out behind one that hangs without failing (a
//!   server that accepts TCP and never answers), with no last error to
//!   tell it, is told where the oldest goes and for how long it has run
//!   ([`Health::oldest_connect`]). A lock at each connect's start and end,
//!   none at a checkout.

use std::any::Any;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pool_api::ConnectTimedOut;

use crate::clock::{Clock, Stamp};
use crate::sync::lock_std as lock;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The pool's last error, as timed-out callers see it.
pub(crate) type LastError = Arc<dyn Error + Send + Sync>;

/// The first back-off after a failed connect.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// The longest back-off.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The back-off after `n` failures in a row (`n >= 1`): 5 ms, doubling, at
/// most 1 s.
pub(crate) fn backoff_after(n: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << (n.max(1) - 1).min(16))
        .min(MAX_BACKOFF)
}

/// `d` scaled by a random factor in 0.8..1.2, so processes that lost their
/// database together do not retry together.
pub(crate) fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.8 + 0.4 * fastrand::f64())
}

/// Zeroes a count kept as a hint, writing only when it is not zero already,
/// so the common case (nothing to clear) leaves its cache line shared.
fn clear(count: &AtomicU32) {
    // Relaxed: the counts it clears are back-off hints, ordered with nothing
    // else.
    if count.load(Ordering::Relaxed) != 0 {
        count.store(0, Ordering::Relaxed);
    }
}

/// The connect failure that callers fail fast with while the database is
/// known down; shared by every caller it reaches.
pub(crate) enum Failure<E> {
    Backend(Arc<E>),
    TimedOut,
}

impl<E> Clone for Failure<E> {
    fn clone(&self) -> Self {
        match self {
            Failure::Backend(e) => Failure::Backend(e.clone()),
            Failure::TimedOut => Failure::TimedOut,
        }
    }
}

/// Why opening a connection failed.
pub(crate) enum OpenError<E> {
    Backend(E),
    TimedOut(ConnectTimedOut),
    /// `connect` or the `after_connect` hook panicked; the payload, for
    /// `Pool::new` to resume.
    Panicked(Box<dyn Any + Send>),
}

/// A `connect` or `after_connect` that panicked; kept as the pool's last
/// error, so callers that time out meanwhile see it.
#[derive(Debug)]
struct ConnectPanicked(String);

impl std::fmt::Display for ConnectPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connect panicked: {}", self.0)
    }
}

impl std::error::Error for ConnectPanicked {}

/// A panic payload's message, when it is a string.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> OpenError<E> {
    /// The failure, and the same error as the pool's last error.
    pub(crate) fn into_failure(self) -> (Failure<E>, LastError) {
        match self {
            OpenError::Backend(e) => {
                let e = Arc::new(e);
                let last: LastError = e.clone();
                (Failure::Backend(e), last)
            }
            OpenError::TimedOut(e) => (Failure::TimedOut, Arc::new(e)),
            OpenError::Panicked(p) => (
                Failure::TimedOut,
                Arc::new(ConnectPanicked(panic_message(&*p))),
            ),
        }
    }
}

/// The connect health of one pool (see the module docs).
pub(crate) struct Health<E> {
    /// Checkout-check rejections in a row that replacing did not cure;
    /// connectors back off while it is not zero. Relaxed: a hint.
    rejected_in_a_row: AtomicU32,
    /// When the last checkout check rejected a connection (stamp nanos).
    /// Relaxed: as above.
    rejected_at: AtomicU64,
    /// The database is known down (fail fast): the last connect failed with
    /// nothing open. Relaxed: a hint; the failure itself is read under
    /// `failure`'s lock.
    down: AtomicU32,
    /// When a failure was last seen (stamp nanos; 0: never): a connection
    /// found broken, a failed check, a failed connect. Connections not
    /// checked since are validated at their next checkout, bypass window or
    /// not (the failure epoch). Relaxed: a hint read on the fast
    /// path; a checkout racing the store validates or not, either is safe.
    failed_at: AtomicU64,
    /// Connectors sleeping out a back-off after a failed connect. While the
    /// database is down a `get()` that finds them all asleep wakes one
    /// (`wake_pacing`) to try at once, instead of failing on the old error
    /// until the timer fires. Relaxed: a hint.
    pacing: AtomicU32,
    /// Wakes a connector out of its back-off sleep.
    wake: tokio::sync::Notify,
    /// Connects that failed in a row (database failures, not capacity
    /// refusals or panics); zeroed by a successful connect. Relaxed: each
    /// failure reads its own increment, and a success racing a failure is
    /// a fresh start either way.
    failed_in_a_row: AtomicU32,
    /// The size to reopen to (see the module docs; 0: none): the largest
    /// open count plus callers waiting seen at a failure, until the pool
    /// has that many open again. Relaxed: a hint for the connect bound; the
    /// connector places themselves are claimed by compare-and-swap against
    /// whichever bound a claim read.
    reopen_to: AtomicU32,
    /// The failure callers fail fast with while `down`; written with
    /// `down` under this lock.
    failure: Mutex<Option<Failure<E>>>,
    /// The last connect error (timed-out callers see it).
    last_error: Mutex<Option<LastError>>,
    /// When each connect now running began (see the module docs); read
    /// only for a timeout's text, so a `std` lock, not modelled by loom.
    connects: Mutex<Vec<Stamp>>,
}

impl<E> std::fmt::Debug for Health<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("down", &self.is_down())
            .field("rejected_in_a_row", &self.rejected_in_a_row())
            .finish_non_exhaustive()
    }
}

impl<E> Health<E> {
    pub(crate) fn new() -> Self {
        Self {
            rejected_in_a_row: AtomicU32::new(0),
            rejected_at: AtomicU64::new(0),
            down: AtomicU32::new(0),
            failed_at: AtomicU64::new(0),
            pacing: AtomicU32::new(0),
            wake: tokio::sync::Notify::new(),
            failed_in_a_row: AtomicU32::new(0),
            reopen_to: AtomicU32::new(0),
            failure: Mutex::new(None),
            last_error: Mutex::new(None),
            connects: Mutex::new(Vec::new()),
        }
    }

    /// Whether the database is known down (fail fast).
    #[inline]
    pub(crate) fn is_down(&self) -> bool {
        // Relaxed: a hint (see the field).
        self.down.load(Ordering::Relaxed) != 0
    }

    /// The database is down: callers fail fast with `failure` until
    /// [`recovered`](Self::recovered).
    pub(crate) fn mark_down(&self, failure: Failure<E>) {
        let mut slot = lock(&self.failure);
        *slot = Some(failure);
        // Relaxed: a hint; callers read the failure under its lock.
        self.down.store(1, Ordering::Relaxed);
    }

    /// A connect succeeded: the database is no longer known down.
    pub(crate) fn recovered(&self) {
        let mut failure = lock(&self.failure);
        // Relaxed: as in `mark_down`; both under the failure's lock.
        self.down.store(0, Ordering::Relaxed);
        *failure = None;
    }

    /// The failure callers fail fast with, or `None` when a connect
    /// succeeded since.
    pub(crate) fn failure(&self) -> Option<Failure<E>> {
        lock(&self.failure).clone()
    }

    pub(crate) fn set_last_error(&self, e: LastError) {
        *lock(&self.last_error) = Some(e);
    }

    pub(crate) fn last_error(&self) -> Option<LastError> {
        lock(&self.last_error).clone()
    }

    /// Records a connect that began `at`, until the value returned is
    /// dropped (the connect ended, or its future was dropped).
    pub(crate) fn connect_started(&self, at: Stamp) -> Connecting<'_, E> {
        lock(&self.connects).push(at);
        Connecting { health: self, at }
    }

    /// When the oldest connect now running began.
    #[cold]
    pub(crate) fn oldest_connect(&self) -> Option<Stamp> {
        lock(&self.connects).iter().copied().min()
    }

    /// Records that a failure was seen at `now` (see `failed_at`), with
    /// `wanted` connections open or asked for (open plus callers waiting:
    /// the size to reopen to, see `reopen_to`).
    #[cold]
    pub(crate) fn saw_failure(&self, now: Stamp, wanted: u32) {
        // Relaxed: a hint (see the field); `max` so a late writer with an
        // older stamp does not move the epoch back.
        self.failed_at
            .fetch_max(now.nanos().max(1), Ordering::Relaxed);
        // Relaxed: a hint (see the field); `max`: the largest size seen
        // while failing, not the last (connections found broken one by one
        // leave the pool smaller at each).
        self.reopen_to.fetch_max(wanted, Ordering::Relaxed);
    }

    /// Whether a failure was seen after `checked`, the last time a
    /// connection was known alive.
    #[inline]
    pub(crate) fn failed_since(&self, checked: Stamp) -> bool {
        // Relaxed: a hint (see the field). `>=`: on a coarse or paused
        // clock a failure and a check can share a stamp; checking once too
        // often is the safe side. 0: no failure seen yet.
        let failed_at = self.failed_at.load(Ordering::Relaxed);
        failed_at != 0 && failed_at >= checked.nanos()
    }

    /// A caller is about to wait: wakes a connector out of its back-off to
    /// try at once; `false` when none is backing off.
    pub(crate) fn wake_pacing(&self) -> bool {
        // Relaxed: a hint; a connector that leaves its sleep meanwhile
        // looks at the demand (this caller, queued next) anyway.
        if self.pacing.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.wake.notify_one();
        true
    }

    /// Connects succeed again: wakes every connector out of its back-off,
    /// so each opens a connection for the callers of the outage at once
    /// rather than at the end of its pause.
    pub(crate) fn wake_all_pacing(&self) {
        // Relaxed: a hint, as in `wake_pacing`.
        if self.pacing.load(Ordering::Relaxed) != 0 {
            self.wake.notify_waiters();
        }
    }

    /// Sleeps out a back-off, or until a caller wakes this connector.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) async fn pace(&self, backoff: Duration) {
        /// Counts the sleeper out however the sleep ends (a runtime
        /// shutting down drops it).
        struct Pacing<'a>(&'a AtomicU32);
        impl Drop for Pacing<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.pacing.fetch_add(1, Ordering::Relaxed);
        let _pacing = Pacing(&self.pacing);
        // Woken or timed out: either way, try again.
        let _ = tokio::time::timeout(backoff, self.wake.notified()).await;
    }

    /// Counts a failed connect; the number in a row, this one included.
    ///
    /// It also ends a rejection streak (see [`count_check`](Self::count_check)):
    /// connects failing is a server down, paced by the connect back-off,
    /// and the server that comes back is a new one. Kept, the streak of the
    /// server before a restart would pause every connect after it (up to
    /// a second each) until a checkout check passed again.
    pub(crate) fn count_failure(&self) -> u32 {
        clear(&self.rejected_in_a_row);
        self.failed_in_a_row
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1)
    }

    /// A connect succeeded: the next failure is a first one again.
    pub(crate) fn count_success(&self) {
        clear(&self.failed_in_a_row);
    }

    /// The size the pool reopens to: what it had or was asked for when
    /// failures were seen, until it is back to it; 0 when there is none,
    /// and while connects still fail (the usual bound paces the attempts
    /// then). Two loads in the common case of no failure seen: the second
    /// only when there is a size to reopen to.
    #[inline]
    pub(crate) fn reopen_target(&self) -> u32 {
        // Relaxed: hints (see the fields).
        let to = self.reopen_to.load(Ordering::Relaxed);
        if to == 0 || self.failed_in_a_row.load(Ordering::Relaxed) != 0 {
            return 0;
        }
        to
    }

    /// The pool has `open` connections, or `full`: the reopening is over
    /// once that is the size it reopens to. A failure seen meanwhile that
    /// raised the size is kept.
    pub(crate) fn reopened(&self, open: u32, full: bool) {
        // Relaxed: a hint (see the field).
        let _ = self
            .reopen_to
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |to| {
                (to != 0 && (full || open >= to)).then_some(0)
            });
    }

    /// No reopening: connects go at the usual pace (a capacity refusal,
    /// which more connects at once do not cure).
    pub(crate) fn end_reopening(&self) {
        clear(&self.reopen_to);
    }

    /// Keeps the count of rejections in a row that replacing did not cure,
    /// which connectors back off by: a rejected connection opened after the
    /// previous rejection counts; older ones (stale after a server restart,
    /// say) do not, so replacing them starts at once.
    pub(crate) fn count_check(&self, clock: &Clock, created_at: Stamp, passed: bool) {
        let streak = &self.rejected_in_a_row;
        // Relaxed throughout: a back-off hint, ordered with nothing else.
        if passed {
            clear(streak);
            return;
        }
        let now = clock.now();
        let previous = Stamp::from_nanos(self.rejected_at.swap(now.nanos(), Ordering::Relaxed));
        if created_at >= previous {
            let _ = streak.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(1))
            });
        }
    }

    /// The rejection streak now.
    pub(crate) fn rejected_in_a_row(&self) -> u32 {
        self.rejected_in_a_row.load(Ordering::Relaxed)
    }
}

/// A connect counted as running ([`Health::connect_started`]) until
/// dropped.
pub(crate) struct Connecting<'a, E> {
    health: &'a Health<E>,
    at: Stamp,
}

impl<E> Drop for Connecting<'_, E> {
    fn drop(&mut self) {
        let mut connects = lock(&self.health.connects);
        // Any entry of the same stamp: connects that began together are
        // interchangeable here.
        if let Some(i) = connects.iter().position(|&at| at == self.at) {
            connects.swap_remove(i);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_connect_running_is_kept_until_it_ends() {
        let h: Health<std::io::Error> = Health::new();
        assert_eq!(h.oldest_connect(), None);
        let first = h.connect_started(Stamp::from_nanos(10));
        let second = h.connect_started(Stamp::from_nanos(30));
        let twin = h.connect_started(Stamp::from_nanos(30));
        assert_eq!(h.oldest_connect(), Some(Stamp::from_nanos(10)));
        drop(first);
        assert_eq!(h.oldest_connect(), Some(Stamp::from_nanos(30)));
        drop(second);
        assert_eq!(
            h.oldest_connect(),
            Some(Stamp::from_nanos(30)),
            "one of two that began together still runs"
        );
        drop(twin);
        assert_eq!(h.oldest_connect(), None);
    }

    #[test]
    fn backoff_doubles_from_five_ms_to_one_second() {
        assert_eq!(backoff_after(1), FIRST_BACKOFF);
        assert_eq!(backoff_after(2), Duration::from_millis(10));
        assert_eq!(backoff_after(8), Duration::from_millis(640));
        assert_eq!(backoff_after(9), MAX_BACKOFF);
        assert_eq!(backoff_after(u32::MAX), MAX_BACKOFF);
        for _ in 0..100 {
            let d = jittered(Duration::from_millis(100));
            assert!(
                d >= Duration::from_millis(80) && d <= Duration::from_millis(120),
                "{d:?}"
            );
        }
    }

    #[test]
    fn down_until_recovered_and_failures_count_in_a_row() {
        let h: Health<std::io::Error> = Health::new();
        assert!(!h.is_down() && h.failure().is_none());
        assert_eq!(h.count_failure(), 1);
        assert_eq!(h.count_failure(), 2);
        h.mark_down(Failure::TimedOut);
        assert!(h.is_down());
        assert!(matches!(h.failure(), Some(Failure::TimedOut)));
        h.recovered();
        assert!(!h.is_down() && h.failure().is_none());
        h.count_success();
        assert_eq!(h.count_failure(), 1, "a success starts the count again");
    }

    #[test]
    fn the_pool_reopens_to_its_size_at_the_failures_while_connects_succeed() {
        let h: Health<std::io::Error> = Health::new();
        let now = Clock::new().now();
        // How far a pool with `open` connections is short of the size.
        let gap = |open: u32| h.reopen_target().saturating_sub(open);
        assert_eq!(gap(0), 0, "no failure seen: no reopening");
        h.saw_failure(now, 12);
        h.saw_failure(now, 3);
        assert_eq!(h.count_failure(), 1);
        assert_eq!(gap(0), 0, "connects still fail: the usual pace");
        h.count_success();
        assert_eq!(gap(0), 12, "the largest size seen is kept");
        assert_eq!(gap(11), 1);
        h.reopened(11, false);
        assert_eq!(gap(11), 1, "not there yet");
        h.reopened(12, false);
        assert_eq!(gap(0), 0, "back to its size: over");
        h.saw_failure(now, 8);
        assert_eq!(gap(2), 6);
        h.reopened(2, true);
        assert_eq!(gap(2), 0, "a full pool has nothing to reopen");
        h.saw_failure(now, 8);
        h.end_reopening();
        assert_eq!(gap(0), 0);
    }

    #[test]
    fn the_failure_epoch_covers_checks_at_or_before_it() {
        let h: Health<std::io::Error> = Health::new();
        let clock = Clock::new();
        let checked = clock.now();
        assert!(!h.failed_since(checked), "no failure seen yet");
        h.saw_failure(checked, 0);
        assert!(
            h.failed_since(checked),
            "a failure sharing the stamp counts"
        );
        h.saw_failure(Stamp::from_nanos(1), 0);
        assert!(
            h.failed_since(checked),
            "an older stamp never moves it back"
        );
    }

    #[test]
    fn only_rejections_of_newer_connections_lengthen_the_streak() {
        let h: Health<std::io::Error> = Health::new();
        let clock = Clock::new();
        // The first rejection must come after the epoch's first nanosecond
        // for an older connection to exist (bounded: the clock moves).
        for _ in 0..1_000_000 {
            if clock.now().nanos() > 0 {
                break;
            }
            std::hint::spin_loop();
        }
        h.count_check(&clock, clock.now(), false);
        assert_eq!(h.rejected_in_a_row(), 1);
        // Opened before the previous rejection: stale, not counted.
        h.count_check(&clock, Stamp::from_nanos(0), false);
        assert_eq!(h.rejected_in_a_row(), 1);
        h.count_check(&clock, clock.now(), true);
        assert_eq!(h.rejected_in_a_row(), 0);
        h.count_check(&clock, clock.now(), false);
        assert_eq!(h.rejected_in_a_row(), 1);
        h.count_failure();
        assert_eq!(h.rejected_in_a_row(), 0, "a failed connect ends the streak");
    }
}
