//! [`HostPool`]: one handle over a primary and its standbys, with one pool
//! per host.
//!
//! The hosts come from a `tokio_postgres::Config` listing several
//! (`host=db1,db2,db3`), as libpq takes them. Each host gets a [`Pool`] of
//! its own, so each has its own hard bound (`max_size` of the
//! [`PoolConfig`] given), its own metrics (the config's name as the `pool`
//! label, `host:port` as the `host` label) and its own holders. A
//! checkout names a [`SessionTarget`] with libpq's `target_session_attrs`
//! meanings; [`HostPool::write`] asks for `read-write`, [`HostPool::read`]
//! for the read target (`prefer-standby` unless set otherwise).
//!
//! # Roles and rechecks
//!
//! Every new connection learns its server's role: from the
//! `in_hot_standby` and `default_transaction_read_only` parameter statuses
//! that PostgreSQL 14 and later send at startup, else with one query
//! (`pg_is_in_recovery()` and `transaction_read_only`). The host's status
//! ([`HostStatus`]) follows what the last connect or check said. A
//! connection whose query fails with a SQLSTATE that says its server turned
//! read-only (`25006`) or is going away is retired with every older
//! connection to that server (see the [failover](super#failover) notes),
//! and its host's role becomes unknown until checked again; a role check
//! that finds a writable host read-only retires its connections too. So a
//! write checkout is handed a connection only from a host last seen
//! writable, and never one that saw its server turn read-only.
//!
//! Hosts are checked again in the background every
//! [`recheck_interval`](HostPoolBuilder::recheck_interval) (pgjdbc's
//! `hostRecheckSeconds`; 10 seconds by default), and at once when a
//! checkout finds no host of the role it wants or a connection sees its
//! server change, at most once per
//! [`recheck_gap`](HostPoolBuilder::recheck_gap) (100 ms by default). After
//! a failover (the primary stops, a standby is promoted), writes fail fast
//! with [`HostPoolError::NoHost`] until a check sees the promoted server
//! writable, then go there; reads go on to the standbys throughout.
//!
//! # Events
//!
//! [`HostPool::subscribe`] returns a broadcast receiver of [`HostEvent`]s:
//! host up, host down, role changed (promotion, demotion), every host down,
//! recovered, a host's pool exhausted. The same facts are logged through
//! `tracing`.
//!
//! ```no_run
//! use pool_core::managers::tokio_postgres::{HostPool, SessionTarget};
//! use pool_core::PoolConfig;
//! use tokio_postgres::NoTls;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pg: tokio_postgres::Config = "host=db1,db2,db3 user=app dbname=shop".parse()?;
//! let pool = HostPool::builder(pg, NoTls)
//!     .pool_config(PoolConfig::builder().name("shop").max_size(20).build()?)
//!     .read_target(SessionTarget::PreferStandby)
//!     .build()
//!     .await?;
//! let mut events = pool.subscribe();
//! tokio::spawn(async move {
//!     while let Ok(event) = events.recv().await {
//!         if event.is_promotion() { /* tell someone */ }
//!     }
//! });
//! pool.write().await?.execute("INSERT INTO orders DEFAULT VALUES", &[]).await?;
//! let n: i64 = pool.read().await?.query_one("SELECT count(*) FROM orders", &[]).await?.get(0);
//! # Ok(())
//! # }
//! ```

mod registry;
mod role;

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use pool_api::{
    async_trait, ConfigError, Holder, ManageConnection, PoolConfig, PoolError, PoolState,
};
use tokio::sync::broadcast;
use tokio_postgres::config::{Host, LoadBalanceHosts as DriverLoadBalance};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Config, Socket};

pub use registry::{HostEvent, HostStatus};
pub use role::{LoadBalanceHosts, ServerRole, SessionTarget, UnknownSessionTarget};

use super::{PgClient, PgConfigError, PgError, PostgresManager};
use crate::{Pool, PooledConnection};
use registry::Registry;

/// The TLS connectors a host pool works with: what
/// [`PostgresManager`] needs to connect, named once. Every connector that
/// `PostgresManager` takes (`NoTls`, `postgres-native-tls`,
/// `tokio-postgres-rustls`) has it.
pub trait HostTls:
    MakeTlsConnect<Socket, Stream: Send, TlsConnect: Send + TlsConnect<Socket, Future: Send>>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<T> HostTls for T where
    T: MakeTlsConnect<Socket, Stream: Send, TlsConnect: Send + TlsConnect<Socket, Future: Send>>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// The role query for servers that do not report `in_hot_standby`.
const ROLE_SQL: &str = "SELECT pg_is_in_recovery()::text, current_setting('transaction_read_only')";

