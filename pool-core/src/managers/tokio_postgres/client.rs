//! The pooled client: a `tokio_postgres::Client` plus transaction tracking,
//! a statement cache and a cancel handle.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{CancelToken, Client, Error, Row, SimpleQueryMessage, Statement, ToStatement};

use super::cache::{StatementCache, StatementCacheStats};
use super::error::PgError;
use super::failover::{is_server_gone, HostMark};
use super::session::{session_state, TxChange};
use super::timeout::QueryError;
use super::transaction::{PgTransaction, PgTransactionBuilder};
use crate::managers::fleet::FleetSeat;
use crate::PoolerMode;

/// Sends a cancel request for the query running behind a token, over a new
/// connection made with the manager's TLS connector (or, for a relayed
/// connection, straight to the pooler). `Err(None)`: no connection could be
/// made to send it, and the cause was logged.
pub(super) type Canceller = Arc<
    dyn Fn(CancelToken) -> Pin<Box<dyn Future<Output = Result<(), Option<Error>>> + Send>>
        + Send
        + Sync,
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
    /// Prepared statements, in [`PoolerMode::Session`].
    cache: StatementCache<Statement>,
    /// Parameter types by query text, in [`PoolerMode::Transaction`].
    described: StatementCache<Arc<[Type]>>,
    pooler_mode: PoolerMode,
    /// Reaches the pooler through the statement relay, which keeps every
    /// statement unnamed on the server: named statements are safe.
    relayed: bool,
    /// The fleet budget ticket this connection holds.
    ticket: Option<i32>,
    /// The ticket counted for its instance's fair share; `None` without
    /// fair share, and once the connection is given back.
    seat: Option<FleetSeat>,
    /// Behind a pooler: a `BEGIN` sent as text was not yet followed by its
    /// end, or a describe's own transaction is open. Read by the reset on
    /// return (after the return orders it) and by the describe on the same
    /// client: Relaxed.
    raw_tx: AtomicBool,
    /// One describe at a time on this connection, so that two tasks sharing
    /// it do not interleave their `BEGIN`/`COMMIT`s.
    describing: tokio::sync::Mutex<()>,
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
    /// Its server's epoch at connect, and whether a query here said the
    /// server is read-only or going away (see [`is_retired`](Self::is_retired)).
    host: HostMark,
    /// The task that drives the socket: aborted when an abandoned
    /// connection is dropped, which closes the socket at once, and awaited
    /// by [`close`](Self::close).
    driver: Option<tokio::task::JoinHandle<()>>,
    /// What the server reported at startup about its role.
    reported: ReportedRole,
}

/// What a server said about its role in its startup parameter statuses
/// (PostgreSQL 14 and later send both; older servers neither).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReportedRole {
    /// `in_hot_standby`: `Some(true)` on a standby.
    pub(crate) in_hot_standby: Option<bool>,
    /// `default_transaction_read_only`.
    pub(crate) default_read_only: Option<bool>,
}

impl ReportedRole {
    /// Reads the two parameter statuses as the server spelt them (`on` or
    /// `off`); anything else counts as not reported.
    pub(super) fn from_params(in_hot_standby: Option<&str>, read_only: Option<&str>) -> Self {
        let flag = |v: Option<&str>| match v {
            Some("on") => Some(true),
            Some("off") => Some(false),
            _ => None,
        };
        Self {
            in_hot_standby: flag(in_hot_standby),
            default_read_only: flag(read_only),
        }
    }
}

impl PgClient {
    pub(super) fn new(
        client: Client,
        cache_capacity: usize,
        canceller: Canceller,
        cancel_timeout: Duration,
        pooler_mode: PoolerMode,
        ticket: Option<i32>,
        host: HostMark,
    ) -> Self {
        let (statements, described) = match pooler_mode {
            PoolerMode::Transaction => (0, cache_capacity),
            _ => (cache_capacity, 0),
        };
        Self {
            client,
            cache: StatementCache::new(statements),
            described: StatementCache::new(described),
            pooler_mode,
            relayed: false,
            ticket,
            seat: None,
            raw_tx: AtomicBool::new(false),
            describing: tokio::sync::Mutex::new(()),
            canceller,
            cancel_timeout,
            tx_open: false,
            abandoned: AtomicBool::new(false),
            host,
            driver: None,
            reported: ReportedRole::default(),
        }
    }

