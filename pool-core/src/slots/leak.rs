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
//! * With the backtrace (the default), the same tagging finds and reports
//!   the leak, and the report also shows the async calls that led to the
//!   `get()`. Capturing a backtrace unwinds the stack (DWARF unwind
//!   tables), a few microseconds (3 to 5 us measured for an uncontended
//!   `get()` + drop on x86-64), so it is *sampled*: each thread captures
//!   the first checkout it makes at each call site and then one in
//!   [`SAMPLE_EVERY`] of that site's checkouts ([`Sampler`]). A captured
//!   backtrace is kept, *unresolved* (frame addresses only), in the slot
//!   for that checkout and as its site's latest, process-wide; the housekeeper resolves it (symbols, files, lines:
//!   the expensive part) only when it reports. A leaked checkout that was
//!   captured is reported with its own backtrace; one that was not, with
//!   its site's latest, marked as such: the `get()` line is the same, the
//!   async path that led to it may differ (a site reached from two
//!   callers shows the one sampled last). The walk stops after
//!   `MAX_FRAMES` frames.
//!
//! The holder record is made of `std` atomics, not the loom shim's: it is
//! diagnostics that no decision of the pool reads, like the statistics
//! (see `sync::stat`).

use std::cell::Cell;
use std::collections::HashMap;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backtrace::{Backtrace, BacktraceFrame};

use crate::clock::Stamp;
use crate::sync::lock_std as lock;
use crate::sync::Ordering;