/// Default [`HostPoolBuilder::recheck_interval`].
pub const DEFAULT_RECHECK_INTERVAL: Duration = Duration::from_secs(10);
/// Default [`HostPoolBuilder::recheck_gap`].
pub const DEFAULT_RECHECK_GAP: Duration = Duration::from_millis(100);

/// The role of the server `conn` talks to: from its startup parameter
/// statuses when it sent both, else asked.
async fn role_of(conn: &PgClient) -> Result<ServerRole, PgError> {
    let reported = conn.reported_role();
    if let (Some(in_recovery), Some(read_only)) =
        (reported.in_hot_standby, reported.default_read_only)
    {
        return Ok(ServerRole::from_flags(in_recovery, read_only));
    }
    query_role(conn).await
}

/// Asks the server `conn` talks to for its role now.
async fn query_role(conn: &PgClient) -> Result<ServerRole, PgError> {
    let rows = conn.client().simple_query(ROLE_SQL).await?;
    let row = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => Some((row.get(0), row.get(1))),
        _ => None,
    });
    Ok(match row {
        Some((in_recovery, read_only)) => {
            ServerRole::from_flags(in_recovery == Some("true"), read_only == Some("on"))
        }
        // No row cannot happen for this query; take the safe answer.
        None => ServerRole::Standby,
    })
}

/// The manager of one host's pool: a [`PostgresManager`] for that host
/// alone, which tells the host pool what each connect and each retired
/// connection says about its server. Made by [`HostPoolBuilder::build`].
pub struct HostManager<Tls> {
    inner: PostgresManager<Tls>,
    registry: Arc<Registry>,
    index: usize,
}

impl<Tls> HostManager<Tls> {
    /// The manager of this host's connections.
    pub fn postgres(&self) -> &PostgresManager<Tls> {
        &self.inner
    }

    /// `host:port`.
    pub fn host(&self) -> &str {
        &self.registry.hosts[self.index].addr
    }

    /// Records `role` for this host, retiring its connections when it is
    /// no longer writable but was.
    fn observed(&self, role: ServerRole) {
        if self.registry.up(self.index, role) {
            self.inner.retire_all();
        }
    }
}

impl<Tls> fmt::Debug for HostManager<Tls> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostManager")
            .field("host", &self.host())
            .field("postgres", &self.inner)
            .finish()
    }
}

#[async_trait]
impl<Tls> ManageConnection for HostManager<Tls>
where
    Tls: HostTls,
{
    type Connection = PgClient;
    type Error = PgError;

    async fn connect(&self) -> Result<PgClient, PgError> {
        let conn = match self.inner.connect().await {
            Ok(conn) => conn,
            Err(e) => {
                if !self.inner.is_capacity_refusal(&e) {
                    self.registry.down(self.index, &e);
                }
                return Err(e);
            }
        };
        match role_of(&conn).await {
            Ok(role) => {
                self.observed(role);
                Ok(conn)
            }
            Err(e) => {
                self.registry.down(self.index, &e);
                Err(e)
            }
        }
    }

    async fn is_valid(&self, conn: &mut PgClient) -> Result<(), PgError> {
        self.inner.is_valid(conn).await
    }

    fn has_broken(&self, conn: &mut PgClient) -> bool {
        if conn.saw_server_gone() {
            self.registry.suspect(self.index);
        }
        self.inner.has_broken(conn)
    }

    fn is_capacity_refusal(&self, error: &PgError) -> bool {
        self.inner.is_capacity_refusal(error)
    }

    async fn close(&self, conn: PgClient) {
        self.inner.close(conn).await;
    }

    fn awaits_close(&self) -> bool {
        self.inner.awaits_close()
    }

    fn needs_reset(&self, conn: &mut PgClient) -> bool {
        self.inner.needs_reset(conn)
    }

    async fn reset(&self, conn: &mut PgClient) -> Result<(), PgError> {
        self.inner.reset(conn).await
    }
}

/// Why a host pool could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostConfigError {
    /// The config lists no host.
    NoHost,
    /// The config lists a number of ports that is neither 0, 1 nor the
    /// number of hosts.
    PortCount {
        /// Hosts listed.
        hosts: usize,
        /// Ports listed.
        ports: usize,
    },
    /// The config lists `hostaddr`s, but not one per host.
    HostaddrCount {
        /// Hosts listed.
        hosts: usize,
        /// Addresses listed.
        hostaddrs: usize,
    },
    /// A recheck interval or gap of zero.
    ZeroRecheck,
    /// The pool config is refused (its `host` label is already taken, say).
    Pool(ConfigError),
    /// The manager's settings are refused.
    Manager(PgConfigError),
}

