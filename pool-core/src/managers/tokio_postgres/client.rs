//! The pooled client: a `tokio_postgres::Client` plus transaction tracking,
//! a statement cache and a cancel handle.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::{CancelToken, Client, Error, Statement};

use super::cache::{StatementCache, StatementCacheStats};
use super::timeout::QueryError;
use super::transaction::{PgTransaction, PgTransactionBuilder};

/// Sends a cancel request for the query running behind a token, over a new
/// connection made with the manager's TLS connector.
pub(super) type Canceller = Arc<
    dyn Fn(CancelToken) -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send>> + Send + Sync,
>;

/// A pooled `tokio_postgres` connection.
///
/// Dereferences to [`Client`] for queries. Start transactions through
/// [`transaction`](Self::transaction) or
/// [`build_transaction`](Self::build_transaction) (the method syntax
/// `conn.transaction()` finds these first), so that the
/// [`Rollback`](super::ResetMode::Rollback) reset mode knows about them.
pub struct PgClient {
    client: Client,
    cache: StatementCache<Statement>,
    canceller: Canceller,
    cancel_timeout: Duration,
    /// A transaction begun through this wrapper has not been committed or
    /// rolled back through it. Only touched through `&mut self` (or the
    /// `&mut` borrow a `PgTransaction` holds).
    tx_open: bool,
    /// A query run by `with_timeout` was abandoned; the connection must not
    /// be reused. Relaxed is enough: the pool reads it after taking the
    /// connection back, and the return itself orders the two.
    abandoned: AtomicBool,
}

impl PgClient {
    pub(super) fn new(
        client: Client,
        cache_capacity: usize,
        canceller: Canceller,
        cancel_timeout: Duration,
    ) -> Self {
        Self {
            client,
            cache: StatementCache::new(cache_capacity),
            canceller,
            cancel_timeout,
            tx_open: false,
            abandoned: AtomicBool::new(false),
        }
    }

    /// The underlying client (also reachable through `Deref`).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Begins a transaction, like [`Client::transaction`], and marks the
    /// connection dirty until the returned [`PgTransaction`] is committed or
    /// rolled back.
    ///
    /// # Errors
    ///
    /// The driver's error if `START TRANSACTION` fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for the pool: the mark is set before `START TRANSACTION`
    /// is sent, so a call dropped half-way leaves a connection that is
    /// rolled back on return.
    pub async fn transaction(&mut self) -> Result<PgTransaction<'_>, Error> {
        self.build_transaction().start().await
    }

    /// A builder for a transaction with custom settings, like
    /// [`Client::build_transaction`]; tracked like
    /// [`transaction`](Self::transaction).
    pub fn build_transaction(&mut self) -> PgTransactionBuilder<'_> {
        let PgClient {
            client, tx_open, ..
        } = self;
        PgTransactionBuilder::new(client.build_transaction(), tx_open)
    }

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
    /// The driver's error if preparing fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is cached until the statement is prepared.
    pub async fn prepare_cached(&self, query: &str) -> Result<Statement, Error> {
        if let Some(statement) = self.cache.get(query) {
            return Ok(statement);
        }
        let statement = self.client.prepare(query).await?;
        // An evicted statement is dropped here, after the cache's lock.
        drop(self.cache.insert(query, statement.clone()));
        Ok(statement)
    }

    /// The statement cache's hit, miss and eviction counts, its length and
    /// capacity.
    ///
    /// ```no_run
    /// # async fn run(conn: &pool_core::managers::tokio_postgres::PgClient) -> Result<(), tokio_postgres::Error> {
    /// conn.prepare_cached("SELECT $1::int").await?;
    /// conn.prepare_cached("SELECT $1::int").await?;
    /// let stats = conn.statement_cache_stats();
    /// assert_eq!((stats.hits, stats.misses), (1, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn statement_cache_stats(&self) -> StatementCacheStats {
        self.cache.stats()
    }

    /// How many statements the cache holds.
    pub fn statement_cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Empties the statement cache (after a schema change, say). Statements
    /// still held elsewhere stay usable.
    pub fn clear_statement_cache(&self) {
        self.cache.clear();
    }

    /// Runs `query` for at most `limit`; past that, cancels it on the server
    /// and marks this connection so the pool closes it on return.
    ///
    /// Dropping a query's future does not stop the query: the server runs it
    /// to the end and the next user of the connection waits behind it. This
    /// sends PostgreSQL's cancel request (a new connection to the server,
    /// bounded by the manager's
    /// [`cancel_timeout`](super::PostgresManager::cancel_timeout)) and then
    /// retires the connection. It is retired rather than reused because a
    /// cancel request is not tied to a query: one that reaches the server
    /// late would cancel whatever runs on the connection next.
    ///
    /// Do not run further queries on a connection after it timed out; drop
    /// it.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pool_core::managers::tokio_postgres::{PgClient, QueryError};
    /// # async fn run(conn: &PgClient) -> Result<(), QueryError> {
    /// let rows = conn
    ///     .with_timeout(Duration::from_millis(100), conn.query("SELECT pg_sleep(5)", &[]))
    ///     .await;
    /// assert!(matches!(rows, Err(ref e) if e.is_timeout()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QueryError::Db`] if the query fails in time;
    /// [`QueryError::TimedOut`] if the limit passed and the cancel request
    /// was sent; [`QueryError::CancelFailed`] if the limit passed and the
    /// cancel request could not be delivered.
    ///
    /// # Cancel safety
    ///
    /// If this future is dropped, the query is abandoned without a cancel
    /// and the connection is not marked: the same situation as dropping the
    /// bare query future.
    pub async fn with_timeout<F, T>(&self, limit: Duration, query: F) -> Result<T, QueryError>
    where
        F: IntoFuture<Output = Result<T, Error>>,
    {
        match tokio::time::timeout(limit, query).await {
            Ok(result) => result.map_err(QueryError::Db),
            Err(_elapsed) => {
                self.abandoned.store(true, Ordering::Relaxed);
                let cancel = (self.canceller)(self.client.cancel_token());
                match tokio::time::timeout(self.cancel_timeout, cancel).await {
                    Ok(Ok(())) => Err(QueryError::TimedOut { limit }),
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "cancel request for a timed-out query failed");
                        Err(QueryError::CancelFailed {
                            limit,
                            error: Some(error),
                        })
                    }
                    Err(_elapsed) => {
                        tracing::warn!(
                            cancel_timeout = ?self.cancel_timeout,
                            "cancel request for a timed-out query did not finish in time"
                        );
                        Err(QueryError::CancelFailed { limit, error: None })
                    }
                }
            }
        }
    }

    /// Whether a query on this connection was abandoned by
    /// [`with_timeout`](Self::with_timeout); the pool closes such a
    /// connection on return.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Whether a transaction begun through this wrapper was left without a
    /// commit or rollback through it (dropped, leaked, or its end failed or
    /// was cancelled).
    pub fn transaction_open(&self) -> bool {
        self.tx_open
    }

    /// Called after a successful reset.
    pub(super) fn mark_reset(&mut self) {
        self.tx_open = false;
    }
}

impl Deref for PgClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl fmt::Debug for PgClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgClient")
            .field("closed", &self.client.is_closed())
            .field("transaction_open", &self.tx_open)
            .field("abandoned", &self.is_abandoned())
            .field("cached_statements", &self.cache.len())
            .finish_non_exhaustive()
    }
}
