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

use std::sync::Mutex;

use crate::clock::Stamp;
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
    taken_at: Stamp,
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

impl LeakSlot {
    /// Records a checkout (leak detection on).
    pub(crate) fn taken(&self, now: Stamp) {
        let checkout = Checkout {
            taken_at: now,
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
    pub(crate) fn check(&self, now: Stamp, threshold: Duration) -> Option<(Duration, String)> {
        let (held, mut trace) = {
            let mut guard = lock(&self.checkout);
            let checkout = guard.as_mut()?;
            let held = now.since(checkout.taken_at);
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

/// Whether a frame belongs to the pool, the backtrace machinery, the async
/// runtime, the standard library or the C start-up code rather than to the
/// application (`test` is libtest's harness). A frame is the application's when its path (for a trait
/// impl, its self type: `<myapp::Job as core::future::Future>::poll`)
/// starts with a crate name other than those.
fn is_internal(name: &str) -> bool {
    const CRATES: [&str; 9] = [
        "backtrace",
        "test",
        "pool_core",
        "tokio",
        "core",
        "std",
        "alloc",
        "futures_util",
        "futures_core",
    ];
    let path = name.strip_prefix('<').unwrap_or(name);
    let krate_len = path
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(path.len());
    let (krate, rest) = path.split_at(krate_len);
    // Bare names are C (`_start`) or the `main` shim; `fn() -> ..`, `&T`,
    // `dyn ..` self types are glue.
    krate.is_empty() || !rest.starts_with("::") || CRATES.contains(&krate)
}

/// Formats the application's frames of `trace`: where it called `get()`
/// and the async calls that led there, without the frames of the pool,
/// tokio and the standard library in between.
fn caller_frames(trace: &Backtrace) -> String {
    const SHOWN: usize = 24;
    let mut out = String::new();
    let mut shown = 0;
    let mut hidden = 0;
    for frame in trace.frames() {
        for sym in frame.symbols() {
            let name = sym.name().map(|n| format!("{n:#}")).unwrap_or_default();
            if is_internal(&name) || shown == SHOWN {
                hidden += 1;
                continue;
            }
            shown += 1;
            out.push_str(&format!("\n  {shown:>2}: {name}"));
            if let (Some(file), Some(line)) = (sym.filename(), sym.lineno()) {
                out.push_str(&format!("\n      at {}:{line}", file.display()));
            }
        }
    }
    if shown == 0 {
        out.push_str("\n  (no application frames: build with debug info to see the caller)");
    } else if hidden > 0 {
        out.push_str(&format!(
            "\n  ({hidden} frames of the pool, the runtime and the standard library not shown)"
        ));
    }
    out
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::is_internal;

    #[test]
    fn application_frames_are_told_from_the_machinery() {
        for app in [
            "myapp::handlers::checkout::{{closure}}",
            "<myapp::Job as core::future::future::Future>::poll",
            "leak::a_test_fn",
            "<my_app::Pending<T> as core::future::future::Future>::poll",
        ] {
            assert!(!is_internal(app), "{app}");
        }
        for internal in [
            "pool_core::pool::Pool<M>::get::{{closure}}",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "tokio::runtime::scheduler::current_thread::Context::enter",
            "std::thread::local::LocalKey<T>::with",
            "backtrace::backtrace::trace",
            "<fn() -> core::result::Result<(), alloc::string::String> as core::ops::function::FnOnce<()>>::call_once",
            "<&mut F as core::future::future::Future>::poll",
            "main",
            "_start",
            "",
        ] {
            assert!(is_internal(internal), "{internal}");
        }
    }
}
