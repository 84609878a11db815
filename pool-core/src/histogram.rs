//! A lock-free log-linear histogram for wait and hold times, sharded by
//! thread. All Relaxed atomics (`sync::stat`): statistics, read as a
//! snapshot that may be a few operations behind.

use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::sync::stat::AtomicU64;
use crate::sync::Ordering;

/// Sub-buckets per power of two: 2^3 = 8, so a bucket spans at most 1/8 of
/// its lower bound and its midpoint is within 1/16 (6.25 %) of any value in
/// it.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// A histogram of nanosecond values: exact below 8 ns, then 8 linear
/// sub-buckets per power of two up to `u64::MAX` ns. Recording is one
/// Relaxed `fetch_add`; percentiles are read from a snapshot of the buckets.
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
    sum: AtomicU64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .finish()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = (v >> (msb - SUB_BITS)) as usize & (SUB - 1);
    (msb - SUB_BITS + 1) as usize * SUB + sub
}

/// The midpoint of a bucket's range.
fn value_of(bucket: usize) -> u64 {
    if bucket < SUB {
        return bucket as u64;
    }
    let group = (bucket / SUB) as u32; // msb - SUB_BITS + 1
    let sub = (bucket % SUB) as u64;
    let shift = group - 1;
    let low = ((SUB as u64) | sub) << shift;
    let width = 1u64 << shift;
    low.saturating_add(width / 2)
}

impl Histogram {
    pub(crate) fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    pub(crate) fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if ns == 0 {
            self.buckets[0].fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(ns, Ordering::Relaxed);
        // A load first: most values are not a new maximum, and a plain load
        // does not take the cache line away from the other cores.
        if ns > self.max.load(Ordering::Relaxed) {
            self.max.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Counts `d` in its bucket only, without the sum and maximum: one
    /// atomic add, for figures that are only ever exported as a
    /// distribution.
    #[cfg(feature = "metrics")]
    #[inline]
    pub(crate) fn record_bucket(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The bucket counts now, with each bucket's representative value in
    /// nanoseconds: for exporting the distribution in batches.
    #[cfg(feature = "metrics")]
    pub(crate) fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .map(|(b, c)| (value_of(b), c.load(Ordering::Relaxed)))
    }

    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Count, sum, max and the given quantiles (see [`summary`]).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn summary_with_zeros<const N: usize>(
        &self,
        zeros: u64,
        quantiles: [f64; N],
    ) -> Summary<N> {
        summary(&[self], zeros, quantiles)
    }
}

/// Count, sum, max and the given quantiles of `hists` taken as one, from one
/// pass, counting `zeros` more zero values than were recorded (the checkouts
/// that did not wait, counted per slot instead).
fn summary<const N: usize>(
    hists: &[impl std::ops::Deref<Target = Histogram>],
    zeros: u64,
    quantiles: [f64; N],
) -> Summary<N> {
    let mut counts = vec![0u64; BUCKETS];
    let (mut sum, mut max) = (0u64, 0u64);
    for h in hists {
        for (total, b) in counts.iter_mut().zip(h.buckets.iter()) {
            *total += b.load(Ordering::Relaxed);
        }
        sum = sum.saturating_add(h.sum.load(Ordering::Relaxed));
        max = max.max(h.max.load(Ordering::Relaxed));
    }
    counts[0] += zeros;
    let count: u64 = counts.iter().sum();
    let mut values = [Duration::ZERO; N];
    if count > 0 {
        for (q, out) in quantiles.iter().zip(values.iter_mut()) {
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for (b, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    *out = Duration::from_nanos(value_of(b).min(max));
                    break;
                }
            }
        }
    }
    Summary {
        count,
        sum: Duration::from_nanos(sum),
        max: Duration::from_nanos(max),
        quantiles: values,
    }
}

/// Shards of the histograms written on checkouts and returns.
pub(crate) const SHARDS: usize = 4;

/// This thread's shard. Threads take shards round-robin the first time they
/// record, so up to `SHARDS` threads (a runtime's workers) each get their
/// own; more share. A thread whose locals are already gone (a guard dropped
/// during thread exit) uses shard 0.
#[inline]
fn thread_shard() -> usize {
    use crate::sync::stat::AtomicUsize;
    use std::cell::Cell;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD
        .try_with(|shard| {
            if shard.get() == usize::MAX {
                shard.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            shard.get()
        })
        .unwrap_or(0)
}

/// A histogram in shards picked by thread, so that checkouts and returns on
/// different runtime workers add to different cache lines (each shard's sum
/// and maximum too: they are padded apart); read as one.
pub(crate) struct Sharded([CachePadded<Histogram>; SHARDS]);

impl std::fmt::Debug for Sharded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("count", &self.0.iter().map(|h| h.count()).sum::<u64>())
            .finish()
    }
}

impl Sharded {
    pub(crate) fn new() -> Self {
        Self(std::array::from_fn(|_| CachePadded::new(Histogram::new())))
    }

    /// The shard this thread records into.
    #[inline]
    pub(crate) fn local(&self) -> &Histogram {
        &self.0[thread_shard()]
    }

    /// Every shard.
    #[cfg(feature = "metrics")]
    pub(crate) fn shards(&self) -> &[CachePadded<Histogram>] {
        &self.0
    }

    /// Count, sum, max and quantiles over all shards (see [`summary`]).
    pub(crate) fn summary_with_zeros<const N: usize>(
        &self,
        zeros: u64,
        quantiles: [f64; N],
    ) -> Summary<N> {
        summary(&self.0, zeros, quantiles)
    }
}

#[derive(Debug)]
pub(crate) struct Summary<const N: usize> {
    pub(crate) count: u64,
    pub(crate) sum: Duration,
    pub(crate) max: Duration,
    pub(crate) quantiles: [Duration; N],
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..10_000u64).chain([1 << 20, 1 << 40, u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last && b < BUCKETS, "{v}");
            last = b;
            let mid = value_of(b) as f64;
            let err = (mid - v as f64).abs() / (v.max(1) as f64);
            assert!(err <= 1.0 / 16.0 + 1e-9, "v={v} mid={mid} err={err}");
        }
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let h = Histogram::new();
        // 1..=1000 microseconds, once each.
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary_with_zeros(0, [0.5, 0.99]);
        assert_eq!(s.count, 1000);
        assert_eq!(s.max, Duration::from_micros(1000));
        let close = |got: Duration, want_us: f64| {
            let got = got.as_nanos() as f64 / 1000.0;
            assert!(
                (got - want_us).abs() / want_us <= 0.0625,
                "got {got}us want {want_us}us"
            );
        };
        close(s.quantiles[0], 500.0);
        close(s.quantiles[1], 990.0);
    }
}