impl fmt::Display for HostConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoHost => f.write_str("the host pool's config lists no host"),
            Self::PortCount { hosts, ports } => write!(
                f,
                "the host pool's config lists {hosts} hosts and {ports} ports: give one port, \
                 or one per host"
            ),
            Self::HostaddrCount { hosts, hostaddrs } => write!(
                f,
                "the host pool's config lists {hosts} hosts and {hostaddrs} hostaddrs: give one \
                 per host"
            ),
            Self::ZeroRecheck => f.write_str("the host recheck interval and gap must not be zero"),
            Self::Pool(e) => write!(f, "host pool: {e}"),
            Self::Manager(e) => write!(f, "host pool: {e}"),
        }
    }
}

impl std::error::Error for HostConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Pool(e) => Some(e),
            Self::Manager(e) => Some(e),
            _ => None,
        }
    }
}

/// What a host pool checkout or build can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostPoolError {
    /// No host of the role wanted answered: none is known to have it, or
    /// every one that has it failed to connect. Returned at once (the
    /// hosts are rechecked in the background), so a write checkout during
    /// a failover fails fast instead of waiting out its timeout.
    NoHost {
        /// What the checkout wanted.
        target: SessionTarget,
        /// Every host's status when it gave up.
        hosts: Vec<(Arc<str>, HostStatus)>,
        /// The last connect error seen by this checkout, as text.
        last_error: Option<String>,
    },
    /// The checkout from the chosen host failed: its time limit passed
    /// ([`PoolError::Timeout`]: every connection in use, or a connect that
    /// did not finish).
    Pool {
        /// `host:port`.
        host: Arc<str>,
        /// The host pool's error.
        error: PoolError<PgError>,
    },
    /// The host pool was closed.
    Closed,
    /// The settings are refused.
    Config(HostConfigError),
    /// At build: no host could be reached.
    Unreachable {
        /// Each host with its error, as text.
        errors: Vec<(Arc<str>, String)>,
    },
}

