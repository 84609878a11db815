//! [`PostgresManager`]: opens, checks and resets `tokio_postgres` clients.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use pool_api::{async_trait, ManageConnection};
#[cfg(unix)]
use tokio_postgres::config::Host;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::Type;
#[cfg(unix)]
use tokio_postgres::Client;
use tokio_postgres::{Config, Socket};

use super::cancel::Canceller;
use super::client::{PgClient, ReportedRole};
use super::driver::drive;
use super::error::{BoxError, PgConfigError, PgError};
use super::failover::HostEpochs;
use crate::managers::fleet::{
    self, BoxFuture, ControlSession, FleetBudget, FleetBudgetConfigError, FleetShare,
    FleetShareView, OpenControl,
};
#[cfg(unix)]
use crate::managers::relay::{Keepalive, Relay, Upstream};
use crate::PoolerMode;

#[cfg(unix)]
/// How many statements a relay keeps beyond the statement cache: those the
/// caller prepared and still holds.
const RELAY_SLACK: usize = 256;

#[cfg(unix)]
/// Where `config` points, in order: each host (or `hostaddr`) with its port.
fn upstreams(config: &Config) -> Vec<Upstream> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let ports = config.get_ports();
    (0..hosts.len().max(addrs.len()))
        .filter_map(|i| {
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            if let Some(addr) = addrs.get(i) {
                return Some(Upstream::Tcp(addr.to_string(), port));
            }
            match hosts.get(i)? {
                Host::Tcp(host) => Some(Upstream::Tcp(host.clone(), port)),
                #[cfg(unix)]
                Host::Unix(dir) => Some(Upstream::Unix(dir.join(format!(".s.PGSQL.{port}")))),
            }
        })
        .collect()
}

#[cfg(unix)]
/// Opens a connection through a statement relay: to the first of the
/// config's hosts that accepts one, each within `connect_timeout`, with the
/// config's TCP keepalive on the relay's socket. Its cancel requests go
/// straight to that host.
async fn relayed_connect(
    config: &Config,
    cache_capacity: usize,
) -> Result<(Client, tokio::task::JoinHandle<()>, Canceller, ReportedRole), PgError> {
    let keepalive = config.get_keepalives().then(|| Keepalive {
        idle: config.get_keepalives_idle(),
        interval: config.get_keepalives_interval(),
        retries: config.get_keepalives_retries(),
    });
    let mut last = None;
    for upstream in upstreams(config) {
        let opened = async {
            let stream = Relay::pair(&upstream, keepalive, cache_capacity + RELAY_SLACK)
                .await
                .map_err(PgError::Relay)?;
            Ok::<_, PgError>(config.connect_raw(stream, tokio_postgres::NoTls).await?)
        };
        let opened = match config.get_connect_timeout() {
            Some(limit) => match tokio::time::timeout(*limit, opened).await {
                Ok(opened) => opened,
                Err(_) => Err(PgError::Relay(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connect to {upstream:?} timed out after {limit:?}"),
                ))),
            },
            None => opened.await,
        };
        match opened {
            Ok((client, connection)) => {
                let reported = ReportedRole::from_params(
                    connection.parameter("in_hot_standby"),
                    connection.parameter("default_transaction_read_only"),
                );
                let driver = tokio::spawn(drive(connection));
                let canceller: Canceller = Arc::new(move |token| {
                    let upstream = upstream.clone();
                    Box::pin(async move {
                        use crate::managers::relay::ServerStream;
                        let sent = match upstream.connect().await {
                            Ok(ServerStream::Tcp(s)) => {
                                token.cancel_query_raw(s, tokio_postgres::NoTls).await
                            }
                            #[cfg(unix)]
                            Ok(ServerStream::Unix(s)) => {
                                token.cancel_query_raw(s, tokio_postgres::NoTls).await
                            }
                            Err(error) => {
                                tracing::warn!(%error, "could not reach the pooler to cancel a query");
                                return Err(None);
                            }
                        };
                        sent.map_err(Some)
                    })
                });
                return Ok((client, driver, canceller, reported));
            }
            // A refused login is the server's answer: no other host is
            // tried, as the driver itself does.
            Err(PgError::Db(e)) if e.as_db_error().is_some() => return Err(PgError::Db(e)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        PgError::Relay(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the config names no host",
        ))
    }))
}

