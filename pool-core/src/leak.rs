//! Leak detection: who took a connection, and for how long it has been out.
//!
//! When `leak_detection_threshold` is set, checkout stores the time and the
//! return addresses of the innermost [`FRAMES`] stack frames in the
//! connection's slot: an unresolved backtrace, bounded so its cost does not
//! grow with the depth of the caller's stack (an async runtime adds dozens of
//! frames below the application's code). The housekeeper scans the slots every
//! `min(housekeeping_period, threshold)`, so a leak is reported at most that
//! long after it crosses the threshold; it resolves the backtrace (symbols,
//! files, lines: the expensive part) only then. No timer is armed per
//! checkout, and with the option off none of this runs.

use std::time::Duration;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::clock::Stamp;
use crate::sync::lock_std as lock;

/// Per-slot leak state.
#[derive(Debug, Default)]
pub(crate) struct LeakSlot {
    /// Checkout time in nanoseconds since the pool's epoch, plus one; zero
    /// while the slot is not tracked.
    taken_at: AtomicU64,
    /// Set once the current checkout was reported.
    reported: AtomicU32,
    backtrace: Mutex<Option<Captured>>,
}

/// How many frames a checkout records: the pool's own few, then the
/// application's.
pub(crate) const FRAMES: usize = 32;

/// Return addresses of the innermost frames, unresolved.
#[derive(Debug, Clone)]
struct Captured {
    ips: [usize; FRAMES],
    len: usize,
}

impl Captured {
    /// Walks the stack; `#[inline(never)]` so its own frame is a known one
    /// to skip.
    #[inline(never)]
    fn here() -> Self {
        let mut captured = Captured {
            ips: [0; FRAMES],
            len: 0,
        };
        backtrace::trace(|frame| {
            captured.ips[captured.len] = frame.ip() as usize;
            captured.len += 1;
            captured.len < FRAMES
        });
        captured
    }
}

impl LeakSlot {
    /// Records a checkout (leak detection on).
    pub(crate) fn taken(&self, now: Stamp) {
        *lock(&self.backtrace) = Some(Captured::here());
        self.reported.store(0, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `check`, so a scan that
        // sees this checkout also sees its backtrace and cleared flag.
        self.taken_at
            .store(now.nanos().saturating_add(1), Ordering::Release);
    }

    /// Records a return; says how long a reported leak was held.
    pub(crate) fn returned(&self, held: Duration) -> Option<Duration> {
        self.taken_at.store(0, Ordering::Relaxed);
        lock(&self.backtrace).take();
        (self.reported.swap(0, Ordering::Relaxed) != 0).then_some(held)
    }

    /// Reports this slot's checkout if it is past `threshold` and was not
    /// reported yet: returns how long it has been held and where it was
    /// taken.
    pub(crate) fn check(&self, now: Stamp, threshold: Duration) -> Option<(Duration, String)> {
        let taken = self.taken_at.load(Ordering::Acquire);
        if taken == 0 {
            return None;
        }
        let held = now.since(Stamp::from_nanos(taken - 1));
        if held < threshold || self.reported.swap(1, Ordering::Relaxed) != 0 {
            return None;
        }
        let trace = lock(&self.backtrace).clone()?;
        Some((held, caller_frames(&trace)))
    }
}

/// Resolves and formats the frames of `trace` from the first one outside
/// this crate, tokio and the backtrace machinery: where the application
/// called `get()`.
fn caller_frames(trace: &Captured) -> String {
    const INTERNAL: [&str; 5] = ["backtrace::", "pool_core::", "tokio::", "core::", "std::"];
    let mut out = String::new();
    let mut started = false;
    let mut shown = 0;
    for &ip in &trace.ips[..trace.len] {
        backtrace::resolve(ip as *mut std::ffi::c_void, |sym| {
            let name = sym.name().map(|n| format!("{n:#}")).unwrap_or_default();
            let internal = INTERNAL.iter().any(|p| name.starts_with(p))
                || name.starts_with("<pool_core::")
                || name.is_empty();
            if !started && internal {
                return;
            }
            started = true;
            shown += 1;
            out.push_str(&format!("\n  {shown:>2}: {name}"));
            if let (Some(file), Some(line)) = (sym.filename(), sym.lineno()) {
                out.push_str(&format!("\n      at {}:{line}", file.display()));
            }
        });
    }
    if out.is_empty() {
        out.push_str("\n  (no symbols: build with debug info to see the caller)");
    }
    out
}