impl fmt::Display for HostPoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoHost {
                target,
                hosts,
                last_error,
            } => {
                write!(f, "no host for target_session_attrs={target} (")?;
                for (i, (host, status)) in hosts.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    match status {
                        HostStatus::Up(role) => write!(f, "{sep}{host}: {role}")?,
                        HostStatus::Down => write!(f, "{sep}{host}: down")?,
                        HostStatus::Unknown => write!(f, "{sep}{host}: unknown")?,
                    }
                }
                f.write_str(")")?;
                if let Some(e) = last_error {
                    write!(f, "; last error: {e}")?;
                }
                Ok(())
            }
            Self::Pool { host, error } => write!(f, "host {host}: {error}"),
            Self::Closed => f.write_str("host pool is closed"),
            Self::Config(e) => fmt::Display::fmt(e, f),
            Self::Unreachable { errors } => {
                f.write_str("no database host could be reached")?;
                for (host, e) in errors {
                    write!(f, "; {host}: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for HostPoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Pool { error, .. } => Some(error),
            Self::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl From<HostConfigError> for HostPoolError {
    fn from(e: HostConfigError) -> Self {
        Self::Config(e)
    }
}

/// A manager customisation, applied to each host's manager.
type Customize<Tls> =
    Box<dyn Fn(PostgresManager<Tls>) -> Result<PostgresManager<Tls>, PgConfigError> + Send + Sync>;

/// Builds a [`HostPool`]; made by [`HostPool::builder`].
pub struct HostPoolBuilder<Tls> {
    config: Config,
    tls: Tls,
    pool_config: PoolConfig,
    customize: Option<Customize<Tls>>,
    read_target: SessionTarget,
    load_balance: LoadBalanceHosts,
    recheck_interval: Duration,
    recheck_gap: Duration,
}

impl<Tls> fmt::Debug for HostPoolBuilder<Tls> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostPoolBuilder")
            .field("hosts", &self.config.get_hosts())
            .field("ports", &self.config.get_ports())
            .field("pool_config", &self.pool_config)
            .field("read_target", &self.read_target)
            .field("load_balance", &self.load_balance)
            .field("recheck_interval", &self.recheck_interval)
            .field("recheck_gap", &self.recheck_gap)
            .finish_non_exhaustive()
    }
}

impl<Tls> HostPoolBuilder<Tls>
where
    Tls: HostTls,
{
    /// The settings of each host's pool: its `max_size` is the hard bound
    /// of every host, its name the `pool` label of every host's series
    /// (each also gets a `host` label). Defaults to
    /// `PoolConfig::default()`.
    #[must_use]
    pub fn pool_config(mut self, config: PoolConfig) -> Self {
        self.pool_config = config;
        self
    }

    /// Applied to each host's [`PostgresManager`] (reset mode, keepalive,
    /// statement cache, password provider, ...).
    #[must_use]
    pub fn manager<F>(mut self, customize: F) -> Self
    where
        F: Fn(PostgresManager<Tls>) -> Result<PostgresManager<Tls>, PgConfigError>
            + Send
            + Sync
            + 'static,
    {
        self.customize = Some(Box::new(customize));
        self
    }

    /// What [`HostPool::read`] asks for. Defaults to
    /// [`SessionTarget::PreferStandby`]: a standby, else the primary;
    /// [`SessionTarget::Standby`] never falls back.
    #[must_use]
    pub fn read_target(mut self, target: SessionTarget) -> Self {
        self.read_target = target;
        self
    }

    /// The order hosts of one role are tried in, libpq's
    /// `load_balance_hosts`. Defaults to what the config says
    /// (`load_balance_hosts=random` in a connection string), else
    /// [`LoadBalanceHosts::Disable`].
    #[must_use]
    pub fn load_balance_hosts(mut self, load_balance: LoadBalanceHosts) -> Self {
        self.load_balance = load_balance;
        self
    }

    /// How often every host's role is checked in the background
    /// (pgjdbc's `hostRecheckSeconds`). Defaults to 10 seconds.
    #[must_use]
    pub fn recheck_interval(mut self, interval: Duration) -> Self {
        self.recheck_interval = interval;
        self
    }

    /// The least time between two checks asked for by failures (a checkout
    /// that found no host of its role, a connection that saw its server
    /// change). Defaults to 100 ms.
    #[must_use]
    pub fn recheck_gap(mut self, gap: Duration) -> Self {
        self.recheck_gap = gap;
        self
    }

    /// Builds one pool per host (lazily: none connects before the first
    /// check), checks every host's role once, and starts the background
    /// rechecks on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`HostPoolError::Config`] for a config that lists no host, mismatched
    /// ports or hostaddrs, a zero recheck setting, or settings the pool or
    /// the manager refuse; [`HostPoolError::Unreachable`] when no host
    /// answered the first check.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes the host pools it had built.
    pub async fn build(self) -> Result<HostPool<Tls>, HostPoolError> {
        if self.recheck_interval.is_zero() || self.recheck_gap.is_zero() {
            return Err(HostConfigError::ZeroRecheck.into());
        }
        let hosts = self.config.get_hosts();
        let ports = self.config.get_ports();
        let addrs = self.config.get_hostaddrs();
        if hosts.is_empty() {
            return Err(HostConfigError::NoHost.into());
        }
        if ports.len() > 1 && ports.len() != hosts.len() {
            return Err(HostConfigError::PortCount {
                hosts: hosts.len(),
                ports: ports.len(),
            }
            .into());
        }
        if !addrs.is_empty() && addrs.len() != hosts.len() {
            return Err(HostConfigError::HostaddrCount {
                hosts: hosts.len(),
                hostaddrs: addrs.len(),
            }
            .into());
        }
        let port = |i: usize| match ports.len() {
            0 => 5432,
            1 => ports[0],
            _ => ports[i],
        };
        let names: Vec<Arc<str>> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| Arc::from(label(h, port(i))))
            .collect();
        let registry = Arc::new(Registry::new(names.clone()));
        let mut pools = Vec::with_capacity(hosts.len());
        for (i, host) in hosts.iter().enumerate() {
            let config = single_host(&self.config, host, addrs.get(i).copied(), port(i));
            let mut manager = PostgresManager::new(config, self.tls.clone());
            if let Some(customize) = &self.customize {
                manager = customize(manager).map_err(HostConfigError::Manager)?;
            }
            let pool_config = self
                .pool_config
                .clone()
                .with_metric_label("host", &*names[i])
                .map_err(HostConfigError::Pool)?;
            let manager = HostManager {
                inner: manager,
                registry: Arc::clone(&registry),
                index: i,
            };
            pools.push(Pool::new_lazy(manager, pool_config));
        }
        let inner = Arc::new(Inner {
            registry,
            pools,
            read_target: self.read_target,
            load_balance: self.load_balance,
            acquire_timeout: self.pool_config.acquire_timeout(),
            probe_timeout: self.pool_config.connect_timeout(),
            closed: AtomicBool::new(false),
        });
        let errors = inner.probe_all().await;
        if errors.len() == inner.pools.len() {
            inner.close().await;
            return Err(HostPoolError::Unreachable { errors });
        }
        tokio::spawn(recheck_loop(
            Arc::downgrade(&inner),
            Arc::clone(&inner.registry),
            self.recheck_interval,
            self.recheck_gap,
        ));
        Ok(HostPool { inner })
    }
}