    /// Adds what the server reported about its role at startup.
    pub(super) fn with_reported_role(mut self, reported: ReportedRole) -> Self {
        self.reported = reported;
        self
    }

    /// What the server reported about its role at startup.
    pub(crate) fn reported_role(&self) -> ReportedRole {
        self.reported
    }

    /// Marks the connection as relayed (see [`is_relayed`](Self::is_relayed)):
    /// named statements are safe, so [`prepare_cached`](Self::prepare_cached)
    /// caches them, up to the same capacity as the parameter types.
    pub(super) fn relayed(mut self) -> Self {
        self.relayed = true;
        self.cache = StatementCache::new(self.described.stats().capacity);
        self
    }

    /// Adds the handle of the task that drives the socket, aborted when an
    /// abandoned connection is dropped.
    /// Counts the connection's ticket for its instance's fair share.
    pub(super) fn with_fleet_seat(mut self, seat: Option<FleetSeat>) -> Self {
        self.seat = seat;
        self
    }

    /// Whether this connection is to be given back to the fleet budget
    /// (closed on return) for an instance below its share; once `true`, it
    /// no longer counts as held. No I/O: one atomic load when nothing is
    /// to be given back.
    pub(super) fn gives_back_ticket(&mut self) -> bool {
        if self.seat.as_ref().is_some_and(FleetSeat::give_back) {
            self.seat = None;
            return true;
        }
        false
    }

    pub(super) fn with_driver(mut self, driver: tokio::task::JoinHandle<()>) -> Self {
        self.driver = Some(driver);
        self
    }

    /// Closes the session and waits until its socket is closed: dropping
    /// the client makes the driver send `Terminate` and end (an abandoned
    /// one, whose socket may be stuck, is aborted instead).
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the driver goes on to its end by itself.
    pub(super) async fn close(mut self) {
        let driver = self.driver.take();
        let abandoned = self.is_abandoned();
        drop(self);
        if let Some(driver) = driver {
            if abandoned {
                driver.abort();
            }
            // Its end, or its abort: the socket is closed either way.
            let _ = driver.await;
        }
    }

    /// Marks the connection abandoned while a check runs (`true`), and
    /// clears the mark once it answered (`false`): a check dropped by its
    /// timeout leaves the mark, so the pool closes the connection and its
    /// socket goes with it.
    pub(super) fn set_abandoned(&self, abandoned: bool) {
        self.abandoned.store(abandoned, Ordering::Relaxed);
    }

