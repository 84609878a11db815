//! Who holds each connection, and leak detection.
//!
//! **Holder sites, always on.** `get()`, `get_timeout()` and `try_get()`
//! are `#[track_caller]`: every checkout stores its caller's `&'static
//! Location` and the checkout time in the slot's [`LeakSlot`] (two plain
//! stores on the slot's own cache line, which the checkout writes anyway),
//! and every return clears the site (one store). `Pool::holders`, the
//! timeout error and the slow-acquire WARN read them by scanning the slots,
//! without a lock and without touching the guards.
//!
//! **Leak detection**, when `leak_detection_threshold` is set: the
//! housekeeper scans the slots on every tick, and a tick is at most
//! `min(housekeeping_period, threshold, 1 s)` long, so a leak is reported
//! at most that long after it crosses the threshold, with its call site.
//! No timer is armed per checkout.
//!
//! * With `leak_detection_backtrace(false)` the site is all a report
//!   names: the scan marks a checkout reported by tagging the low bit of its
//!   site pointer (a CAS), and the return swaps the pointer out instead of
//!   storing over it, to see the tag. A few instructions per checkout.
//! * With the backtrace (the default), checkout also stores an
//!   *unresolved* backtrace (frame addresses only) under a per-slot lock;
//!   the housekeeper resolves it (symbols, files, lines: the expensive
//!   part) only when it reports. Capturing it unwinds the stack (DWARF
//!   unwind tables), a few microseconds per checkout (3 to 5 us measured
//!   for an uncontended `get()` + drop on x86-64, against about 0.25 us
//!   without it). It grows with stack depth, so the walk stops after
//!   `MAX_FRAMES` frames.
//!
//! The holder record is made of `std` atomics, not the loom shim's: it is
//! diagnostics that no decision of the pool reads, like the statistics
//! (see `sync::stat`).

use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64};
use std::time::Duration;

use backtrace::{Backtrace, BacktraceFrame};

use std::sync::Mutex;

use crate::clock::Stamp;
use crate::sync::lock_std as lock;
use crate::sync::Ordering;

/// The low bit of a site pointer: this checkout was reported as a leak
/// (site-only leak detection). `Location` is at least 4-byte aligned, so
/// the bit is free.
const REPORTED: usize = 1;
const _: () = assert!(std::mem::align_of::<Location<'static>>() > REPORTED);

/// Per-slot record of the checkout in progress: its site and time, and,
/// with backtraces on, the backtrace.
#[derive(Debug)]
pub(crate) struct LeakSlot {
    /// The caller of `get()` while the connection is held; null otherwise.
    /// Its low bit is [`REPORTED`] once site-only leak detection reported
    /// this checkout.
    site: AtomicPtr<Location<'static>>,
    /// When the checkout was taken (stamp nanos); meaningful while `site`
    /// is not null.
    taken_at: AtomicU64,
    /// With backtraces on: one lock guards the whole backtrace record, so
    /// a scan and a return (or the next checkout) cannot interleave: a scan
    /// never pairs one checkout's hold time with the next one's backtrace,
    /// and a return logs "leaked connection returned" exactly when that
    /// checkout was reported. Taken once per checkout and once per return;
    /// the backtrace is captured before it and resolved after it.
    checkout: Mutex<Option<Checkout>>,
}

impl Default for LeakSlot {
    fn default() -> Self {
        Self {
            site: AtomicPtr::new(ptr::null_mut()),
            taken_at: AtomicU64::new(0),
            checkout: Mutex::new(None),
        }
    }
}

/// The checkout a slot is tracking, with backtraces on.
#[derive(Debug)]
struct Checkout {
    taken_at: Stamp,
    site: &'static Location<'static>,
    /// Unresolved: frame addresses only.
    backtrace: Backtrace,
    /// Set once this checkout was reported.
    reported: bool,
}

/// A leak the scan found.
pub(crate) struct Leak {
    pub(crate) held: Duration,
    pub(crate) site: &'static Location<'static>,
    /// The resolved application frames, with backtraces on.
    pub(crate) frames: Option<String>,
}

fn as_ptr(site: &'static Location<'static>) -> *mut Location<'static> {
    ptr::from_ref(site).cast_mut()
}