/// `host:port` for the `host` label and the events.
fn label(host: &Host, port: u16) -> String {
    match host {
        Host::Tcp(name) => format!("{name}:{port}"),
        #[cfg(unix)]
        Host::Unix(path) => format!("{}:{port}", path.display()),
    }
}

/// `base` with its host list replaced by `host` alone; every other setting
/// that `tokio_postgres::Config` exposes is carried over.
fn single_host(
    base: &Config,
    host: &Host,
    hostaddr: Option<std::net::IpAddr>,
    port: u16,
) -> Config {
    let mut c = Config::new();
    match host {
        Host::Tcp(name) => c.host(name),
        #[cfg(unix)]
        Host::Unix(path) => c.host_path(path),
    };
    if let Some(addr) = hostaddr {
        c.hostaddr(addr);
    }
    c.port(port);
    if let Some(user) = base.get_user() {
        c.user(user);
    }
    if let Some(password) = base.get_password() {
        c.password(password);
    }
    if let Some(db) = base.get_dbname() {
        c.dbname(db);
    }
    if let Some(options) = base.get_options() {
        c.options(options);
    }
    if let Some(app) = base.get_application_name() {
        c.application_name(app);
    }
    c.ssl_mode(base.get_ssl_mode())
        .ssl_negotiation(base.get_ssl_negotiation())
        .channel_binding(base.get_channel_binding())
        .keepalives(base.get_keepalives())
        .keepalives_idle(base.get_keepalives_idle());
    if let Some(t) = base.get_connect_timeout() {
        c.connect_timeout(*t);
    }
    if let Some(t) = base.get_tcp_user_timeout() {
        c.tcp_user_timeout(*t);
    }
    if let Some(i) = base.get_keepalives_interval() {
        c.keepalives_interval(i);
    }
    if let Some(r) = base.get_keepalives_retries() {
        c.keepalives_retries(r);
    }
    c
}

/// What every handle of one host pool shares.
struct Inner<Tls: HostTls> {
    registry: Arc<Registry>,
    pools: Vec<Pool<HostManager<Tls>>>,
    read_target: SessionTarget,
    load_balance: LoadBalanceHosts,
    acquire_timeout: Duration,
    probe_timeout: Duration,
    closed: AtomicBool,
}

impl<Tls: HostTls> Drop for Inner<Tls> {
    fn drop(&mut self) {
        // The rechecker holds a weak handle: wake it so it sees the end.
        self.registry.recheck.notify_one();
    }
}

