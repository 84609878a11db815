//! The per-connection statement cache: a bounded LRU with counters.

use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard, PoisonError};

use lru::LruCache;

/// Counters of a connection's statement cache, from
/// [`PgClient::statement_cache_stats`](super::PgClient::statement_cache_stats).
///
/// A hit is a lookup that found the query; a miss is one that did not (the
/// statement is then prepared, or described in
/// [`PoolerMode::Transaction`](crate::PoolerMode::Transaction)); an eviction
/// is an entry dropped to make room for a newer one (the least recently
/// used goes first). The counts start at zero when the connection opens and
/// are not reset by [`PgClient::clear_statement_cache`](super::PgClient::clear_statement_cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StatementCacheStats {
    /// Lookups that found the query.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries dropped to make room, least recently used first.
    pub evictions: u64,
    /// Entries held now.
    pub len: usize,
    /// The most entries it holds (`0`: caching is off).
    pub capacity: usize,
}

struct Inner<V> {
    /// `None` when the capacity is zero (caching off).
    map: Option<LruCache<Box<str>, V>>,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// Values by query text, least recently used evicted first.
///
/// The lock is held only to look up or insert, never across an await.
pub(super) struct StatementCache<V> {
    capacity: usize,
    inner: Mutex<Inner<V>>,
}

impl<V: Clone> StatementCache<V> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner {
                map: NonZeroUsize::new(capacity).map(LruCache::new),
                hits: 0,
                misses: 0,
                evictions: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        // Each operation is one LRU call plus counter bumps, so a panic
        // while holding the lock cannot leave the map half-updated: a
        // poisoned lock is safe to keep using.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value for `query`, marked most recently used; counts a hit or a
    /// miss.
    pub(super) fn get(&self, query: &str) -> Option<V> {
        let mut inner = self.lock();
        let found = inner.map.as_mut().and_then(|map| map.get(query).cloned());
        if found.is_some() {
            inner.hits += 1;
        } else {
            inner.misses += 1;
        }
        found
    }

    /// Caches `value` for `query`, evicting the least recently used entry
    /// when full. The evicted value is returned so that it is dropped after
    /// the lock is released.
    pub(super) fn insert(&self, query: &str, value: V) -> Option<V> {
        let mut inner = self.lock();
        let map = inner.map.as_mut()?;
        let evicted = match map.push(query.into(), value) {
            // The same query, cached meanwhile by a concurrent caller:
            // replaced, nothing evicted.
            Some((old_key, old)) if &*old_key == query => return Some(old),
            Some((_, old)) => Some(old),
            None => None,
        };
        if evicted.is_some() {
            inner.evictions += 1;
        }
        evicted
    }

    pub(super) fn stats(&self) -> StatementCacheStats {
        let inner = self.lock();
        StatementCacheStats {
            hits: inner.hits,
            misses: inner.misses,
            evictions: inner.evictions,
            len: inner.map.as_ref().map_or(0, LruCache::len),
            capacity: self.capacity,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.lock().map.as_ref().map_or(0, LruCache::len)
    }

    /// Whether `query` is cached, without touching its recency or the
    /// counters.
    #[cfg(test)]
    pub(super) fn contains(&self, query: &str) -> bool {
        self.lock()
            .map
            .as_ref()
            .is_some_and(|map| map.contains(query))
    }

    pub(super) fn clear(&self) {
        // Dropped outside the lock: dropping a statement queues its close.
        let old = self.lock().map.as_mut().map(|map| {
            let mut drained = Vec::with_capacity(map.len());
            while let Some(entry) = map.pop_lru() {
                drained.push(entry);
            }
            drained
        });
        drop(old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_and_counts() {
        let cache = StatementCache::new(2);
        assert_eq!(cache.get("a"), None);
        assert_eq!(cache.insert("a", 1), None);
        assert_eq!(cache.insert("b", 2), None);
        // "a" is used again, so "b" is now the least recently used.
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.insert("c", 3), Some(2));
        assert!(!cache.contains("b"));
        assert!(cache.contains("a") && cache.contains("c"));
        assert_eq!(cache.get("b"), None);
        assert_eq!(
            cache.stats(),
            StatementCacheStats {
                hits: 1,
                misses: 2,
                evictions: 1,
                len: 2,
                capacity: 2,
            }
        );
    }

    #[test]
    fn the_same_query_twice_replaces_without_evicting() {
        let cache = StatementCache::new(1);
        cache.insert("a", 1);
        assert_eq!(cache.insert("a", 2), Some(1));
        assert_eq!(cache.get("a"), Some(2));
        assert_eq!(cache.stats().evictions, 0);
    }

    #[test]
    fn capacity_zero_caches_nothing_and_counts_misses() {
        let cache = StatementCache::new(0);
        assert_eq!(cache.insert("a", 1), None);
        assert_eq!(cache.get("a"), None);
        let stats = cache.stats();
        assert_eq!((stats.len, stats.misses, stats.capacity), (0, 1, 0));
    }

    #[test]
    fn clear_keeps_the_counts() {
        let cache = StatementCache::new(4);
        cache.insert("a", 1);
        cache.get("a");
        cache.clear();
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.stats().hits, 1);
    }
}
