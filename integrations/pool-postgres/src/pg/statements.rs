//! The pooled client's statement cache: [`PgClient::prepare_cached`] and
//! its counters.

use std::sync::Arc;

use tokio_postgres::types::Type;
use tokio_postgres::Statement;

use super::cache::{StatementCache, StatementCacheStats};
use super::client::PgClient;
use super::error::PgError;
use super::statement::refuse;
use crate::PoolerMode;

/// A connection's caches: prepared statements by query text (session
/// mode, or a relayed connection), or parameter types by query text (for
/// unnamed statements behind a transaction-mode pooler), with how
/// statements reach the server.
pub(super) struct Statements {
    /// Prepared statements, in [`PoolerMode::Session`].
    named: StatementCache<Statement>,
    /// Parameter types by query text, for unnamed statements behind a
    /// transaction-mode pooler.
    described: StatementCache<Arc<[Type]>>,
    /// Statements go to the server unnamed
    /// ([`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed) under
    /// [`PoolerMode::Transaction`]): text queries run as typed unnamed
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
    fn refuses_named(&self) -> bool {
        self.unnamed && !self.relayed
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
    fn stats(&self) -> StatementCacheStats {
        if self.unnamed {
            self.described.stats()
        } else {
            self.named.stats()
        }
    }

    /// Entries in both caches.
    fn len(&self) -> usize {
        self.named.len() + self.described.len()
    }

    /// Empties both caches (the counts stay).
    fn clear(&self) {
        self.named.clear();
        self.described.clear();
    }
}

impl PgClient {
    /// Prepares a statement, or returns the one this connection already
    /// prepared for the same text.
    ///
    /// The cache belongs to the connection (a statement is only valid on the
    /// connection that prepared it) and goes away with it. It holds at most
    /// [`statement_cache_capacity`](super::PostgresManager::statement_cache_capacity)
    /// statements: a new one past that evicts the least recently used,
    /// which is closed on the server once no one else holds it. With a
    /// capacity of `0` the statement is prepared and returned without being
    /// cached. [`statement_cache_stats`](Self::statement_cache_stats) counts
    /// hits, misses and evictions.
    ///
    /// # Errors
    ///
    /// [`PgError::Db`] if preparing fails;
    /// [`PgError::NamedStatementBehindPooler`] for unnamed statements
    /// ([`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed)) on
    /// a connection that is not relayed (`sslmode=require`, see
    /// [`PostgresManager::pooler_statements`](super::PostgresManager::pooler_statements)),
    /// where a cached named statement would outlive its transaction (query
    /// with the text instead). A relayed connection, and every connection
    /// whose statements pass through, caches statements as in
    /// [`PoolerMode::Session`](crate::PoolerMode::Session).
    /// [`PgError::SessionStateBehindPooler`]: behind a transaction-mode
    /// pooler, the text sets session state.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is cached until the statement is prepared.
    pub async fn prepare_cached(&self, query: &str) -> Result<Statement, PgError> {
        if self.statements().refuses_named() {
            return Err(PgError::NamedStatementBehindPooler);
        }
        if let Some(statement) = self.statements().named.get(query) {
            // Its text was looked at when it was prepared.
            return Ok(statement);
        }
        if self.pooler_mode() == PoolerMode::Transaction {
            refuse(query)?;
        }
        let statement = self.observe(self.client().prepare(query).await)?;
        // An evicted statement is dropped here, after the cache's lock.
        drop(self.statements().named.insert(query, statement.clone()));
        Ok(statement)
    }

    /// The statement cache's hit, miss and eviction counts, its length and
    /// capacity.
    ///
    /// ```no_run
    /// # async fn run(conn: &pool_postgres::PgClient) -> Result<(), pool_postgres::PgError> {
    /// conn.prepare_cached("SELECT $1::int").await?;
    /// conn.prepare_cached("SELECT $1::int").await?;
    /// let stats = conn.statement_cache_stats();
    /// assert_eq!((stats.hits, stats.misses), (1, 1));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// With unnamed statements behind a transaction-mode pooler these count
    /// the cache of parameter types that `query`/`execute` keep instead of
    /// statements.
    pub fn statement_cache_stats(&self) -> StatementCacheStats {
        self.statements().stats()
    }

    /// How many statements (or, behind a pooler, described queries) the
    /// cache holds.
    pub fn statement_cache_len(&self) -> usize {
        self.statements().len()
    }

    /// Empties the statement cache (after a schema change, say). Statements
    /// still held elsewhere stay usable.
    pub fn clear_statement_cache(&self) {
        self.statements().clear();
    }
}

#[cfg(test)]
mod tests {
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