impl<Tls> Inner<Tls>
where
    Tls: HostTls,
{
    /// The hosts to try for `target`: on the first pass those known to
    /// fit, then those of unknown role; on the second (`prefer-standby`
    /// only) the other hosts that are up.
    fn order(&self, target: SessionTarget, second_pass: bool) -> Vec<usize> {
        let mut fit = Vec::new();
        let mut unknown = Vec::new();
        for i in 0..self.pools.len() {
            match self.registry.status(i) {
                HostStatus::Up(role) if target.accepts(role) != second_pass => fit.push(i),
                HostStatus::Unknown if !second_pass => unknown.push(i),
                _ => {}
            }
        }
        if self.load_balance == LoadBalanceHosts::Random {
            fastrand::shuffle(&mut fit);
        }
        fit.extend(unknown);
        fit
    }

    async fn get(
        &self,
        target: SessionTarget,
        site: &'static Location<'static>,
    ) -> Result<HostConnection<Tls>, HostPoolError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(HostPoolError::Closed);
        }
        let deadline = tokio::time::Instant::now() + self.acquire_timeout;
        let mut last_error = None;
        for second_pass in [false, true] {
            if second_pass && target != SessionTarget::PreferStandby {
                break;
            }
            for i in self.order(target, second_pass) {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let conn = match self.pools[i].get_for(left, site).await {
                    Ok(conn) => conn,
                    Err(PoolError::Closed) => return Err(HostPoolError::Closed),
                    Err(error @ PoolError::Timeout { .. }) => {
                        if let PoolError::Timeout { waited, state, .. } = &error {
                            if state.in_use >= state.max_size {
                                self.registry.exhausted(i, *waited);
                            }
                        }
                        return Err(HostPoolError::Pool {
                            host: Arc::clone(&self.registry.hosts[i].addr),
                            error,
                        });
                    }
                    Err(error) => {
                        // The manager marked the host down when its connect
                        // failed; a fail-fast error may come without one.
                        self.registry.down(i, &error);
                        last_error = Some(error.to_string());
                        continue;
                    }
                };
                let role = match self.registry.status(i) {
                    HostStatus::Up(role) => role,
                    // Unknown since the checkout began: ask this connection.
                    _ => match query_role(&conn).await {
                        Ok(role) => {
                            if self.registry.up(i, role) {
                                self.pools[i].manager().inner.retire_all();
                                conn.discard();
                                continue;
                            }
                            role
                        }
                        Err(error) => {
                            self.registry.down(i, &error);
                            last_error = Some(error.to_string());
                            conn.discard();
                            continue;
                        }
                    },
                };
                let fits = if second_pass {
                    target.accepts_on_second_pass(role)
                } else {
                    target.accepts(role)
                };
                if fits && !conn.is_retired() {
                    return Ok(HostConnection {
                        conn,
                        host: Arc::clone(&self.registry.hosts[i].addr),
                        role,
                    });
                }
            }
        }
        self.registry.recheck.notify_one();
        Err(HostPoolError::NoHost {
            target,
            hosts: self.statuses(),
            last_error,
        })
    }

    fn statuses(&self) -> Vec<(Arc<str>, HostStatus)> {
        (0..self.pools.len())
            .map(|i| {
                (
                    Arc::clone(&self.registry.hosts[i].addr),
                    self.registry.status(i),
                )
            })
            .collect()
    }

    /// Checks every host's role at once; the errors of the hosts that did
    /// not answer.
    async fn probe_all(&self) -> Vec<(Arc<str>, String)> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let pool = pool.clone();
            let registry = Arc::clone(&self.registry);
            let timeout = self.probe_timeout;
            tasks.spawn(async move { (i, probe(&pool, &registry, i, timeout).await) });
        }
        let mut errors = Vec::new();
        while let Some(done) = tasks.join_next().await {
            if let Ok((i, Err(e))) = done {
                errors.push((Arc::clone(&self.registry.hosts[i].addr), e));
            }
        }
        errors
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.registry.recheck.notify_one();
        for pool in &self.pools {
            pool.close().await;
        }
    }
}

/// Checks host `i`'s role on one of its pool's connections (an idle one,
/// or a new one within `timeout`); a host whose every connection is in use
/// is left as it is.
async fn probe<Tls>(
    pool: &Pool<HostManager<Tls>>,
    registry: &Registry,
    i: usize,
    timeout: Duration,
) -> Result<(), String>
where
    Tls: HostTls,
{
    let conn = match pool.try_get() {
        Some(conn) => conn,
        None => {
            let state = pool.state();
            if state.in_use >= state.max_size {
                return Ok(());
            }
            match pool.get_timeout(timeout).await {
                Ok(conn) => conn,
                Err(PoolError::Timeout { state, .. }) if state.in_use >= state.max_size => {
                    return Ok(());
                }
                Err(e) => {
                    registry.down(i, &e);
                    return Err(e.to_string());
                }
            }
        }
    };
    match query_role(&conn).await {
        Ok(role) => {
            if registry.up(i, role) {
                pool.manager().inner.retire_all();
            }
            Ok(())
        }
        Err(e) => {
            registry.down(i, &e);
            conn.discard();
            Err(e.to_string())
        }
    }
}

/// Checks every host at each `interval`, and when woken, at most once per
/// `gap`; ends when the host pool is dropped or closed.
async fn recheck_loop<Tls>(
    pool: Weak<Inner<Tls>>,
    registry: Arc<Registry>,
    interval: Duration,
    gap: Duration,
) where
    Tls: HostTls,
{
    loop {
        // Woken or timed out: either way, check.
        let _ = tokio::time::timeout(interval, registry.recheck.notified()).await;
        let Some(inner) = pool.upgrade() else { return };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        inner.probe_all().await;
        drop(inner);
        tokio::time::sleep(gap).await;
    }
}

/// One handle over a primary and its standbys, one pool per host; see the
/// [module docs](self). Clones share the host pool.
pub struct HostPool<Tls: HostTls> {
    inner: Arc<Inner<Tls>>,
}

impl<Tls: HostTls> Clone for HostPool<Tls> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<Tls: HostTls> fmt::Debug for HostPool<Tls> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<_> = (0..self.inner.pools.len())
            .map(|i| {
                (
                    self.inner.registry.hosts[i].addr.to_string(),
                    self.inner.registry.status(i),
                )
            })
            .collect();
        f.debug_struct("HostPool")
            .field("hosts", &hosts)
            .field("read_target", &self.inner.read_target)
            .field("load_balance", &self.inner.load_balance)
            .finish_non_exhaustive()
    }
}