    /// Passes `result` through; an error that says the server turned
    /// read-only or is going away retires this connection and the others
    /// opened to the same server before it.
    fn observe<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(error) = &result {
            if is_server_gone(error) {
                self.host.server_gone();
            }
        }
        result
    }

    /// Whether this connection is retired: a query through this wrapper
    /// failed with a SQLSTATE that says the server turned read-only
    /// (`25006`) or is shutting down or gone (`57P01`, `57P02`, `57P03`,
    /// class `08`), or such an error on another connection to the same
    /// server came after this one connected. The pool closes a retired
    /// connection on return and refuses it at validation; see the
    /// [module docs](super#failover).
    pub fn is_retired(&self) -> bool {
        self.host.is_retired()
    }

    /// Whether a query on this connection itself failed with a SQLSTATE
    /// that says its server turned read-only or is going away.
    pub(crate) fn saw_server_gone(&self) -> bool {
        self.host.saw_server_gone()
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
    /// [`PgError::Db`] if preparing fails;
    /// [`PgError::NamedStatementBehindPooler`] under
    /// [`PoolerMode::Transaction`] on a connection that is not relayed
    /// (`sslmode=require`, see
    /// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode)),
    /// where a cached named statement would outlive its transaction (query
    /// with the text instead). A relayed connection caches statements as
    /// in [`PoolerMode::Session`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is cached until the statement is prepared.
    pub async fn prepare_cached(&self, query: &str) -> Result<Statement, PgError> {
        if self.pooler_mode == PoolerMode::Transaction && !self.relayed {
            return Err(PgError::NamedStatementBehindPooler);
        }
        if let Some(statement) = self.cache.get(query) {
            return Ok(statement);
        }
        let statement = self.observe(self.client.prepare(query).await)?;
        // An evicted statement is dropped here, after the cache's lock.
        drop(self.cache.insert(query, statement.clone()));
        Ok(statement)
    }

    /// The statement cache's hit, miss and eviction counts, its length and
    /// capacity.
    ///
    /// ```no_run
    /// # async fn run(conn: &pool_core::managers::tokio_postgres::PgClient) -> Result<(), pool_core::managers::tokio_postgres::PgError> {
    /// conn.prepare_cached("SELECT $1::int").await?;
    /// conn.prepare_cached("SELECT $1::int").await?;
    /// let stats = conn.statement_cache_stats();
    /// assert_eq!((stats.hits, stats.misses), (1, 1));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Under [`PoolerMode::Transaction`] these count the cache of parameter
    /// types that `query`/`execute` keep instead of statements.
    pub fn statement_cache_stats(&self) -> StatementCacheStats {
        match self.pooler_mode {
            PoolerMode::Transaction => self.described.stats(),
            _ => self.cache.stats(),
        }
    }

    /// How many statements (or, behind a pooler, described queries) the
    /// cache holds.
    pub fn statement_cache_len(&self) -> usize {
        self.cache.len() + self.described.len()
    }

    /// Empties the statement cache (after a schema change, say). Statements
    /// still held elsewhere stay usable.
    pub fn clear_statement_cache(&self) {
        self.cache.clear();
        self.described.clear();
    }

    /// The pooler mode this connection was opened with.
    pub fn pooler_mode(&self) -> PoolerMode {
        self.pooler_mode
    }

    /// Whether this connection reaches the pooler through the statement
    /// relay of [`PoolerMode::Transaction`], which sends every statement to
    /// the server as the unnamed one (see
    /// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode)).
    pub fn is_relayed(&self) -> bool {
        self.relayed
    }

    /// The fleet budget ticket this connection holds (the advisory lock's
    /// second key), if the manager has a
    /// [`fleet_budget`](super::PostgresManager::fleet_budget).
    pub fn fleet_ticket(&self) -> Option<u32> {
        self.ticket.and_then(|t| u32::try_from(t).ok())
    }

    /// Runs a query and returns its rows, like [`Client::query`].
    ///
    /// Under [`PoolerMode::Session`] this is `Client::query`. Under
    /// [`PoolerMode::Transaction`], a query given as text runs as an
    /// unnamed statement, safe behind a transaction-mode pooler (see
    /// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode));
    /// a [`Statement`] you prepared yourself is run as it is (only valid
    /// within the transaction that prepared it).
    ///
    /// # Errors
    ///
    /// The driver's error.
    ///
    /// # Cancel safety
    ///
    /// As `Client::query`; behind a pooler, a call dropped during the
    /// describe of a new query text leaves a transaction open, which the
    /// [`Rollback`](super::ResetMode::Rollback) reset ends on return.
    pub async fn query<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement) {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                self.observe(self.client.query_typed(sql, &typed).await)
            }
            None => self.observe(self.client.query(statement, params).await),
        }
    }

    /// Runs a query that returns exactly one row, like
    /// [`Client::query_one`]; behind a pooler, as [`query`](Self::query).
    ///
    /// # Errors
    ///
    /// The driver's error, also when the query returns no row or more than
    /// one.
    ///
    /// # Cancel safety
    ///
    /// As [`query`](Self::query).
    pub async fn query_one<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement) {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                self.observe(self.client.query_typed_one(sql, &typed).await)
            }
            None => self.observe(self.client.query_one(statement, params).await),
        }
    }

    /// Runs a query that returns at most one row, like
    /// [`Client::query_opt`]; behind a pooler, as [`query`](Self::query).
    ///
    /// # Errors
    ///
    /// The driver's error, also when the query returns more than one row.
    ///
    /// # Cancel safety
    ///
    /// As [`query`](Self::query).
    pub async fn query_opt<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement) {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                self.observe(self.client.query_typed_opt(sql, &typed).await)
            }
            None => self.observe(self.client.query_opt(statement, params).await),
        }
    }

    /// Runs a statement and returns the number of rows it changed, like
    /// [`Client::execute`]; behind a pooler, as [`query`](Self::query).
    ///
    /// # Errors
    ///
    /// The driver's error.
    ///
    /// # Cancel safety
    ///
    /// As [`query`](Self::query).
    pub async fn execute<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement) {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                self.observe(self.client.execute_typed(sql, &typed).await)
            }
            None => self.observe(self.client.execute(statement, params).await),
        }
    }

    /// Runs statements separated by `;` with the simple protocol, like
    /// [`Client::batch_execute`]. Behind a pooler, statements that set
    /// session state are logged at `WARN` (see
    /// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode)).
    ///
    /// # Errors
    ///
    /// The driver's error.
    ///
    /// # Cancel safety
    ///
    /// As `Client::batch_execute`.
    pub async fn batch_execute(&self, query: &str) -> Result<(), Error> {
        self.inspect(query);
        self.observe(self.client.batch_execute(query).await)
    }

    /// Runs statements with the simple protocol and returns their text
    /// rows, like [`Client::simple_query`]; behind a pooler, inspected as
    /// [`batch_execute`](Self::batch_execute).
    ///
    /// # Errors
    ///
    /// The driver's error.
    ///
    /// # Cancel safety
    ///
    /// As `Client::simple_query`.
    pub async fn simple_query(&self, query: &str) -> Result<Vec<SimpleQueryMessage>, Error> {
        self.inspect(query);
        self.observe(self.client.simple_query(query).await)
    }

    /// Behind a pooler, the text of a query given as text, after looking at
    /// what it does to the session. `None`: run it as the driver does.
    fn pooled_text<'q, T: ?Sized + PgStatement>(&self, statement: &'q T) -> Option<&'q str> {
        if self.pooler_mode != PoolerMode::Transaction {
            return None;
        }
        let sql = statement.text()?;
        self.inspect(sql);
        Some(sql)
    }

    /// Behind a pooler: warns about session state, follows `BEGIN`/`COMMIT`
    /// sent as text.
    fn inspect(&self, sql: &str) {
        if self.pooler_mode != PoolerMode::Transaction {
            return;
        }
        let found = session_state(sql);
        if let Some(kind) = found.session_state {
            tracing::warn!(
                statement = kind,
                "session state set through a pooled connection behind a transaction-mode \
                 pooler (PoolerMode::Transaction): it stays on whichever server connection ran \
                 it, where other clients see it, and is missing from the next transaction; \
                 use SET LOCAL / transaction-level locks inside a transaction"
            );
        }
        match found.tx {
            Some(TxChange::Begin) => self.raw_tx.store(true, Ordering::Relaxed),
            Some(TxChange::End) => self.raw_tx.store(false, Ordering::Relaxed),
            None => {}
        }
    }

    /// The parameters paired with their types, describing the query on a
    /// cache miss.
    async fn typed<'p>(
        &self,
        sql: &str,
        params: &[&'p (dyn ToSql + Sync)],
    ) -> Result<Vec<(&'p (dyn ToSql + Sync), Type)>, Error> {
        if params.is_empty() {
            return Ok(Vec::new());
        }
        let types = match self.described.get(sql) {
            Some(types) => types,
            None => {
                let types = self.describe(sql).await?;
                drop(self.described.insert(sql, Arc::clone(&types)));
                types
            }
        };
        // A count that does not match is sent as it is: the server refuses
        // the bind with its own message.
        Ok(params
            .iter()
            .copied()
            .zip(
                types
                    .iter()
                    .cloned()
                    .chain(std::iter::repeat(Type::UNKNOWN)),
            )
            .collect())
    }

    /// The parameter types of `sql`, from a named statement that lives only
    /// inside a transaction: the pooler keeps one server connection for the
    /// transaction, so the prepare and its close reach the same one.
    async fn describe(&self, sql: &str) -> Result<Arc<[Type]>, Error> {
        let _one_at_a_time = self.describing.lock().await;
        if self.raw_tx.load(Ordering::Relaxed) {
            // Inside a transaction begun as text: prepare and close there.
            let statement = self.client.prepare(sql).await?;
            return Ok(statement.params().into());
        }
        // Marked first, so a call dropped half-way is rolled back on return.
        self.raw_tx.store(true, Ordering::Relaxed);
        self.client.batch_execute("BEGIN").await?;
        let described = self
            .client
            .prepare(sql)
            .await
            .map(|statement| Arc::<[Type]>::from(statement.params()));
        // The statement was dropped above: its close is queued before this.
        let end = if described.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        self.client.batch_execute(end).await?;
        self.raw_tx.store(false, Ordering::Relaxed);
        described
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
                    Ok(Err(Some(error))) => {
                        tracing::warn!(%error, "cancel request for a timed-out query failed");
                        Err(QueryError::CancelFailed {
                            limit,
                            error: Some(error),
                        })
                    }
                    Ok(Err(None)) => Err(QueryError::CancelFailed { limit, error: None }),
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

    /// Whether a query on this connection was abandoned: by
    /// [`with_timeout`](Self::with_timeout), or a validation or reset the
    /// pool dropped at its `validation_timeout`. The pool closes such a
    /// connection, and dropping it closes its socket at once (without this,
    /// `tokio_postgres` keeps the socket, and the server session, open until
    /// the server answers the abandoned query, which on a half-open
    /// connection is never, or until TCP keepalive gives up).
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Whether a transaction begun through this wrapper was left without a
    /// commit or rollback through it (dropped, leaked, or its end failed or
    /// was cancelled).
    ///
    /// Behind a pooler ([`PoolerMode::Transaction`]) this also counts a
    /// `BEGIN` sent as text through this wrapper and not yet ended.
    pub fn transaction_open(&self) -> bool {
        self.tx_open || self.raw_tx.load(Ordering::Relaxed)
    }

    /// Marks a transaction begun or ended with SQL text by the ambient
    /// scopes (`crate::ambient`), so that the reset on return sees it.
    pub(super) fn set_transaction_open(&mut self, open: bool) {
        self.tx_open = open;
    }

    /// Called after a successful reset.
    pub(super) fn mark_reset(&mut self) {
        self.tx_open = false;
        self.raw_tx.store(false, Ordering::Relaxed);
    }
}

impl Drop for PgClient {
    fn drop(&mut self) {
        if self.is_abandoned() {
            if let Some(driver) = &self.driver {
                driver.abort();
            }
        }
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
            .field("retired", &self.is_retired())
            .field("cached_statements", &self.statement_cache_len())
            .field("pooler_mode", &self.pooler_mode)
            .field("relayed", &self.relayed)
            .field("fleet_ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for str {}
    impl Sealed for String {}
    impl Sealed for tokio_postgres::Statement {}
}

/// What [`PgClient::query`] and its siblings take: query text (`str`,
/// `String`) or a prepared [`Statement`], as `Client::query` does.
///
/// Sealed: implemented for those three only.
pub trait PgStatement: ToStatement + sealed::Sealed {
    /// The query text, if this is text.
    #[doc(hidden)]
    fn text(&self) -> Option<&str>;
}

impl PgStatement for str {
    fn text(&self) -> Option<&str> {
        Some(self)
    }
}

impl PgStatement for String {
    fn text(&self) -> Option<&str> {
        Some(self)
    }
}

impl PgStatement for Statement {
    fn text(&self) -> Option<&str> {
        None
    }
}
