//! [`PostgresManager`]: opens, checks and resets `tokio_postgres` clients.
//!
//! The type and its settings live here; its
//! [`ManageConnection`](crate::ManageConnection) impl is `manage.rs`, and
//! the connect through a statement relay (the transaction-pooler mode) is
//! `relayed.rs`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Config, Socket};

use crate::fleet::{FleetBudget, FleetShareView};
use crate::pg::error::{BoxError, PgConfigError};
use crate::pg::failover::HostEpochs;
use crate::pg::timeout::Canceller;
#[cfg(doc)]
use crate::pg::{PgClient, PgError};
use crate::settings::{PgSettings, PgSettingsError};
use crate::{PoolerMode, PoolerStatements};

mod manage;
#[cfg(unix)]
mod relayed;

/// What a password provider returns: a boxed future of the password.
pub type PasswordFuture = Pin<Box<dyn Future<Output = Result<String, BoxError>> + Send>>;

/// A password provider, boxed.
type PasswordProvider = Arc<dyn Fn() -> PasswordFuture + Send + Sync>;

/// What is done to a connection when it comes back to the pool.
///
/// See the [module docs](crate#reset-on-return-and-what-it-costs) for what
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
    /// With a [fleet budget](PostgresManager::fleet_budget) the
    /// connection's ticket is kept through the reset; a connection that
    /// lost it (released by hand and taken by another session) is closed.
    Clean,
}

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
/// the [module docs](crate#failover)).
///
/// `Debug` shows the hosts, ports, user and database, never the password.
///
/// ```
/// use pool_postgres::{PostgresManager, ResetMode};
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
    /// The pooler and fleet budget settings, shared with the sqlx manager.
    settings: PgSettings,
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
            settings: PgSettings::default(),
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
    /// use pool_postgres::PostgresManager;
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

    /// Runs behind a transaction-mode pooler (PgBouncer, pgdog, pgcat,
    /// Supavisor) with [`PoolerMode::Transaction`]; [`PoolerMode::Session`]
    /// (the default) is a direct connection.
    ///
    /// `Transaction` sets the session rules: `SET` without `LOCAL`,
    /// `LISTEN` and session-level advisory locks given as text to the pooled
    /// client or its transactions fail with
    /// [`PgError::SessionStateBehindPooler`] before anything is sent (with
    /// unnamed statements, the relay refuses them on the driver's own
    /// `Client` too, with SQLSTATE `0A000`); `PREPARE`, `DECLARE ... WITH
    /// HOLD` and temporary tables are logged at `WARN`; a `BEGIN` sent as
    /// text is followed for the reset on return; and settings that need a
    /// session are refused (below). Statements are handled as
    /// [`pooler_statements`](Self::pooler_statements) says: by default
    /// passed through as the driver names them, on the direct path, for
    /// poolers that keep named statements (PgBouncer 1.21 or later with
    /// `max_prepared_statements` above 0, pgdog). See the
    /// [module docs](crate#behind-a-transaction-mode-pooler).
    ///
    /// The setter never fails, so it chains. Under `Transaction`,
    /// [`ResetMode::Clean`] is a [`PgConfigError::SessionResetBehindPooler`]
    /// and a fleet budget a [`PgConfigError::FleetBudgetBehindPooler`], in
    /// whichever order they are set: [`validate`](Self::validate) says so,
    /// `Pool::new` fails with it before opening anything, and so does a lazy
    /// pool's first connect.
    ///
    /// ```
    /// use pool_postgres::{PgConfigError, PostgresManager, ResetMode};
    /// use pool_postgres::pooler::PoolerMode;
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
        self.settings.set_pooler_mode(mode);
        self
    }

    /// What reaches a transaction-mode pooler of the statements the driver
    /// prepares: [`PoolerStatements::PassThrough`] (the default) or
    /// [`PoolerStatements::Unnamed`], for poolers that do not keep named
    /// statements (PgBouncer before 1.21 or with
    /// `max_prepared_statements = 0`).
    ///
    /// With `Unnamed`, no statement name reaches the server: each
    /// connection goes through a statement relay in this process that sends
    /// every statement as the unnamed one (so `prepare`,
    /// [`PgClient::prepare_cached`], the driver's own `Client` methods,
    /// `copy_in`/`copy_out` and transactions are all safe), and the pooled
    /// client runs queries given as text (`conn.query(sql, params)`,
    /// `query_one`, `query_opt`, `execute`) as unnamed statements in one
    /// round trip, the parameter types learnt once per query text and
    /// connection (cached like statements, see
    /// [`statement_cache_capacity`](Self::statement_cache_capacity)). The
    /// relay reads the plaintext protocol: under `sslmode=prefer` (the
    /// default) the connection to the pooler is plaintext; with
    /// `sslmode=require` the manager connects with TLS and without the
    /// relay, and then only the text queries are unnamed and
    /// `prepare_cached` fails with [`PgError::NamedStatementBehindPooler`].
    ///
    /// The setter never fails, so it chains: `Unnamed` without
    /// [`PoolerMode::Transaction`] is a
    /// [`PgConfigError::UnnamedOutsideTransactionMode`] from
    /// [`validate`](Self::validate), which `Pool::new` returns.
    ///
    /// ```
    /// use pool_postgres::PostgresManager;
    /// use pool_postgres::pooler::{PoolerMode, PoolerStatements};
    ///
    /// // PgBouncer 1.18 in transaction mode.
    /// let pg: tokio_postgres::Config = "postgres://app@pgbouncer:6432/shop".parse()?;
    /// let manager = PostgresManager::new(pg, tokio_postgres::NoTls)
    ///     .pooler_mode(PoolerMode::Transaction)
    ///     .pooler_statements(PoolerStatements::Unnamed);
    /// assert!(manager.validate().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn pooler_statements(mut self, statements: PoolerStatements) -> Self {
        self.settings.set_pooler_statements(statements);
        self
    }

    /// Makes every connection hold one of `total` tickets of the fleet
    /// budget `name`, shared by every process that uses the same name on
    /// the same database (with this manager or the sqlx one): a
    /// session-level advisory lock taken right after connecting, one round
    /// trip per connect and none per checkout. How it works, its limits and
    /// fair share: the [fleet budget guide](crate::guide::fleet_budget).
    ///
    /// A connect that finds no ticket free fails with
    /// [`PgError::FleetBudget`], whose text says "fleet budget"; the pool
    /// retries it with back-off while callers wait within their
    /// `acquire_timeout`. Every reset mode keeps the ticket; with
    /// [`ResetMode::Clean`] (which releases every other advisory lock) the
    /// reset on return also takes back a ticket a `pg_advisory_unlock_all()`
    /// or `DISCARD ALL` released, or closes the connection when another
    /// session took it meanwhile.
    ///
    /// ```
    /// use pool_postgres::PostgresManager;
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
    /// Fair share is on for a total of 2 or more: see
    /// [`fleet_share_interval`](Self::fleet_share_interval).
    #[must_use]
    pub fn fleet_budget(mut self, name: &str, total: u32) -> Self {
        self.settings.set_fleet_budget(name, total);
        self
    }

    /// Sets how often this instance rechecks its [fair
    /// share](crate::fleet#fair-share) of the fleet budget, or
    /// turns fair share off (`None`). Defaults to
    /// [`DEFAULT_SHARE_INTERVAL`](crate::fleet::DEFAULT_SHARE_INTERVAL), 1 s.
    ///
    /// With fair share on, each of the `N` live instances (managers) of the
    /// budget is guaranteed `floor(total / N)` tickets and may borrow the
    /// rest while nobody else needs them; each instance holds a control
    /// session of its own, which holds a ticket: see [fair
    /// share](crate::guide::fleet_budget#fair-share).
    ///
    /// ```
    /// use std::time::Duration;
    /// use pool_postgres::PostgresManager;
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
    /// [`FleetBudgetConfigError::ZeroShareInterval`](crate::fleet::FleetBudgetConfigError::ZeroShareInterval), an interval on a
    /// budget of one ticket one holding
    /// [`FleetBudgetConfigError::ShareOfOneTicket`](crate::fleet::FleetBudgetConfigError::ShareOfOneTicket), and a call before
    /// [`fleet_budget`](Self::fleet_budget) one holding
    /// [`FleetBudgetConfigError::ShareIntervalWithoutBudget`](crate::fleet::FleetBudgetConfigError::ShareIntervalWithoutBudget), from
    /// [`validate`](Self::validate).
    #[must_use]
    pub fn fleet_share_interval(mut self, interval: Option<Duration>) -> Self {
        self.settings.set_fleet_share_interval(interval);
        self
    }

    /// This instance's view of its fair share of the fleet budget, as of
    /// its last recheck; `None` without a budget or with fair share off.
    pub fn fleet_share(&self) -> Option<FleetShareView> {
        self.settings.fleet_share()
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
    /// use pool_postgres::PostgresManager;
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
    /// each under [`PoolerMode::Transaction`];
    /// [`PgConfigError::UnnamedOutsideTransactionMode`] for
    /// [`PoolerStatements::Unnamed`] without it. Each error's text names both
    /// settings.
    pub fn validate(&self) -> Result<(), PgConfigError> {
        let shared = self.settings.check();
        // Under `Transaction` no clash but an invalid budget comes before
        // the reset's.
        if self.settings.pooler_mode() == PoolerMode::Transaction
            && self.reset_mode == ResetMode::Clean
            && !matches!(shared, Err(PgSettingsError::FleetBudget(_)))
        {
            return Err(PgConfigError::SessionResetBehindPooler {
                reset_mode: self.reset_mode,
            });
        }
        shared.map_err(PgConfigError::from)
    }

    /// Whether statements reach the server unnamed: behind a
    /// transaction-mode pooler that does not keep named ones.
    fn unnamed(&self) -> bool {
        self.settings.unnamed()
    }

    /// Whether connections go through the statement relay: with unnamed
    /// statements, on a Unix platform, unless the config requires TLS.
    fn relays(&self) -> bool {
        cfg!(unix) && self.unnamed() && self.config.get_ssl_mode() != SslMode::Require
    }

    /// The pooler mode in force.
    pub fn current_pooler_mode(&self) -> PoolerMode {
        self.settings.pooler_mode()
    }

    /// The fleet budget, if one is set and valid.
    pub fn current_fleet_budget(&self) -> Option<&FleetBudget> {
        self.settings.fleet_budget()
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
            .field("pooler_mode", &self.settings.pooler_mode())
            .field("pooler_statements", &self.settings.pooler_statements())
            .field("fleet_budget", &self.settings.fleet_setting())
            .field("password_provider", &self.password.is_some())
            .field("keepalives", &c.get_keepalives())
            .field("keepalives_idle", &c.get_keepalives_idle())
            .field("target_session_attrs", &c.get_target_session_attrs())
            .finish_non_exhaustive()
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
}