impl<Tls> HostPool<Tls>
where
    Tls: HostTls,
{
    /// A builder over the hosts `config` lists (`host=a,b,c`, with one port
    /// or one per host); every other setting of `config` applies to each
    /// host. Its `target_session_attrs` is not used: each checkout names
    /// its own target. Its `load_balance_hosts` is the default order.
    pub fn builder(config: Config, tls: Tls) -> HostPoolBuilder<Tls> {
        let load_balance = match config.get_load_balance_hosts() {
            DriverLoadBalance::Random => LoadBalanceHosts::Random,
            _ => LoadBalanceHosts::Disable,
        };
        HostPoolBuilder {
            config,
            tls,
            pool_config: PoolConfig::default(),
            customize: None,
            read_target: SessionTarget::PreferStandby,
            load_balance,
            recheck_interval: DEFAULT_RECHECK_INTERVAL,
            recheck_gap: DEFAULT_RECHECK_GAP,
        }
    }

    /// A connection to a host that fits `target` (libpq's
    /// `target_session_attrs` meanings): hosts known to fit first (in
    /// random order with [`LoadBalanceHosts::Random`]), then hosts of
    /// unknown role, whose role the connection reveals; for
    /// [`SessionTarget::PreferStandby`], then any host that is up. A host
    /// that fails to connect is marked down and the next one tried.
    ///
    /// # Errors
    ///
    /// [`HostPoolError::NoHost`] at once when no host fits (a recheck is
    /// asked for); [`HostPoolError::Pool`] when the chosen host's checkout
    /// ran out of time (the pool config's `acquire_timeout`, for all the
    /// hosts tried together); [`HostPoolError::Closed`].
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::get`]: dropping the future loses no connection.
    #[track_caller]
    pub fn get(
        &self,
        target: SessionTarget,
    ) -> impl Future<Output = Result<HostConnection<Tls>, HostPoolError>> + Send + '_ {
        let site = Location::caller();
        self.inner.get(target, site)
    }

    /// A connection that accepts writes: [`get`](Self::get) with
    /// [`SessionTarget::ReadWrite`].
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// # Cancel safety
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn write(
        &self,
    ) -> impl Future<Output = Result<HostConnection<Tls>, HostPoolError>> + Send + '_ {
        let site = Location::caller();
        self.inner.get(SessionTarget::ReadWrite, site)
    }

    /// A connection for reads: [`get`](Self::get) with the read target
    /// ([`SessionTarget::PreferStandby`] unless
    /// [`read_target`](HostPoolBuilder::read_target) said otherwise).
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// # Cancel safety
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn read(
        &self,
    ) -> impl Future<Output = Result<HostConnection<Tls>, HostPoolError>> + Send + '_ {
        let site = Location::caller();
        self.inner.get(self.inner.read_target, site)
    }

    /// Checks every host's role now, as the background recheck does;
    /// returns the hosts that did not answer, with their errors.
    pub async fn recheck(&self) -> Vec<(Arc<str>, String)> {
        self.inner.probe_all().await
    }

    /// Closes every host's pool (as [`Pool::close`]) and stops the
    /// rechecks; checkouts then fail with [`HostPoolError::Closed`].
    pub async fn close(&self) {
        self.inner.close().await;
    }
}

impl<Tls: HostTls> HostPool<Tls> {
    /// Events about the hosts from now on. A receiver that falls more than
    /// 256 events behind loses the oldest (`RecvError::Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<HostEvent> {
        self.inner.registry.subscribe()
    }

    /// Every host, in the order listed, with its status and its pool's
    /// counts.
    pub fn hosts(&self) -> Vec<HostInfo> {
        (0..self.inner.pools.len())
            .map(|i| HostInfo {
                host: Arc::clone(&self.inner.registry.hosts[i].addr),
                status: self.inner.registry.status(i),
                state: self.inner.pools[i].state(),
            })
            .collect()
    }

    /// The pool of the host `host:port` (for its metrics, holders,
    /// resizing), if listed.
    pub fn host_pool(&self, host: &str) -> Option<&Pool<HostManager<Tls>>> {
        let i = self
            .inner
            .registry
            .hosts
            .iter()
            .position(|h| &*h.addr == host)?;
        Some(&self.inner.pools[i])
    }

    /// Every connection held now, per host (see [`Pool::holders`]): where
    /// it was checked out ([`get`](Self::get), [`read`](Self::read),
    /// [`write`](Self::write)'s caller) and for how long.
    pub fn holders(&self) -> Vec<(Arc<str>, Vec<Holder>)> {
        (0..self.inner.pools.len())
            .map(|i| {
                (
                    Arc::clone(&self.inner.registry.hosts[i].addr),
                    self.inner.pools[i].holders(),
                )
            })
            .collect()
    }
}

