//! [`PostgresManager`]: opens, checks and resets `tokio_postgres` clients.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use pool_api::{async_trait, ManageConnection};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Config, Error, Socket};

use super::client::{Canceller, PgClient};
use super::driver::drive;

/// What is done to a connection when it comes back to the pool.
///
/// See the [module docs](super#reset-on-return-and-what-it-costs) for what
/// each mode catches and costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ResetMode {
    /// Nothing. A clean return costs nothing. A dropped transaction is still
    /// rolled back by the `ROLLBACK` that `tokio_postgres` queues, but a
    /// leaked one (`mem::forget`) or a raw `BEGIN` is handed to the next
    /// user.
    None,
    /// `ROLLBACK` when a transaction begun through the [`PgClient`] was not
    /// committed or rolled back through its [`PgTransaction`]: no round trip
    /// for a clean return or a finished transaction, one otherwise. Does not
    /// see a `BEGIN` sent as raw SQL.
    ///
    /// [`PgTransaction`]: super::PgTransaction
    #[default]
    Rollback,
    /// `ROLLBACK` on every return: one round trip each time, and catches a
    /// `BEGIN` sent as raw SQL.
    RollbackAlways,
    /// Roll back and restore the session on every return (cursors, session
    /// authorization, settings, `LISTEN`s, advisory locks, temporary tables
    /// and sequences) in one simple query: one round trip each time.
    /// Prepared statements are kept, so the statement cache stays valid.
    Clean,
}

/// The statements of [`ResetMode::Clean`], sent as one simple query. The
/// leading `ROLLBACK` leaves any transaction so the rest runs; each later
/// statement undoes one kind of session state.
const CLEAN_SQL: &str = "ROLLBACK; \
    CLOSE ALL; \
    SET SESSION AUTHORIZATION DEFAULT; \
    RESET ALL; \
    UNLISTEN *; \
    SELECT pg_advisory_unlock_all(); \
    DISCARD TEMP; \
    DISCARD SEQUENCES";

/// How long a cancel request may take by default.
const DEFAULT_CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// How many prepared statements each connection caches by default.
const DEFAULT_STATEMENT_CACHE_CAPACITY: usize = 256;

/// Pools `tokio_postgres` connections; the pool hands out [`PgClient`]s.
///
/// `connect` opens a connection and spawns the task that drives its socket
/// (on the current tokio runtime); `is_valid` sends an empty simple query;
/// `has_broken` is `Client::is_closed`, or a query abandoned by
/// [`PgClient::with_timeout`]; the reset on return follows the
/// [`ResetMode`].
///
/// `Debug` shows the hosts, ports, user and database, never the password.
///
/// ```
/// use pool_core::managers::tokio_postgres::{PostgresManager, ResetMode};
///
/// let mut pg = tokio_postgres::Config::new();
/// pg.host("127.0.0.1").user("app").password("s3cret").dbname("shop");
/// let manager = PostgresManager::new(pg, tokio_postgres::NoTls)
///     .reset_mode(ResetMode::Clean)
///     .statement_cache_capacity(64);
/// assert!(!format!("{manager:?}").contains("s3cret"));
/// ```
pub struct PostgresManager<Tls> {
    config: Config,
    tls: Tls,
    reset_mode: ResetMode,
    statement_cache_capacity: usize,
    cancel_timeout: Duration,
    canceller: Canceller,
}

impl<Tls> PostgresManager<Tls>
where
    Tls: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    Tls::Stream: Send,
    Tls::TlsConnect: Send,
    <Tls::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    /// A manager connecting with `config` through `tls` (`NoTls`, or a
    /// connector from `postgres-native-tls` / `tokio-postgres-rustls`).
    ///
    /// Defaults: [`ResetMode::Rollback`], a statement cache of 256 per
    /// connection, a 5 second cancel timeout.
    pub fn new(config: Config, tls: Tls) -> Self {
        let cancel_tls = tls.clone();
        let canceller: Canceller = Arc::new(move |token| {
            let tls = cancel_tls.clone();
            Box::pin(async move { token.cancel_query(tls).await })
        });
        Self {
            config,
            tls,
            reset_mode: ResetMode::default(),
            statement_cache_capacity: DEFAULT_STATEMENT_CACHE_CAPACITY,
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            canceller,
        }
    }
}

impl<Tls> PostgresManager<Tls> {
    /// What is done to a connection when it comes back. Defaults to
    /// [`ResetMode::Rollback`].
    #[must_use]
    pub fn reset_mode(mut self, mode: ResetMode) -> Self {
        self.reset_mode = mode;
        self
    }

    /// How many statements [`PgClient::prepare_cached`] keeps per
    /// connection; past it, the least recently used is evicted (and closed
    /// on the server). `0` turns the cache off. Defaults to 256.
    #[must_use]
    pub fn statement_cache_capacity(mut self, capacity: usize) -> Self {
        self.statement_cache_capacity = capacity;
        self
    }

    /// Bound on the cancel request [`PgClient::with_timeout`] sends when a
    /// query runs out of time (it opens a new connection to the server).
    /// Defaults to 5 seconds.
    #[must_use]
    pub fn cancel_timeout(mut self, timeout: Duration) -> Self {
        self.cancel_timeout = timeout;
        self
    }

    /// The connection settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The reset mode in force.
    pub fn current_reset_mode(&self) -> ResetMode {
        self.reset_mode
    }
}

impl<Tls> fmt::Debug for PostgresManager<Tls> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("PostgresManager")
            .field("hosts", &c.get_hosts())
            .field("ports", &c.get_ports())
            .field("user", &c.get_user())
            .field("password", &c.get_password().map(|_| "<redacted>"))
            .field("dbname", &c.get_dbname())
            .field("application_name", &c.get_application_name())
            .field("ssl_mode", &c.get_ssl_mode())
            .field("reset_mode", &self.reset_mode)
            .field("statement_cache_capacity", &self.statement_cache_capacity)
            .field("cancel_timeout", &self.cancel_timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<Tls> ManageConnection for PostgresManager<Tls>
where
    Tls: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    Tls::Stream: Send,
    Tls::TlsConnect: Send,
    <Tls::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    type Connection = PgClient;
    type Error = Error;

    async fn connect(&self) -> Result<PgClient, Error> {
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        tokio::spawn(drive(connection));
        Ok(PgClient::new(
            client,
            self.statement_cache_capacity,
            Arc::clone(&self.canceller),
            self.cancel_timeout,
        ))
    }

    async fn is_valid(&self, conn: &mut PgClient) -> Result<(), Error> {
        conn.simple_query("").await.map(drop)
    }

    fn has_broken(&self, conn: &mut PgClient) -> bool {
        conn.is_closed() || conn.is_abandoned()
    }

    fn needs_reset(&self, conn: &mut PgClient) -> bool {
        match self.reset_mode {
            ResetMode::None => false,
            ResetMode::Rollback => conn.transaction_open(),
            ResetMode::RollbackAlways | ResetMode::Clean => true,
        }
    }

    async fn reset(&self, conn: &mut PgClient) -> Result<(), Error> {
        let sql = match self.reset_mode {
            ResetMode::None => return Ok(()),
            ResetMode::Rollback | ResetMode::RollbackAlways => "ROLLBACK",
            ResetMode::Clean => CLEAN_SQL,
        };
        conn.batch_execute(sql).await?;
        conn.mark_reset();
        Ok(())
    }
}