/// What a password provider returns: a boxed future of the password.
pub type PasswordFuture = Pin<Box<dyn Future<Output = Result<String, BoxError>> + Send>>;

/// A password provider, boxed.
type PasswordProvider = Arc<dyn Fn() -> PasswordFuture + Send + Sync>;

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

/// TCP keepalive the manager sets unless told otherwise: the first probe
/// after 30 seconds of silence, then one every 10 seconds, and the socket
/// is closed after 3 unanswered probes (about a minute in all).
pub const DEFAULT_KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// See [`DEFAULT_KEEPALIVE_IDLE`].
pub const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// See [`DEFAULT_KEEPALIVE_IDLE`].
pub const DEFAULT_KEEPALIVE_RETRIES: u32 = 3;

/// `tokio_postgres`'s own keepalive idle time: a config that still holds it
/// (with no interval and no retry count) gets the manager's defaults.
const DRIVER_KEEPALIVE_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// The query that names the server a connection reached, when the config
/// lists several hosts (see [`failover`](super#failover)).
const SERVER_KEY_SQL: &str =
    "SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port')";

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
/// TCP keepalive is on by default (see
/// [`tcp_keepalive`](Self::tcp_keepalive)), and with several hosts and
/// `target_session_attrs=read-write` the manager follows a failover (see
/// the [module docs](super#failover)).
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
    pooler_mode: PoolerMode,
    /// An invalid budget is kept as its error, reported by `validate`.
    fleet: Option<Result<FleetBudget, FleetBudgetConfigError>>,
    /// The fair share state of a valid budget with fair share on.
    share: Option<Arc<FleetShare>>,
    password: Option<PasswordProvider>,
    hosts: HostEpochs,
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
    /// connection, a 5 second cancel timeout, TCP keepalive after 30 s idle,
    /// every 10 s, 3 probes (see [`tcp_keepalive`](Self::tcp_keepalive)).
    pub fn new(mut config: Config, tls: Tls) -> Self {
        let driver_defaults = config.get_keepalives()
            && config.get_keepalives_idle() == DRIVER_KEEPALIVE_IDLE
            && config.get_keepalives_interval().is_none()
            && config.get_keepalives_retries().is_none();
        if driver_defaults {
            config
                .keepalives_idle(DEFAULT_KEEPALIVE_IDLE)
                .keepalives_interval(DEFAULT_KEEPALIVE_INTERVAL)
                .keepalives_retries(DEFAULT_KEEPALIVE_RETRIES);
        }
        let cancel_tls = tls.clone();
        let canceller: Canceller = Arc::new(move |token| {
            let tls = cancel_tls.clone();
            Box::pin(async move { token.cancel_query(tls).await.map_err(Some) })
        });
        Self {
            config,
            tls,
            reset_mode: ResetMode::default(),
            statement_cache_capacity: DEFAULT_STATEMENT_CACHE_CAPACITY,
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            canceller,
            pooler_mode: PoolerMode::default(),
            fleet: None,
            share: None,
            password: None,
            hosts: HostEpochs::default(),
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

    /// Whether a connection returned with a transaction open is left
    /// unreset ([`ResetMode::None`]).
    pub(super) fn leaves_transactions_open(&self) -> bool {
        self.reset_mode == ResetMode::None
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

    /// TCP keepalive on every new connection: the first probe after `idle`
    /// without traffic, then one every `interval`; after `retries`
    /// unanswered probes the kernel closes the socket, the connection's
    /// queries fail and the pool replaces it. This is what finds a
    /// half-open connection (a peer that vanished without a FIN or RST: a
    /// failed-over host, a dropped NAT entry) that sits idle in the pool.
    ///
    /// Which setting wins: a call to this method or to
    /// [`without_tcp_keepalive`](Self::without_tcp_keepalive) (the last
    /// one); otherwise the keepalive settings of the `tokio_postgres::Config`
    /// given to [`new`](Self::new) (`keepalives`, `keepalives_idle`,
    /// `keepalives_interval`, `keepalives_retries`, or the same keys in a
    /// connection string), when any of them differs from `tokio_postgres`'s
    /// own default (on, 2 hours, none, none); otherwise the manager's
    /// defaults, [`DEFAULT_KEEPALIVE_IDLE`] (30 s),
    /// [`DEFAULT_KEEPALIVE_INTERVAL`] (10 s), [`DEFAULT_KEEPALIVE_RETRIES`]
    /// (3). A config that sets exactly `tokio_postgres`'s defaults gets the
    /// manager's: call this method to keep 2 hours.
    ///
    /// Keepalive does not bound a query that waits on a live but silent
    /// server; the pool's `validation_timeout` bounds the check at checkout,
    /// and [`PgClient::with_timeout`] bounds a query.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pool_core::managers::tokio_postgres::PostgresManager;
    ///
    /// let pg: tokio_postgres::Config = "postgres://app@db/shop".parse()?;
    /// let manager = PostgresManager::new(pg, tokio_postgres::NoTls).tcp_keepalive(
    ///     Duration::from_secs(10),
    ///     Duration::from_secs(5),
    ///     2,
    /// );
    /// assert_eq!(manager.config().get_keepalives_idle(), Duration::from_secs(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn tcp_keepalive(mut self, idle: Duration, interval: Duration, retries: u32) -> Self {
        self.config
            .keepalives(true)
            .keepalives_idle(idle)
            .keepalives_interval(interval)
            .keepalives_retries(retries);
        self
    }

    /// Turns TCP keepalive off for new connections (see
    /// [`tcp_keepalive`](Self::tcp_keepalive) for which setting wins).
    #[must_use]
    pub fn without_tcp_keepalive(mut self) -> Self {
        self.config.keepalives(false);
        self
    }

    /// Runs behind a transaction-mode pooler (PgBouncer, pgcat, Supavisor)
    /// with [`PoolerMode::Transaction`]; [`PoolerMode::Session`] (the
    /// default) is a direct connection.
    ///
    /// Under `Transaction`, no statement name reaches the server: each
    /// connection goes through a statement relay in this process that sends
    /// every statement as the unnamed one (so `prepare`,
    /// [`PgClient::prepare_cached`], the driver's own `Client` methods and
    /// transactions are all safe), and the pooled client runs queries given
    /// as text (`conn.query(sql, params)`, `query_one`, `query_opt`,
    /// `execute`) as unnamed statements in one round trip, the parameter
    /// types learnt once per query text and connection (cached like
    /// statements, see
    /// [`statement_cache_capacity`](Self::statement_cache_capacity)). The
    /// relay reads the plaintext protocol: under `sslmode=prefer` (the
    /// default) the connection to the pooler is plaintext; with
    /// `sslmode=require` the manager connects with TLS and without the relay,
    /// and then only the text queries are unnamed and `prepare_cached` fails
    /// with [`PgError::NamedStatementBehindPooler`]. Statements that set
    /// session state (`SET` without `LOCAL`, `LISTEN`, `PREPARE`, `DECLARE
    /// ... WITH HOLD`, advisory session locks, temporary tables) sent as text
    /// through the pooled client are logged at `WARN`. See the
    /// [module docs](super#behind-a-transaction-mode-pooler).
    ///
    /// The setter never fails, so it chains. Under `Transaction`,
    /// [`ResetMode::Clean`] is a [`PgConfigError::SessionResetBehindPooler`]
    /// and a fleet budget a [`PgConfigError::FleetBudgetBehindPooler`], in
    /// whichever order they are set: [`validate`](Self::validate) says so,
    /// `Pool::new` fails with it before opening anything, and so does a lazy
    /// pool's first connect.
    ///
    /// ```
    /// use pool_core::managers::tokio_postgres::{PgConfigError, PostgresManager, ResetMode};
    /// use pool_core::PoolerMode;
    ///
    /// let pg: tokio_postgres::Config = "postgres://app@pgbouncer:6432/shop".parse()?;
    /// let manager = PostgresManager::new(pg, tokio_postgres::NoTls)
    ///     .pooler_mode(PoolerMode::Transaction)
    ///     .statement_cache_capacity(64);
    /// assert!(manager.validate().is_ok());
    /// let clashing = manager.reset_mode(ResetMode::Clean);
    /// assert!(matches!(clashing.validate(), Err(PgConfigError::SessionResetBehindPooler { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn pooler_mode(mut self, mode: PoolerMode) -> Self {
        self.pooler_mode = mode;
        self
    }

    /// Makes every connection hold one of `total` tickets of the fleet
    /// budget `name`, shared by every process that uses the same name on
    /// the same database: a session-level advisory lock taken right after
    /// connecting (one round trip per connect, none per checkout). A connect
    /// that finds no ticket free fails with [`PgError::FleetBudget`], whose
    /// text says "fleet budget"; the pool retries it with back-off while
    /// callers wait within their `acquire_timeout`. The ticket is released
    /// by the server when the connection closes, however the process ends.
    ///
    /// Idle connections keep their tickets: an `idle_timeout` and a low
    /// `min_size` let an idle process give its share back. See
    /// [`fleet`](crate::managers::fleet) for the key and its collisions.
    ///
    /// ```
    /// use pool_core::managers::tokio_postgres::PostgresManager;
    ///
    /// let pg: tokio_postgres::Config = "postgres://app@db/shop".parse()?;
    /// let manager = PostgresManager::new(pg, tokio_postgres::NoTls)
    ///     .fleet_budget("shop-api", 80)
    ///     .statement_cache_capacity(64);
    /// manager.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The setter never fails, so it chains: an empty name or a total of 0
    /// or above `i32::MAX` is a [`PgConfigError::FleetBudget`], and a budget
    /// under [`PoolerMode::Transaction`] a
    /// [`PgConfigError::FleetBudgetBehindPooler`], from
    /// [`validate`](Self::validate), which `Pool::new` returns before
    /// opening anything (and a lazy pool's first connect).
    ///
    /// Fair share is on: see [`fleet_share_interval`](Self::fleet_share_interval).
    #[must_use]
    pub fn fleet_budget(mut self, name: &str, total: u32) -> Self {
        self.fleet = fleet::set_budget(self.fleet.take(), name, total);
        self.share = fleet::share_of(self.fleet.as_ref());
        self
    }

    /// Sets how often this instance rechecks its [fair
    /// share](crate::managers::fleet#fair-share) of the fleet budget, or
    /// turns fair share off (`None`). Defaults to
    /// [`DEFAULT_SHARE_INTERVAL`](fleet::DEFAULT_SHARE_INTERVAL), 1 s.
    ///
    /// With fair share on, each of the `N` live instances (managers) of the
    /// budget is guaranteed `floor(total / N)` tickets and may borrow the
    /// rest while nobody else needs them; an instance below its share that
    /// finds no ticket makes those above theirs close their excess
    /// connections as they come back. Each instance holds one control
    /// session of its own, outside the budget, opened with the same
    /// settings by its first connect.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pool_core::managers::tokio_postgres::PostgresManager;
    ///
    /// let pg: tokio_postgres::Config = "postgres://app@db/shop".parse()?;
    /// let manager = PostgresManager::new(pg, tokio_postgres::NoTls)
    ///     .fleet_budget("shop-api", 80)
    ///     .fleet_share_interval(Some(Duration::from_millis(500)));
    /// manager.validate()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The setter never fails, so it chains: a zero interval is a
    /// [`PgConfigError::FleetBudget`] holding
    /// [`FleetBudgetConfigError::ZeroShareInterval`], and a call before
    /// [`fleet_budget`](Self::fleet_budget) one holding
    /// [`FleetBudgetConfigError::ShareIntervalWithoutBudget`], from
    /// [`validate`](Self::validate).
    #[must_use]
    pub fn fleet_share_interval(mut self, interval: Option<Duration>) -> Self {
        self.fleet = Some(fleet::set_share_interval(self.fleet.take(), interval));
        self.share = fleet::share_of(self.fleet.as_ref());
        self
    }

    /// This instance's view of its fair share of the fleet budget, as of
    /// its last recheck; `None` without a budget or with fair share off.
    pub fn fleet_share(&self) -> Option<FleetShareView> {
        self.share.as_deref().map(FleetShare::view)
    }

    /// Asks `provider` for the password of every new connection (rotating
    /// passwords, cloud IAM tokens); it overrides the password in the
    /// config. Its error fails that connect as [`PgError::Password`].
    ///
    /// Connections already open keep working when the password changes
    /// (PostgreSQL checks it only at login). To move every connection to new
    /// credentials without a restart, rotate what the provider returns, then
    /// call [`Pool::soft_evict_all`](crate::Pool::soft_evict_all): idle
    /// connections are replaced at once, busy ones when they come back.
    ///
    /// The provider runs on the pool's connector task, bounded by the pool's
    /// `connect_timeout` together with the connect; cache the token inside
    /// it if fetching one is slow.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pool_core::managers::tokio_postgres::PostgresManager;
    ///
    /// let secret = Arc::new(std::sync::RwLock::new(String::from("first")));
    /// let pg: tokio_postgres::Config = "postgres://app@db/shop".parse()?;
    /// let source = Arc::clone(&secret);
    /// let manager = PostgresManager::new(pg, tokio_postgres::NoTls).with_password_provider(move || {
    ///     let password = source.read().map(|p| p.clone()).map_err(|_| "secret store poisoned".into());
    ///     async move { password }
    /// });
    /// // Later, on rotation:
    /// *secret.write().unwrap() = String::from("second");
    /// // pool.soft_evict_all();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_password_provider<F, Fut>(mut self, provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, BoxError>> + Send + 'static,
    {
        self.password = Some(Arc::new(move || Box::pin(provider())));
        self
    }

    /// Checks that the settings work together. The pool runs it when it is
    /// built (`Pool::new` fails with it before opening anything), and every
    /// connect runs it first (so a lazy pool's first connect reports it).
    ///
    /// # Errors
    ///
    /// [`PgConfigError::FleetBudget`] for an invalid budget;
    /// [`PgConfigError::SessionResetBehindPooler`] for [`ResetMode::Clean`]
    /// and [`PgConfigError::FleetBudgetBehindPooler`] for a fleet budget,
    /// each under [`PoolerMode::Transaction`]. Each error's text names both
    /// settings.
    pub fn validate(&self) -> Result<(), PgConfigError> {
        if let Some(Err(e)) = &self.fleet {
            return Err(PgConfigError::FleetBudget(e.clone()));
        }
        if self.pooler_mode == PoolerMode::Transaction {
            if self.reset_mode == ResetMode::Clean {
                return Err(PgConfigError::SessionResetBehindPooler {
                    reset_mode: self.reset_mode,
                });
            }
            if self.fleet.is_some() {
                return Err(PgConfigError::FleetBudgetBehindPooler);
            }
        }
        Ok(())
    }

    /// Whether connections go through the statement relay: in
    /// [`PoolerMode::Transaction`], on a Unix platform, unless the config
    /// requires TLS.
    fn relays(&self) -> bool {
        cfg!(unix)
            && self.pooler_mode == PoolerMode::Transaction
            && self.config.get_ssl_mode() != SslMode::Require
    }

    /// The pooler mode in force.
    pub fn current_pooler_mode(&self) -> PoolerMode {
        self.pooler_mode
    }

    /// The fleet budget, if one is set and valid.
    pub fn current_fleet_budget(&self) -> Option<&FleetBudget> {
        self.fleet.as_ref().and_then(|budget| budget.as_ref().ok())
    }

    /// The connection settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The reset mode in force.
    pub fn current_reset_mode(&self) -> ResetMode {
        self.reset_mode
    }

    /// Retires every connection this manager opened so far, as a
    /// read-only or going-away error on each of its servers would: the pool
    /// closes them on return and refuses them at checkout.
    pub(crate) fn retire_connections(&self) {
        self.hosts.retire_all();
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
            .field("pooler_mode", &self.pooler_mode)
            .field("fleet_budget", &self.fleet)
            .field("password_provider", &self.password.is_some())
            .field("keepalives", &c.get_keepalives())
            .field("keepalives_idle", &c.get_keepalives_idle())
            .field("target_session_attrs", &c.get_target_session_attrs())
            .finish_non_exhaustive()
    }
}

