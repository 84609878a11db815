//! The per-connection statement cache: a bounded LRU with counters, and a
//! connection's two caches (statements, parameter types).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lru::LruCache;
use tokio_postgres::types::Type;
use tokio_postgres::Statement;

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

/// A connection's caches: prepared statements by query text (session
/// mode, or a relayed connection), or parameter types by query text (for
/// unnamed statements behind a transaction-mode pooler), with how
/// statements reach the server.
pub(super) struct Statements {
    /// Prepared statements, in [`PoolerMode::Session`](crate::PoolerMode::Session).
    named: StatementCache<Statement>,
    /// Parameter types by query text, for unnamed statements behind a
    /// transaction-mode pooler.
    described: StatementCache<Arc<[Type]>>,
    /// Statements go to the server unnamed
    /// ([`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed) under
    /// [`PoolerMode::Transaction`](crate::PoolerMode::Transaction)): text queries run as typed unnamed
    /// statements.
    unnamed: bool,
    /// Reaches the pooler through the statement relay, which keeps every
    /// statement unnamed on the server: named statements are safe.
    relayed: bool,
}

impl Statements {
    /// Named statements cached up to `capacity`.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            named: StatementCache::new(capacity),
            described: StatementCache::new(0),
            unnamed: false,
            relayed: false,
        }
    }

    /// Sends statements unnamed: the capacity goes to parameter types.
    pub(super) fn go_unnamed(&mut self) {
        let capacity = self.named.stats().capacity;
        self.named = StatementCache::new(0);
        self.described = StatementCache::new(capacity);
        self.unnamed = true;
    }

    /// Relayed: named statements are cached again, up to the capacity of
    /// the parameter types.
    pub(super) fn go_relayed(&mut self) {
        self.relayed = true;
        self.named = StatementCache::new(self.described.stats().capacity);
    }

    /// Statements go to the server unnamed.
    #[inline]
    pub(super) fn is_unnamed(&self) -> bool {
        self.unnamed
    }

    /// Reaches the pooler through the statement relay.
    #[inline]
    pub(super) fn is_relayed(&self) -> bool {
        self.relayed
    }

    /// A named statement would outlive its transaction: unnamed and not
    /// relayed.
    pub(super) fn refuses_named(&self) -> bool {
        self.unnamed && !self.relayed
    }

    /// The statement prepared for `query`.
    pub(super) fn named(&self, query: &str) -> Option<Statement> {
        self.named.get(query)
    }

    /// Caches the statement prepared for `query`; what it evicts is
    /// returned.
    pub(super) fn prepared_into(&self, query: &str, statement: Statement) -> Option<Statement> {
        self.named.insert(query, statement)
    }

    /// The parameter types cached for `sql`.
    pub(super) fn described(&self, sql: &str) -> Option<Arc<[Type]>> {
        self.described.get(sql)
    }

    /// Caches the parameter types of `sql`; what it evicts is returned.
    pub(super) fn describe_into(&self, sql: &str, types: Arc<[Type]>) -> Option<Arc<[Type]>> {
        self.described.insert(sql, types)
    }

    /// The counts of the cache in use: the parameter types' when unnamed.
    pub(super) fn stats(&self) -> StatementCacheStats {
        if self.unnamed {
            self.described.stats()
        } else {
            self.named.stats()
        }
    }

    /// Entries in both caches.
    pub(super) fn len(&self) -> usize {
        self.named.len() + self.described.len()
    }

    /// Empties both caches (the counts stay).
    pub(super) fn clear(&self) {
        self.named.clear();
        self.described.clear();
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

#[cfg(test)]
mod statements_tests {
    use std::sync::Arc;

    use tokio_postgres::types::Type;

    use super::Statements;

    fn types() -> Arc<[Type]> {
        Arc::from(vec![Type::INT4])
    }

    #[test]
    fn a_new_one_caches_named_statements() {
        let statements = Statements::new(4);
        assert!(!statements.is_unnamed());
        assert!(!statements.is_relayed());
        assert!(!statements.refuses_named());
        let stats = statements.stats();
        assert_eq!(
            (stats.capacity, stats.len, stats.hits, stats.misses),
            (4, 0, 0, 0)
        );
    }

    #[test]
    fn unnamed_moves_the_capacity_to_parameter_types_and_counts_them() {
        let mut statements = Statements::new(4);
        statements.go_unnamed();
        assert!(statements.is_unnamed());
        assert!(statements.refuses_named());
        assert_eq!(statements.named.stats().capacity, 0);
        assert_eq!(statements.stats().capacity, 4);
        assert!(statements.described("SELECT $1").is_none());
        assert!(statements.describe_into("SELECT $1", types()).is_none());
        assert_eq!(
            statements.described("SELECT $1").as_deref(),
            Some(&[Type::INT4][..])
        );
        let stats = statements.stats();
        assert_eq!((stats.hits, stats.misses, stats.len), (1, 1, 1));
        assert_eq!(statements.len(), 1);
    }

    #[test]
    fn relayed_caches_named_statements_again_at_the_same_capacity() {
        let mut statements = Statements::new(3);
        statements.go_unnamed();
        statements.go_relayed();
        assert!(statements.is_unnamed());
        assert!(statements.is_relayed());
        assert!(!statements.refuses_named());
        assert_eq!(statements.named.stats().capacity, 3);
        // The counts shown stay the parameter types' while unnamed.
        assert_eq!(statements.stats().capacity, 3);
    }

    #[test]
    fn clear_empties_both_and_keeps_the_counts() {
        let mut statements = Statements::new(2);
        statements.go_unnamed();
        drop(statements.describe_into("SELECT $1", types()));
        drop(statements.described("SELECT $1"));
        statements.clear();
        assert_eq!(statements.len(), 0);
        let stats = statements.stats();
        assert_eq!((stats.hits, stats.len), (1, 0));
    }
}