/// One host of a [`HostPool`], as [`HostPool::hosts`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// `host:port`.
    pub host: Arc<str>,
    /// What the host pool last learnt about it.
    pub status: HostStatus,
    /// Its pool's counts.
    pub state: PoolState,
}

/// A connection checked out of a [`HostPool`]: dereferences to the
/// [`PgClient`]; dropping it returns it to its host's pool.
pub struct HostConnection<Tls>
where
    Tls: HostTls,
{
    conn: PooledConnection<HostManager<Tls>>,
    host: Arc<str>,
    role: ServerRole,
}

impl<Tls> HostConnection<Tls>
where
    Tls: HostTls,
{
    /// `host:port` of its server.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its server's role when it was checked out.
    pub fn role(&self) -> ServerRole {
        self.role
    }

    /// The pooled connection itself.
    pub fn into_pooled(self) -> PooledConnection<HostManager<Tls>> {
        self.conn
    }
}

impl<Tls> fmt::Debug for HostConnection<Tls>
where
    Tls: HostTls,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostConnection")
            .field("host", &self.host)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl<Tls> Deref for HostConnection<Tls>
where
    Tls: HostTls,
{
    type Target = PgClient;

    fn deref(&self) -> &PgClient {
        &self.conn
    }
}

impl<Tls> DerefMut for HostConnection<Tls>
where
    Tls: HostTls,
{
    fn deref_mut(&mut self) -> &mut PgClient {
        &mut self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_configs_keep_the_settings_and_drop_the_other_hosts() {
        let base: Config = "host=a,b port=5433,5434 user=app password=pw dbname=shop \
                            application_name=svc connect_timeout=3 keepalives_idle=7"
            .parse()
            .unwrap();
        let one = single_host(&base, &base.get_hosts()[1], None, 5434);
        assert_eq!(one.get_hosts(), [Host::Tcp("b".into())]);
        assert_eq!(one.get_ports(), [5434]);
        assert_eq!(one.get_user(), Some("app"));
        assert_eq!(one.get_password(), Some(&b"pw"[..]));
        assert_eq!(one.get_dbname(), Some("shop"));
        assert_eq!(one.get_application_name(), Some("svc"));
        assert_eq!(one.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(one.get_keepalives_idle(), Duration::from_secs(7));
        assert_eq!(label(&base.get_hosts()[0], 5433), "a:5433");
    }

    #[tokio::test]
    async fn bad_host_lists_are_refused() {
        let check = |s: &'static str| async move {
            let config: Config = s.parse().unwrap();
            match HostPool::builder(config, tokio_postgres::NoTls)
                .build()
                .await
            {
                Err(HostPoolError::Config(e)) => e,
                other => panic!("{s}: {other:?}"),
            }
        };
        assert_eq!(check("user=app").await, HostConfigError::NoHost);
        assert_eq!(
            check("host=a,b,c port=1,2").await,
            HostConfigError::PortCount { hosts: 3, ports: 2 }
        );
        let config: Config = "host=a".parse().unwrap();
        let zero = HostPool::builder(config, tokio_postgres::NoTls)
            .recheck_interval(Duration::ZERO)
            .build()
            .await;
        assert!(matches!(
            zero,
            Err(HostPoolError::Config(HostConfigError::ZeroRecheck))
        ));
        let config: Config = "host=a".parse().unwrap();
        let taken = HostPool::builder(config, tokio_postgres::NoTls)
            .pool_config(
                PoolConfig::builder()
                    .metric_label("host", "mine")
                    .build()
                    .unwrap(),
            )
            .build()
            .await;
        let Err(HostPoolError::Config(HostConfigError::Pool(e))) = taken else {
            panic!("{taken:?}");
        };
        assert_eq!(e.field(), "metric_label");
    }

    #[tokio::test]
    async fn no_reachable_host_fails_the_build_with_every_error() {
        // Two closed loopback ports.
        let ports: Vec<u16> = (0..2)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        let config: Config = format!(
            "host=127.0.0.1,127.0.0.1 port={},{} user=x connect_timeout=2",
            ports[0], ports[1]
        )
        .parse()
        .unwrap();
        let err = HostPool::builder(config, tokio_postgres::NoTls)
            .build()
            .await
            .unwrap_err();
        let HostPoolError::Unreachable { errors } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(errors.len(), 2, "{err}");
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{}", ports[1])),
            "{err}"
        );
    }
}