/// The fair share's control session on `tokio_postgres`.
struct TokioControl(Client);

impl ControlSession for TokioControl {
    fn row<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<Vec<i64>, fleet::BoxError>> {
        Box::pin(async move {
            let rows = self.0.simple_query(sql).await?;
            let row = rows
                .iter()
                .find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
                    _ => None,
                })
                .ok_or("no row")?;
            (0..row.len())
                .map(|i| Ok(row.get(i).ok_or("a null")?.parse::<i64>()?))
                .collect()
        })
    }
}

impl<Tls> PostgresManager<Tls>
where
    Tls: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    Tls::Stream: Send,
    Tls::TlsConnect: Send,
    <Tls::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    /// Opens the fair share's control session: the manager's config, TLS
    /// and password provider, no ticket, no statement cache.
    fn control_opener(&self) -> OpenControl {
        let (config, tls, password) =
            (self.config.clone(), self.tls.clone(), self.password.clone());
        Box::new(move || {
            let (mut config, tls, password) = (config.clone(), tls.clone(), password.clone());
            Box::pin(async move {
                if let Some(provider) = password {
                    config.password(provider().await?);
                }
                let (client, connection) = config.connect(tls).await?;
                tokio::spawn(drive(connection));
                Ok(Box::new(TokioControl(client)) as Box<dyn ControlSession>)
            })
        })
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
    type Error = PgError;

    /// A connect refused because the fleet budget had no free ticket is
    /// a capacity refusal, not a database failure: fail fast does not
    /// apply (callers keep waiting within `acquire_timeout`).
    fn is_capacity_refusal(&self, error: &PgError) -> bool {
        error.is_fleet_budget_exhausted()
    }

    /// A refused login, an unknown database or role, and the manager's own
    /// settings that cannot work are permanent: retrying at once does not
    /// cure them, so callers fail fast with the first one.
    fn is_permanent_error(&self, error: &PgError) -> bool {
        match error {
            PgError::Db(e) => e
                .code()
                .is_some_and(|code| crate::managers::is_permanent_sqlstate(code.code())),
            PgError::Config(_) => true,
            _ => false,
        }
    }

    /// [`validate`](PostgresManager::validate): settings that cannot work
    /// together fail `Pool::new` before anything is opened.
    ///
    /// # Errors
    ///
    /// [`PgError::Config`] with what `validate` says.
    fn check(&self) -> Result<(), PgError> {
        Ok(self.validate()?)
    }

    async fn connect(&self) -> Result<PgClient, PgError> {
        self.validate()?;
        // Fair share: the instance counts itself (its control session) from
        // its first connect on, and opens nothing for a ticket it would not
        // take.
        let claim = match &self.share {
            None => None,
            Some(share) => {
                share.start_control(|| self.control_opener());
                Some(share.admit().map_err(PgError::FleetBudget)?)
            }
        };
        let config = match &self.password {
            None => Cow::Borrowed(&self.config),
            Some(provider) => {
                let password = provider().await.map_err(PgError::Password)?;
                let mut config = self.config.clone();
                config.password(password);
                Cow::Owned(config)
            }
        };
        let (client, driver, canceller, reported, relayed) = match self.relays() {
            #[cfg(unix)]
            true => {
                let (client, driver, canceller, reported) =
                    relayed_connect(&config, self.statement_cache_capacity).await?;
                (client, driver, canceller, reported, true)
            }
            _ => {
                let (client, connection) = config.connect(self.tls.clone()).await?;
                let reported = ReportedRole::from_params(
                    connection.parameter("in_hot_standby"),
                    connection.parameter("default_transaction_read_only"),
                );
                let driver = tokio::spawn(drive(connection));
                (client, driver, Arc::clone(&self.canceller), reported, false)
            }
        };
        // With one host every connection reaches the same server; with
        // several, ask which one this is (one round trip per connect).
        let key = if self.config.get_hosts().len() > 1 {
            let rows = client.simple_query(SERVER_KEY_SQL).await?;
            rows.iter()
                .find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
                .unwrap_or_default()
        } else {
            String::new()
        };
        let host = self.hosts.mark(key);
        let mut seat = None;
        let ticket = match (self.current_fleet_budget(), &self.share, claim) {
            (None, _, _) => None,
            (Some(budget), Some(share), Some(claim)) => {
                // One round trip, the claim with its parameters written in.
                let rows = client.simple_query(&share.claim_sql(claim)).await?;
                let taken = rows.iter().find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                });
                match taken.and_then(|t| t.parse::<i32>().ok()) {
                    Some(t) => {
                        seat = Some(share.seat());
                        Some(t)
                    }
                    None => {
                        share.refused(claim);
                        return Err(PgError::FleetBudget(budget.exhausted()));
                    }
                }
            }
            (Some(budget), _, _) => {
                // One round trip, an unnamed statement. On any failure the
                // client is dropped here, which closes the connection.
                let row = client
                    .query_typed_opt(
                        fleet::CLAIM_SQL,
                        &[
                            (&budget.key(), Type::INT4),
                            (&budget.total_i32(), Type::INT4),
                            (&budget.random_start(), Type::INT4),
                        ],
                    )
                    .await?;
                match row {
                    Some(row) => Some(row.try_get::<_, i32>(0)?),
                    None => return Err(PgError::FleetBudget(budget.exhausted())),
                }
            }
        };
        let client = PgClient::new(
            client,
            self.statement_cache_capacity,
            canceller,
            self.cancel_timeout,
            self.pooler_mode,
            ticket,
            host,
        )
        .with_driver(driver)
        .with_reported_role(reported)
        .with_fleet_seat(seat);
        Ok(if relayed { client.relayed() } else { client })
    }

    async fn is_valid(&self, conn: &mut PgClient) -> Result<(), PgError> {
        if conn.is_retired() {
            return Err(PgError::Retired);
        }
        // Abandoned until the server answers: a check dropped at the pool's
        // `validation_timeout` (a half-open socket, a stalled server) leaves
        // the mark, and the pool's close then closes the socket too.
        conn.set_abandoned(true);
        conn.client().simple_query("").await?;
        conn.set_abandoned(false);
        Ok(())
    }

    /// Also `true` for a connection given back to the fleet budget (fair
    /// share: another instance is below its share and this one above).
    fn has_broken(&self, conn: &mut PgClient) -> bool {
        conn.is_closed() || conn.is_abandoned() || conn.is_retired() || conn.gives_back_ticket()
    }

    /// Sends `Terminate` and waits for the socket to close, so the pool
    /// counts the session until the server has it gone.
    async fn close(&self, conn: PgClient) {
        conn.close().await;
    }

    fn awaits_close(&self) -> bool {
        true
    }

    fn needs_reset(&self, conn: &mut PgClient) -> bool {
        match self.reset_mode {
            ResetMode::None => false,
            ResetMode::Rollback => conn.transaction_open(),
            ResetMode::RollbackAlways | ResetMode::Clean => true,
        }
    }

    async fn reset(&self, conn: &mut PgClient) -> Result<(), PgError> {
        let sql = match self.reset_mode {
            ResetMode::None => return Ok(()),
            ResetMode::Rollback | ResetMode::RollbackAlways => "ROLLBACK",
            ResetMode::Clean => CLEAN_SQL,
        };
        // As in `is_valid`: a reset dropped at its timeout closes the socket.
        conn.set_abandoned(true);
        conn.client().batch_execute(sql).await?;
        conn.set_abandoned(false);
        conn.mark_reset();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::NoTls;

    fn config(s: &str) -> Config {
        s.parse().expect("a valid connection string")
    }

    #[test]
    fn the_drivers_keepalive_defaults_become_the_managers() {
        let m = PostgresManager::new(config("host=127.0.0.1 user=u"), NoTls);
        let c = m.config();
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), DEFAULT_KEEPALIVE_IDLE);
        assert_eq!(
            c.get_keepalives_interval(),
            Some(DEFAULT_KEEPALIVE_INTERVAL)
        );
        assert_eq!(c.get_keepalives_retries(), Some(DEFAULT_KEEPALIVE_RETRIES));
    }

    #[test]
    fn a_keepalive_set_in_the_config_is_kept() {
        let m = PostgresManager::new(config("host=127.0.0.1 user=u keepalives_idle=7"), NoTls);
        assert_eq!(m.config().get_keepalives_idle(), Duration::from_secs(7));
        assert_eq!(m.config().get_keepalives_interval(), None);
        let off = PostgresManager::new(config("host=127.0.0.1 user=u keepalives=0"), NoTls);
        assert!(!off.config().get_keepalives());
    }

    #[test]
    fn reset_modes_and_what_they_leave_open() {
        let m = PostgresManager::new(config("host=127.0.0.1 user=u"), NoTls);
        assert_eq!(m.current_reset_mode(), ResetMode::Rollback);
        assert!(!m.leaves_transactions_open());
        let none = m.reset_mode(ResetMode::None);
        assert!(none.leaves_transactions_open());
    }

    #[cfg(unix)]
    #[test]
    fn upstreams_pair_each_host_with_its_port() {
        let c = config("host=db1,db2 port=5433,5434 user=u");
        let found: Vec<String> = upstreams(&c)
            .into_iter()
            .map(|u| match u {
                Upstream::Tcp(host, port) => format!("{host}:{port}"),
                Upstream::Unix(path) => path.display().to_string(),
            })
            .collect();
        assert_eq!(found, ["db1:5433", "db2:5434"]);
        // One port for every host.
        let one = config("host=db1,db2 port=6000 user=u");
        assert_eq!(upstreams(&one).len(), 2);
        assert!(matches!(&upstreams(&one)[1], Upstream::Tcp(h, 6000) if h == "db2"));
    }
}
