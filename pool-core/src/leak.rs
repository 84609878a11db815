//! Leak detection: who took a connection, and for how long it has been out.
//!
//! When `leak_detection_threshold` is set, checkout stores the time and an
//! *unresolved* backtrace (frame addresses only, a few microseconds) in the
//! connection's slot. The housekeeper scans the slots on every tick, and a
//! tick is at most `min(housekeeping_period, threshold, 1 s)` long, so a
//! leak is reported at most that long after it crosses the threshold; it
//! resolves the backtrace (symbols, files, lines: the expensive part) only
//! then. No timer is armed per checkout, and with the option off none of
//! this runs.
//!
//! Cost: capturing the unresolved backtrace unwinds the stack (DWARF
//! unwind tables), a few microseconds per checkout while the option is on
//! (3 to 5 us measured for an uncontended `get()` + drop on x86-64, against
//! about 0.25 us without it). It grows with stack depth, so the walk stops
//! after `MAX_FRAMES` frames.

use std::time::Duration;

use backtrace::{Backtrace, BacktraceFrame};
use tokio::time::Instant;

use std::sync::Mutex;

use crate::sync::lock_std as lock;

/// Per-slot leak state.
///
/// One lock guards the whole checkout record, so a scan and a return (or
/// the next checkout) cannot interleave: a scan never pairs one checkout's
/// hold time with the next one's backtrace, and a return logs "leaked
/// connection returned" exactly when that checkout was reported. The lock
/// is taken once per checkout and once per return, only with leak detection
/// on; the backtrace is captured before it and resolved after it.
#[derive(Debug, Default)]
pub(crate) struct LeakSlot {
    checkout: Mutex<Option<Checkout>>,
}

/// The checkout a slot is tracking.
#[derive(Debug)]
struct Checkout {
    /// Nanoseconds since the pool's epoch.
    taken_at: u64,
    /// Unresolved: frame addresses only.
    backtrace: Backtrace,
    /// Set once this checkout was reported.
    reported: bool,
}

/// Frames captured at checkout: the pool's own and the unwinder's (about
/// eight) plus the 24 a report shows. Walking the stack costs per frame, so
/// deeper ones are not walked at all.
const MAX_FRAMES: usize = 32;

/// The innermost `MAX_FRAMES` frames of the current stack, unresolved.
fn capture() -> Backtrace {
    let mut frames = Vec::with_capacity(MAX_FRAMES);
    backtrace::trace(|frame| {
        frames.push(BacktraceFrame::from(frame.clone()));
        frames.len() < MAX_FRAMES
    });
    Backtrace::from(frames)
}

fn nanos_since(epoch: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

impl LeakSlot {
    /// Records a checkout (leak detection on).
    pub(crate) fn taken(&self, epoch: Instant, now: Instant) {
        let checkout = Checkout {
            taken_at: nanos_since(epoch, now),
            backtrace: capture(),
            reported: false,
        };
        let previous = lock(&self.checkout).replace(checkout);
        // A slot's checkout always ends in `returned` before the next one.
        debug_assert!(previous.is_none(), "checkout recorded twice");
    }

    /// Records a return; says how long a reported leak was held.
    pub(crate) fn returned(&self, held: Duration) -> Option<Duration> {
        let checkout = lock(&self.checkout).take();
        // The backtrace is freed here, outside the lock.
        checkout.is_some_and(|c| c.reported).then_some(held)
    }

    /// Reports this slot's checkout if it is past `threshold` and was not
    /// reported yet: returns how long it has been held and where it was
    /// taken.
    pub(crate) fn check(
        &self,
        epoch: Instant,
        now: Instant,
        threshold: Duration,
    ) -> Option<(Duration, String)> {
        let (held, mut trace) = {
            let mut guard = lock(&self.checkout);
            let checkout = guard.as_mut()?;
            let held =
                Duration::from_nanos(nanos_since(epoch, now).saturating_sub(checkout.taken_at));
            if held < threshold || checkout.reported {
                return None;
            }
            checkout.reported = true;
            (held, checkout.backtrace.clone())
        };
        // Resolving (symbols, files, lines) is the slow part: unlocked.
        trace.resolve();
        Some((held, caller_frames(&trace)))
    }
}

/// Formats the frames of `trace` from the first one outside this crate,
/// tokio and the backtrace machinery: where the application called `get()`.
fn caller_frames(trace: &Backtrace) -> String {
    const INTERNAL: [&str; 5] = ["backtrace::", "pool_core::", "tokio::", "core::", "std::"];
    let mut out = String::new();
    let mut started = false;
    let mut shown = 0;
    for frame in trace.frames() {
        for sym in frame.symbols() {
            let name = sym.name().map(|n| format!("{n:#}")).unwrap_or_default();
            let internal = INTERNAL.iter().any(|p| name.starts_with(p))
                || name.starts_with("<pool_core::")
                || name.is_empty();
            if !started && internal {
                continue;
            }
            started = true;
            if shown == 24 {
                out.push_str("\n   ...");
                return out;
            }
            shown += 1;
            out.push_str(&format!("\n  {shown:>2}: {name}"));
            if let (Some(file), Some(line)) = (sym.filename(), sym.lineno()) {
                out.push_str(&format!("\n      at {}:{line}", file.display()));
            }
        }
    }
    if out.is_empty() {
        out.push_str("\n  (no symbols: build with debug info to see the caller)");
    }
    out
}
