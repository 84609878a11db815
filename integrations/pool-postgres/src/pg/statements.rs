//! The pooled client's statement cache: [`PgClient::prepare_cached`] and
//! its counters.

use tokio_postgres::Statement;

use super::cache::StatementCacheStats;
use super::client::PgClient;
use super::error::PgError;
use super::statement::refuse;
use crate::PoolerMode;

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
    /// [`PoolerMode::Session`].
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
        if let Some(statement) = self.statements().named(query) {
            // Its text was looked at when it was prepared.
            return Ok(statement);
        }
        if self.pooler_mode() == PoolerMode::Transaction {
            refuse(query)?;
        }
        let statement = self.observe(self.client().prepare(query).await)?;
        // An evicted statement is dropped here, after the cache's lock.
        drop(self.statements().prepared_into(query, statement.clone()));
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