/// The low bit of a site pointer: this checkout was reported as a leak
/// (site-only leak detection). `Location` is at least 4-byte aligned, so
/// the bit is free.
const REPORTED: usize = 1;
const _: () = assert!(std::mem::align_of::<Location<'static>>() > REPORTED);

/// Per-slot record of the checkout in progress: its site and time, and,
/// when this checkout was sampled, its backtrace.
#[derive(Debug)]
pub(crate) struct LeakSlot {
    /// The caller of `get()` while the connection is held; null otherwise.
    /// Its low bit is [`REPORTED`] once the scan reported this checkout.
    site: AtomicPtr<Location<'static>>,
    /// When the checkout was taken (stamp nanos); meaningful while `site`
    /// is not null.
    taken_at: AtomicU64,
    /// The backtrace of the checkout in progress, when it was sampled,
    /// with the checkout's time (a scan uses it only for the checkout it
    /// found, by that time). Locked only by a sampled checkout, its return
    /// and a scan that reports; the backtrace is captured before the lock
    /// and resolved after it.
    checkout: Mutex<Option<Checkout>>,
    /// Whether `checkout` holds a record: the return takes the lock only
    /// then. Written by the slot's owner (the checkout that samples, its
    /// return) with Relaxed stores the owner itself reads back.
    traced: AtomicBool,
}

impl Default for LeakSlot {
    fn default() -> Self {
        Self {
            site: AtomicPtr::new(ptr::null_mut()),
            taken_at: AtomicU64::new(0),
            checkout: Mutex::new(None),
            traced: AtomicBool::new(false),
        }
    }
}

/// A sampled checkout's backtrace, in its slot.
#[derive(Debug)]
struct Checkout {
    /// The checkout's time (stamp nanos), which names the checkout.
    taken_at: u64,
    /// Unresolved: frame addresses only.
    backtrace: Arc<Backtrace>,
}

/// A leak the scan found.
pub(crate) struct Leak {
    pub(crate) held: Duration,
    pub(crate) site: &'static Location<'static>,
    /// The checkout's time (stamp nanos), which names it.
    taken_at: u64,
    /// The resolved application frames, with backtraces on.
    pub(crate) frames: Option<Frames>,
}

/// The frames a leak report shows.
pub(crate) struct Frames {
    /// The application frames, one per line.
    pub(crate) text: String,
    /// Whether they are this checkout's own, or its site's latest sampled
    /// checkout's (see the module docs).
    pub(crate) own: bool,
}

/// How many of a call site's checkouts on one thread pass between two
/// captured backtraces (the first is always captured).
pub(crate) const SAMPLE_EVERY: u32 = 256;

/// How many call sites each thread counts checkouts for; a thread that
/// checks out from more sites in turn forgets the oldest, and captures
/// its next checkout as a first one.
const SITES_PER_THREAD: usize = 16;

/// One thread's countdown to its next captured backtrace, per call site:
/// a few plain compares on the thread's own cache line per checkout.
pub(crate) struct Sampler {
    sites: [Cell<usize>; SITES_PER_THREAD],
    left: [Cell<u32>; SITES_PER_THREAD],
    /// The entry the next new site replaces (round robin).
    next: Cell<usize>,
}

impl Sampler {
    const fn new() -> Self {
        #[allow(clippy::declare_interior_mutable_const)]
        const NONE: Cell<usize> = Cell::new(0);
        #[allow(clippy::declare_interior_mutable_const)]
        const ZERO: Cell<u32> = Cell::new(0);
        Self {
            sites: [NONE; SITES_PER_THREAD],
            left: [ZERO; SITES_PER_THREAD],
            next: Cell::new(0),
        }
    }

    /// Whether this checkout at `site` (its address) is captured: the
    /// first at a site new to this thread, then one in [`SAMPLE_EVERY`].
    #[inline]
    fn due(&self, site: usize) -> bool {
        for (s, left) in self.sites.iter().zip(&self.left) {
            if s.get() == site {
                let n = left.get() - 1;
                if n == 0 {
                    left.set(SAMPLE_EVERY);
                    return true;
                }
                left.set(n);
                return false;
            }
        }
        let i = self.next.get();
        self.sites[i].set(site);
        self.left[i].set(SAMPLE_EVERY);
        self.next.set((i + 1) % SITES_PER_THREAD);
        true
    }
}

std::thread_local! {
    static SAMPLER: Sampler = const { Sampler::new() };
}

/// Whether the checkout this thread makes now at `site` captures its
/// backtrace (see [`Sampler`]); `true` when the thread's storage is gone.
#[inline]
pub(crate) fn sample_due(site: &'static Location<'static>) -> bool {
    let site = ptr::from_ref(site).addr();
    SAMPLER.try_with(|s| s.due(site)).unwrap_or(true)
}

/// The latest sampled backtrace of each call site, process-wide (the
/// sampler's countdowns are per thread, not per pool, so the trace a site
/// left through one pool serves a report through another): what a report
/// shows for a leaked checkout that was not sampled itself. Written once
/// per sampled checkout, read by reports; one entry per call site of the
/// program at most.
static SITE_TRACES: Mutex<Option<HashMap<usize, Arc<Backtrace>>>> = Mutex::new(None);

fn store_site_trace(site: &'static Location<'static>, trace: Arc<Backtrace>) {
    lock(&SITE_TRACES)
        .get_or_insert_with(HashMap::new)
        .insert(ptr::from_ref(site).addr(), trace);
}

fn latest_site_trace(site: &'static Location<'static>) -> Option<Arc<Backtrace>> {
    lock(&SITE_TRACES)
        .as_ref()?
        .get(&ptr::from_ref(site).addr())
        .cloned()
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
            taken_at,
            frames: None,
        })
    }

    /// Samples a checkout's backtrace (leak detection on, with
    /// backtraces): when [`sample_due`], captures it into this slot and as
    /// its site's latest (process-wide).
    #[inline]
    pub(crate) fn taken(&self, site: &'static Location<'static>, now: Stamp) {
        if sample_due(site) {
            self.trace(site, now);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace(&self, site: &'static Location<'static>, now: Stamp) {
        let backtrace = Arc::new(capture());
        store_site_trace(site, backtrace.clone());
        let checkout = Checkout {
            taken_at: now.nanos(),
            backtrace,
        };
        let previous = lock(&self.checkout).replace(checkout);
        // A slot's checkout always ends in `returned` before the next one.
        debug_assert!(previous.is_none(), "checkout recorded twice");
        // Relaxed: read back by this slot's owner (its return).
        self.traced.store(true, Ordering::Relaxed);
    }

    /// Drops a sampled checkout's backtrace at its return (with
    /// backtraces); nothing when this checkout was not sampled.
    #[inline]
    pub(crate) fn returned(&self) {
        // Relaxed: written by this slot's owner, which is the caller.
        if self.traced.load(Ordering::Relaxed) {
            self.traced.store(false, Ordering::Relaxed);
            let checkout = lock(&self.checkout).take();
            // The backtrace is freed here, outside the lock.
            drop(checkout);
        }
    }

    /// Reports this slot's checkout if it is past `threshold` and was not
    /// reported yet ([`check_site`](Self::check_site)), with the
    /// application's frames: this checkout's own when it was sampled, else
    /// its site's latest.
    pub(crate) fn check(&self, now: Stamp, threshold: Duration) -> Option<Leak> {
        let mut leak = self.check_site(now, threshold)?;
        let own = {
            let guard = lock(&self.checkout);
            guard
                .as_ref()
                .filter(|c| c.taken_at == leak.taken_at)
                .map(|c| c.backtrace.clone())
        };
        let (trace, is_own) = match own {
            Some(trace) => (Some(trace), true),
            None => (latest_site_trace(leak.site), false),
        };
        if let Some(trace) = trace {
            // Resolving (symbols, files, lines) is the slow part: unlocked,
            // on a copy (the slot's record stays unresolved).
            let mut trace = (*trace).clone();
            trace.resolve();
            leak.frames = Some(Frames {
                text: caller_frames(&trace),
                own: is_own,
            });
        }
        Some(leak)
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
    use super::{is_internal, Sampler, SAMPLE_EVERY, SITES_PER_THREAD};

    #[test]
    fn each_site_is_sampled_first_then_one_in_n() {
        let s = Sampler::new();
        let at: Vec<u32> = (0..2 * SAMPLE_EVERY).filter(|_| s.due(8)).collect();
        assert_eq!(at, [0, SAMPLE_EVERY], "the first, then one in SAMPLE_EVERY");
        // Another site starts with its own first capture.
        assert!(s.due(16));
        assert!(!s.due(16));
        assert!(
            s.due(8),
            "the first site's countdown went on: its checkout 2 x SAMPLE_EVERY is captured"
        );
    }

    #[test]
    fn a_thread_with_more_sites_forgets_the_oldest() {
        let s = Sampler::new();
        for site in 1..=SITES_PER_THREAD {
            assert!(s.due(site * 8), "first checkout at a new site");
        }
        assert!(!s.due(8), "still counted");
        assert!(s.due(1000 * 8), "one site more");
        assert!(s.due(8), "the oldest was forgotten: a first checkout again");
    }

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