/// The site a (possibly tagged) pointer names, if any.
fn site_of(p: *mut Location<'static>) -> Option<&'static Location<'static>> {
    let p = p.map_addr(|a| a & !REPORTED);
    // SAFETY: a non-null `site` was made by `as_ptr` from a `&'static
    // Location`, at most with its low bit set, which was just cleared.
    unsafe { p.cast_const().as_ref() }
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
    /// Records the site and time of a checkout: two stores, always on.
    #[inline]
    pub(crate) fn hold(&self, site: &'static Location<'static>, now: Stamp) {
        self.taken_at.store(now.nanos(), Ordering::Relaxed);
        // Release: pairs with the Acquire loads of `holder` and `check_site`,
        // so a scan that sees this site sees this checkout's time (or a
        // later one's).
        self.site.store(as_ptr(site), Ordering::Release);
    }

    /// Clears the site at a return, leak detection off: one store.
    #[inline]
    pub(crate) fn release(&self) {
        // Relaxed: a scan that reads the old site reports a holder that
        // just left, as any snapshot may.
        self.site.store(ptr::null_mut(), Ordering::Relaxed);
    }

    /// Clears the site at a return with site-only leak detection; says
    /// whether the scan reported this checkout.
    pub(crate) fn release_tracked(&self) -> bool {
        // AcqRel: the swap is ordered with the scan's tagging CAS on the
        // same word, so exactly one of them sees the other.
        let p = self.site.swap(ptr::null_mut(), Ordering::AcqRel);
        p.addr() & REPORTED != 0
    }

    /// The site of the checkout in progress and how long it has been held,
    /// if the connection is held.
    pub(crate) fn holder(&self, now: Stamp) -> Option<(&'static Location<'static>, Duration)> {
        // Acquire: pairs with the Release store in `hold`.
        let site = site_of(self.site.load(Ordering::Acquire))?;
        let taken_at = Stamp::from_nanos(self.taken_at.load(Ordering::Relaxed));
        Some((site, now.since(taken_at)))
    }

    /// Site-only leak detection: reports this slot's checkout if it is past
    /// `threshold` and was not reported yet, tagging it reported.
    pub(crate) fn check_site(&self, now: Stamp, threshold: Duration) -> Option<Leak> {
        // Acquire: pairs with the Release store in `hold`.
        let p = self.site.load(Ordering::Acquire);
        if p.is_null() || p.addr() & REPORTED != 0 {
            return None;
        }
        let taken_at = self.taken_at.load(Ordering::Relaxed);
        let held = now.since(Stamp::from_nanos(taken_at));
        if held < threshold {
            return None;
        }
        let tagged = p.map_addr(|a| a | REPORTED);
        // AcqRel: ordered with the return's swap (`release_tracked`) on the
        // same word; fails if the connection came back meanwhile.
        self.site
            .compare_exchange(p, tagged, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        // The same site may have taken the slot again between the load and
        // the CAS: a different time says so. Then the leak came back and
        // the new checkout is not reported; untag it (a failed undo means
        // it came back too).
        if self.taken_at.load(Ordering::Relaxed) != taken_at {
            let _ = self
                .site
                .compare_exchange(tagged, p, Ordering::AcqRel, Ordering::Relaxed);
            return None;
        }
        Some(Leak {
            held,
            site: site_of(p)?,
            frames: None,
        })
    }

    /// Records a checkout's backtrace (leak detection on, with backtraces).
    pub(crate) fn taken(&self, site: &'static Location<'static>, now: Stamp) {
        let checkout = Checkout {
            taken_at: now,
            site,
            backtrace: capture(),
            reported: false,
        };
        let previous = lock(&self.checkout).replace(checkout);
        // A slot's checkout always ends in `returned` before the next one.
        debug_assert!(previous.is_none(), "checkout recorded twice");
    }

    /// Records a return (with backtraces); says whether it was reported.
    pub(crate) fn returned(&self) -> bool {
        let checkout = lock(&self.checkout).take();
        // The backtrace is freed here, outside the lock.
        checkout.is_some_and(|c| c.reported)
    }

    /// Reports this slot's checkout (with backtraces) if it is past
    /// `threshold` and was not reported yet: how long it has been held,
    /// where it was taken, and the application's frames.
    pub(crate) fn check(&self, now: Stamp, threshold: Duration) -> Option<Leak> {
        let (held, site, mut trace) = {
            let mut guard = lock(&self.checkout);
            let checkout = guard.as_mut()?;
            let held = now.since(checkout.taken_at);
            if held < threshold || checkout.reported {
                return None;
            }
            checkout.reported = true;
            (held, checkout.site, checkout.backtrace.clone())
        };
        // Resolving (symbols, files, lines) is the slow part: unlocked.
        trace.resolve();
        Some(Leak {
            held,
            site,
            frames: Some(caller_frames(&trace)),
        })
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
