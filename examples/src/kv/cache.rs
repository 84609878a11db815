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
