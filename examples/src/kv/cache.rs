//! The read cache: recently read values kept in process for a short time.
//!
//! Entries expire `ttl` after they were read; a write or delete through the
//! same store removes its key at once. Writes made elsewhere (another
//! process, another store on the same table) show once the entry expires:
//! the TTL bounds how stale a read can be.
//!
//! A read that raced a write must not put the old value back after the write
//! removed it. Every removal bumps a generation number; a read notes the
//! generation before it queries and caches its result only if no removal
//! happened meanwhile.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Where the cache reads the time. Tests swap in a [`ManualClock`].
pub trait Clock: fmt::Debug + Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to; clones share one time.
///
/// ```
/// use std::time::Duration;
/// use pool_examples::kv::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now() - start, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<Instant>>,
}

impl ManualClock {
    /// A clock stopped at the present instant.
    pub fn new() -> Self {
        Self {
            now: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// Moves the time forward.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How the cache has served reads so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads that went to the database.
    pub misses: u64,
    /// Entries held now (some may have expired and not been swept yet).
    pub entries: usize,
}

struct Entry {
    json: Arc<str>,
    expires: Instant,
}

struct Map {
    entries: HashMap<String, Entry>,
    /// Bumped by every removal; see the module docs.
    generation: u64,
}

/// A bounded map of key to JSON text with per-entry expiry.
pub(crate) struct ReadCache {
    map: Mutex<Map>,
    ttl: Duration,
    capacity: usize,
    clock: Arc<dyn Clock>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// The generation a read saw before it queried; see the module docs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket(u64);

impl ReadCache {
    pub(crate) fn new(ttl: Duration, capacity: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            map: Mutex::new(Map {
                entries: HashMap::new(),
                generation: 0,
            }),
            ttl,
            capacity,
            clock,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Map> {
        // The map is consistent after every statement: a panic elsewhere
        // while it was held leaves nothing half-done.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached JSON for `key`, if fresh; otherwise a ticket for
    /// [`insert`](Self::insert) after the database read.
    pub(crate) fn get(&self, key: &str) -> Result<Arc<str>, Ticket> {
        let now = self.clock.now();
        let mut map = self.lock();
        match map.entries.get(key) {
            Some(entry) if entry.expires > now => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Ok(entry.json.clone())
            }
            found => {
                if found.is_some() {
                    map.entries.remove(key);
                }
                self.misses.fetch_add(1, Ordering::Relaxed);
                Err(Ticket(map.generation))
            }
        }
    }

    /// Caches what a read found, unless something was removed since the
    /// read began (it may have been this key) or the cache is off.
    pub(crate) fn insert(&self, ticket: Ticket, key: &str, json: Arc<str>) {
        if self.capacity == 0 || self.ttl.is_zero() {
            return;
        }
        let now = self.clock.now();
        let mut map = self.lock();
        if map.generation != ticket.0 {
            return;
        }
        if map.entries.len() >= self.capacity && !map.entries.contains_key(key) {
            map.entries.retain(|_, e| e.expires > now);
            if map.entries.len() >= self.capacity {
                return; // full of fresh entries: this one is not kept
            }
        }
        let expires = now + self.ttl;
        map.entries.insert(key.to_owned(), Entry { json, expires });
    }

    /// Forgets `key` (after a write or delete).
    pub(crate) fn remove(&self, key: &str) {
        let mut map = self.lock();
        map.generation += 1;
        map.entries.remove(key);
    }

    /// Forgets everything (after a copy into this store, or a drop).
    pub(crate) fn clear(&self) {
        let mut map = self.lock();
        map.generation += 1;
        map.entries.clear();
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.lock().entries.len(),
        }
    }
}

impl fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadCache")
            .field("ttl", &self.ttl)
            .field("capacity", &self.capacity)
            .field("clock", &self.clock)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize) -> (ReadCache, ManualClock) {
        let clock = ManualClock::new();
        let cache = ReadCache::new(Duration::from_secs(1), capacity, Arc::new(clock.clone()));
        (cache, clock)
    }

    #[test]
    fn a_read_that_raced_a_removal_is_not_cached() {
        let (cache, _) = cache(8);
        let Err(ticket) = cache.get("k") else {
            panic!("an empty cache had `k`");
        };
        // A write lands and forgets `k` while the read is in flight.
        cache.remove("k");
        cache.insert(ticket, "k", "old".into());
        assert!(cache.get("k").is_err(), "the raced read's value was cached");

        let Err(ticket) = cache.get("k") else {
            panic!("`k` appeared");
        };
        cache.insert(ticket, "k", "new".into());
        assert_eq!(cache.get("k").ok().as_deref(), Some("new"));
    }

    #[test]
    fn a_full_cache_sweeps_expired_entries_and_never_grows_past_capacity() {
        let (cache, clock) = cache(2);
        for key in ["a", "b", "c"] {
            let Err(ticket) = cache.get(key) else {
                panic!("{key} cached before it was read");
            };
            cache.insert(ticket, key, key.into());
        }
        assert_eq!(cache.stats().entries, 2);
        assert!(
            cache.get("c").is_err(),
            "a third entry went past capacity 2"
        );

        clock.advance(Duration::from_secs(1));
        let Err(ticket) = cache.get("c") else {
            panic!("`c` cached");
        };
        cache.insert(ticket, "c", "c".into());
        assert_eq!(cache.get("c").ok().as_deref(), Some("c"));
        assert_eq!(cache.stats().entries, 1, "expired entries were not swept");
    }

    #[test]
    fn a_zero_ttl_or_capacity_caches_nothing() {
        for (ttl, capacity) in [(Duration::ZERO, 8), (Duration::from_secs(1), 0)] {
            let cache = ReadCache::new(ttl, capacity, Arc::new(ManualClock::new()));
            let Err(ticket) = cache.get("k") else {
                panic!("an empty cache had `k`");
            };
            cache.insert(ticket, "k", "v".into());
            assert!(cache.get("k").is_err());
        }
    }
}
