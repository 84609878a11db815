//! [`HostPool`]: one handle over a PostgreSQL primary and its standbys,
//! with one pool per host, for the tokio-postgres manager (feature
//! `tokio-postgres`, [`HostPool::builder`]) and sqlx's `PgConnection`
//! (feature `sqlx-postgres`, `pool_sqlx::hosts::builder`).
//!
//! Each host gets a [`Pool`] of its own, so each has its own hard bound
//! (`max_size` of the [`PoolConfig`] given), its own metrics (the config's
//! name as the `pool` label, `host:port` as the `host` label) and its own
//! holders. A checkout names a [`SessionTarget`] with libpq's
//! `target_session_attrs` meanings; [`HostPool::write`] asks for
//! `read-write`, [`HostPool::read`] for the read target (`prefer-standby`
//! unless set otherwise).
//!
//! # Roles and rechecks
//!
//! Every new connection learns its server's role: with tokio-postgres from
//! the `in_hot_standby` and `default_transaction_read_only` parameter
//! statuses that PostgreSQL 14 and later send at startup, else (and always
//! with sqlx, which does not expose them) with one query
//! (`pg_is_in_recovery()` and `transaction_read_only`). The host's status
//! ([`HostStatus`]) follows what the last connect or check said. With
//! tokio-postgres, a connection whose query through the
//! [`PgClient`](crate::pg::PgClient) fails with a
//! SQLSTATE that says its server turned read-only (`25006`) or is going
//! away is retired with every older connection to that server, and its
//! host's role becomes unknown until checked again; a role check that
//! finds a writable host read-only retires its connections too. So a write
//! checkout is handed a connection only from a host last seen writable.
//! sqlx connections are not watched that way (the pool sees none of their
//! query errors): a sqlx host that turns read-only in place is found by the
//! next check.
//!
//! Hosts are checked again in the background every
//! [`recheck_interval`](HostPoolBuilder::recheck_interval) (pgjdbc's
//! `hostRecheckSeconds`; 10 seconds by default), and at once when a
//! checkout finds no host of the role it wants or a connection sees its
//! server change, at most once per
//! [`recheck_gap`](HostPoolBuilder::recheck_gap) (100 ms by default). Each
//! host is checked by a task of its own, on its own timer, and what a check
//! finds is published as soon as it is known: a host that accepts
//! connections and never answers delays no check of another host. Each
//! check (its connect and its query together) is bounded by the pool
//! config's `connect_timeout`, and never by more than the recheck
//! interval; a host that does not answer within it is marked down and its
//! connections are retired (they may sit on sockets that will never
//! answer), and it is checked again an interval after the last check
//! began. So a host that answers again is seen up within two recheck
//! intervals, as long as the pool config's `connect_timeout` is shorter
//! than the interval: the connects a check started to a host that accepts
//! connections and never answers are the pool's, and hold its connect
//! places until their own `connect_timeout` (while they do, the pool fails
//! a new checkout fast); with a `connect_timeout` as long as the interval
//! or longer (the defaults are both 10 seconds), the bound is one interval
//! plus that timeout.
//!
//! After a failover (the primary stops, a standby is promoted), writes fail
//! fast with [`HostPoolError::NoHost`] until a check sees the promoted
//! server writable, then go there; reads go on to the standbys throughout.
//!
//! The checking tasks run on the tokio runtime of the build, and are started
//! again on the runtime of the next checkout when that one has ended (a
//! host pool in a `static` used by several `#[tokio::test]`s).
//!
//! # Events
//!
//! [`HostPool::subscribe`] returns a broadcast receiver of [`HostEvent`]s:
//! host up, host down, role changed (promotion, demotion), every host down,
//! recovered, a host's pool exhausted. The same facts are logged through
//! `tracing` (target `pool_postgres::hosts`).
//!
//! ```no_run
//! # #[cfg(feature = "tokio-postgres")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use pool_postgres::hosts::{HostPool, SessionTarget};
//! use pool_core::PoolConfig;
//! use tokio_postgres::NoTls;
//!
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

#[cfg(feature = "tokio-postgres")]
mod postgres;
mod registry;
mod role;

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

use pool_api::{
    async_trait, ConfigError, ErrorClass, Holder, ManageConnection, PoolConfig, PoolError,
    PoolState,
};
use tokio::sync::broadcast;

#[cfg(feature = "tokio-postgres")]
pub use postgres::HostTls;
pub use registry::HostEvent;
pub use role::{HostStatus, LoadBalanceHosts, ServerRole, SessionTarget, UnknownSessionTarget};

use crate::{Pool, PooledConnection};
use registry::Registry;
use role::Schedule;

/// The role query for servers that do not report their role at startup.
#[doc(hidden)]
pub const ROLE_SQL: &str =
    "SELECT pg_is_in_recovery()::text, current_setting('transaction_read_only')";

/// The role from [`ROLE_SQL`]'s two text columns.
#[doc(hidden)]
pub fn role_from_text(in_recovery: Option<&str>, read_only: Option<&str>) -> ServerRole {
    match in_recovery {
        Some("false") => ServerRole::from_flags(false, read_only != Some("off")),
        // Anything but a plain "not in recovery" is taken as a standby:
        // never route writes on a doubt.
        _ => ServerRole::Standby,
    }
}

/// Default [`HostPoolBuilder::recheck_interval`].
pub const DEFAULT_RECHECK_INTERVAL: Duration = Duration::from_secs(10);
/// Default [`HostPoolBuilder::recheck_gap`].
pub const DEFAULT_RECHECK_GAP: Duration = Duration::from_millis(100);

/// A manager a [`HostPool`] runs one host's connections with: it knows how
/// to learn its server's role. Implemented by
/// [`PostgresManager`](crate::pg::PostgresManager)
/// (feature `tokio-postgres`) and
/// `pool_sqlx::SqlxManager<PgConnection>`
/// (feature `sqlx-postgres`); sealed.
pub trait HostBackend: ManageConnection + driver::Backend {}

/// For driver crates: what a manager implements to run under a host pool,
/// and the role query with its reading. An application never names these.
#[doc(hidden)]
pub mod driver {
    pub use super::{role_from_text, ROLE_SQL};

    /// A host pool's builder over `hosts` (each `host:port` with its
    /// manager), with the defaults; an empty list is refused when built.
    pub fn builder<M: super::HostBackend>(
        hosts: Result<Vec<(std::sync::Arc<str>, M)>, super::HostConfigError>,
    ) -> super::HostPoolBuilder<M> {
        super::HostPoolBuilder::over(hosts)
    }

    use super::*;

    /// The role checks of one kind of manager; not nameable outside the
    /// crate, which seals [`HostBackend`].
    #[async_trait]
    pub trait Backend: ManageConnection {
        /// The role of the server a connection just opened talks to (from
        /// what it reported at startup where it can, else asked).
        async fn startup_role(
            &self,
            conn: &mut Self::Connection,
        ) -> Result<ServerRole, Self::Error>;

        /// Asks the server a connection talks to for its role now.
        async fn current_role(
            &self,
            conn: &mut Self::Connection,
        ) -> Result<ServerRole, Self::Error>;

        /// Whether a query on this connection itself saw its server turn
        /// read-only or go away.
        fn saw_server_gone(&self, _conn: &Self::Connection) -> bool {
            false
        }

        /// Whether this connection must not be handed out (retired).
        fn is_retired(&self, _conn: &Self::Connection) -> bool {
            false
        }

        /// Retires every connection opened so far.
        fn retire_all(&self) {}
    }
}

/// The manager of one host's pool: the backend's manager for that host
/// alone, which tells the host pool what each connect and each retired
/// connection says about its server. Made by [`HostPoolBuilder::build`].
pub struct HostManager<M> {
    inner: M,
    registry: Arc<Registry>,
    index: usize,
}

impl<M> HostManager<M> {
    /// The manager of this host's connections.
    pub fn backend(&self) -> &M {
        &self.inner
    }

    /// `host:port`.
    pub fn host(&self) -> &str {
        &self.registry.hosts[self.index].addr
    }
}

impl<M: HostBackend> HostManager<M> {
    /// Records `role` for this host, retiring its connections when it is
    /// no longer writable but was.
    fn observed(&self, role: ServerRole) {
        if self.registry.up(self.index, role) {
            self.inner.retire_all();
        }
    }
}

impl<M: fmt::Debug> fmt::Debug for HostManager<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostManager")
            .field("host", &self.host())
            .field("backend", &self.inner)
            .finish()
    }
}

#[async_trait]
impl<M: HostBackend> ManageConnection for HostManager<M> {
    type Connection = M::Connection;
    type Error = M::Error;

    async fn connect(&self) -> Result<M::Connection, M::Error> {
        let mut conn = match self.inner.connect().await {
            Ok(conn) => conn,
            Err(e) => {
                if self.inner.classify_error(&e) != ErrorClass::CapacityRefusal {
                    self.registry.down(self.index, &e);
                }
                return Err(e);
            }
        };
        match self.inner.startup_role(&mut conn).await {
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

    async fn is_valid(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
        self.inner.is_valid(conn).await
    }

    fn has_broken(&self, conn: &mut M::Connection) -> bool {
        if self.inner.saw_server_gone(conn) {
            self.registry.suspect(self.index);
        }
        self.inner.has_broken(conn)
    }

    /// The backend's capacity refusals stay capacity refusals; every
    /// other error is transient here, the backend's permanent ones too: a
    /// host's pool keeps retrying a host that refused, as it did before
    /// the classifier had a permanent class.
    fn classify_error(&self, error: &M::Error) -> ErrorClass {
        match self.inner.classify_error(error) {
            ErrorClass::CapacityRefusal => ErrorClass::CapacityRefusal,
            _ => ErrorClass::Transient,
        }
    }

    fn check(&self) -> Result<(), M::Error> {
        self.inner.check()
    }

    /// This host's `host:port`.
    fn target(&self) -> Option<String> {
        Some(self.host().to_owned())
    }

    async fn close(&self, conn: M::Connection) {
        self.inner.close(conn).await;
    }

    fn awaits_close(&self) -> bool {
        self.inner.awaits_close()
    }

    fn needs_reset(&self, conn: &mut M::Connection) -> bool {
        self.inner.needs_reset(conn)
    }

    async fn reset(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
        self.inner.reset(conn).await
    }
}

/// A boxed error from a manager customisation.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a host pool could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostConfigError {
    /// No host is listed.
    NoHost,
    /// A number of ports that is neither 0, 1 nor the number of hosts.
    PortCount {
        /// Hosts listed.
        hosts: usize,
        /// Ports listed.
        ports: usize,
    },
    /// `hostaddr`s listed, but not one per host.
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
    /// A host's manager refused its settings (its `check`, after
    /// [`HostPoolBuilder::manager`]); its error is the source.
    Manager(BoxError),
}

impl fmt::Display for HostConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoHost => f.write_str("the host pool lists no host"),
            Self::PortCount { hosts, ports } => write!(
                f,
                "the host pool lists {hosts} hosts and {ports} ports: give one port, or one per \
                 host"
            ),
            Self::HostaddrCount { hosts, hostaddrs } => write!(
                f,
                "the host pool lists {hosts} hosts and {hostaddrs} hostaddrs: give one per host"
            ),
            Self::ZeroRecheck => f.write_str("the host recheck interval and gap must not be zero"),
            Self::Pool(e) => write!(f, "host pool: {e}"),
            Self::Manager(e) => write!(f, "host pool manager settings: {e}"),
        }
    }
}

impl std::error::Error for HostConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Pool(e) => Some(e),
            Self::Manager(e) => Some(&**e),
            _ => None,
        }
    }
}

/// What a host pool checkout or build can fail with; `E` is the manager's
/// error.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostPoolError<E> {
    /// No host of the role wanted answered: none is known to have it, or
    /// every one that has it (or whose role is unknown) failed to connect.
    /// Returned as soon as the candidates are tried, without waiting for a
    /// connection to come back (the hosts are rechecked in the
    /// background), so a write checkout during a failover fails fast
    /// instead of waiting out its timeout.
    NoHost {
        /// What the checkout wanted.
        target: SessionTarget,
        /// Every host's status when it gave up.
        hosts: Vec<(Arc<str>, HostStatus)>,
        /// The last connect error seen by this checkout, as text.
        last_error: Option<String>,
    },
    /// The checkout from the chosen host ran out of time
    /// ([`PoolError::Timeout`]: every connection in use, or a connect that
    /// did not finish).
    Pool {
        /// `host:port`.
        host: Arc<str>,
        /// The host pool's error.
        error: PoolError<E>,
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

impl<E: fmt::Display> fmt::Display for HostPoolError<E> {
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

impl<E: std::error::Error + 'static> std::error::Error for HostPoolError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Pool { error, .. } => Some(error),
            Self::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<HostConfigError> for HostPoolError<E> {
    fn from(e: HostConfigError) -> Self {
        Self::Config(e)
    }
}

/// Each host that did not answer, with its error as text.
type HostErrors = Vec<(Arc<str>, String)>;

/// Each host's `host:port` name and manager, or why they could not be made.
type NamedManagers<M> = Result<Vec<(Arc<str>, M)>, HostConfigError>;

/// Builds a [`HostPool`]; made by [`HostPool::builder`] (tokio-postgres)
/// or `pool_sqlx::hosts::builder` (sqlx).
pub struct HostPoolBuilder<M> {
    hosts: NamedManagers<M>,
    pool_config: PoolConfig,
    read_target: SessionTarget,
    load_balance: LoadBalanceHosts,
    recheck_interval: Duration,
    recheck_gap: Duration,
}

impl<M> fmt::Debug for HostPoolBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Result<Vec<&str>, _> = self
            .hosts
            .as_ref()
            .map(|h| h.iter().map(|(name, _)| &**name).collect());
        f.debug_struct("HostPoolBuilder")
            .field("hosts", &hosts)
            .field("pool_config", &self.pool_config)
            .field("read_target", &self.read_target)
            .field("load_balance", &self.load_balance)
            .field("recheck_interval", &self.recheck_interval)
            .field("recheck_gap", &self.recheck_gap)
            .finish_non_exhaustive()
    }
}

impl<M: HostBackend> HostPoolBuilder<M> {
    /// A builder over `hosts` (each `host:port` with its manager), with the
    /// defaults.
    fn over(hosts: NamedManagers<M>) -> Self {
        Self {
            hosts,
            pool_config: PoolConfig::default(),
            read_target: SessionTarget::PreferStandby,
            load_balance: LoadBalanceHosts::Disable,
            recheck_interval: DEFAULT_RECHECK_INTERVAL,
            recheck_gap: DEFAULT_RECHECK_GAP,
        }
    }

    /// The settings of each host's pool: its `max_size` is the hard bound
    /// of every host, its name the `pool` label of every host's series
    /// (each also gets a `host` label). Defaults to
    /// `PoolConfig::default()`.
    #[must_use]
    pub fn pool_config(mut self, config: PoolConfig) -> Self {
        self.pool_config = config;
        self
    }

    /// Applied to each host's manager (reset mode, keepalive, password
    /// provider, fleet budget, ...). Settings the manager's `check` refuses
    /// (a fleet budget with an empty name, say) fail
    /// [`build`](Self::build) with [`HostConfigError::Manager`].
    #[must_use]
    pub fn manager<F>(mut self, customize: F) -> Self
    where
        F: Fn(M) -> M,
    {
        self.hosts = self.hosts.map(|hosts| {
            hosts
                .into_iter()
                .map(|(name, m)| (name, customize(m)))
                .collect()
        });
        self
    }

    /// What [`HostPool::read`] asks for. Defaults to
    /// [`SessionTarget::PreferStandby`]: a standby, else any host that is
    /// up; [`SessionTarget::Standby`] never falls back.
    #[must_use]
    pub fn read_target(mut self, target: SessionTarget) -> Self {
        self.read_target = target;
        self
    }

    /// The order hosts of one role are tried in, libpq's
    /// `load_balance_hosts`. Defaults to what a tokio-postgres config says
    /// (`load_balance_hosts=random` in a connection string), else
    /// [`LoadBalanceHosts::Disable`].
    #[must_use]
    pub fn load_balance_hosts(mut self, load_balance: LoadBalanceHosts) -> Self {
        self.load_balance = load_balance;
        self
    }

    /// How often every host's role is checked in the background
    /// (pgjdbc's `hostRecheckSeconds`). Defaults to 10 seconds. Each check
    /// runs one query on one of the host's pooled connections (an idle
    /// one, else a new one; none while every connection is in use), so a
    /// reachable host keeps at least one connection open while checks
    /// run more often than the pool's `idle_timeout`. A check, connect and
    /// query together, has the pool config's `connect_timeout` to answer,
    /// but never more than this interval: a host that takes longer than
    /// the interval to connect is marked down by its checks (its own
    /// checkouts still connect with the full `connect_timeout`). With a
    /// `connect_timeout` shorter than this interval, a host that answers
    /// again is seen up within two intervals (see the
    /// [module docs](self#roles-and-rechecks)).
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
    /// check), starts each host's background checks on the current tokio
    /// runtime, and returns as soon as a writable host and a host of the
    /// [read target](Self::read_target) are known (one host may be both),
    /// or else once every host's first check has ended. A host that
    /// accepts connections and never answers does not hold the build up
    /// once others are known for writes and reads: its check goes on in the
    /// background, and it is of unknown role (tried after the hosts known
    /// to fit) until it ends.
    ///
    /// # Errors
    ///
    /// [`HostPoolError::Config`] for no host, mismatched ports or
    /// hostaddrs, a zero recheck setting, manager settings its `check` refuses,
    /// or a pool config that refuses the `host` label;
    /// [`HostPoolError::Unreachable`] when no host answered its first check.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the host pools it had built, which closes
    /// them.
    pub async fn build(self) -> Result<HostPool<M>, HostPoolError<M::Error>> {
        if self.recheck_interval.is_zero() || self.recheck_gap.is_zero() {
            return Err(HostConfigError::ZeroRecheck.into());
        }
        let hosts = self.hosts?;
        if hosts.is_empty() {
            return Err(HostConfigError::NoHost.into());
        }
        let registry = Arc::new(Registry::new(
            hosts.iter().map(|(name, _)| Arc::clone(name)).collect(),
        ));
        // Settings that cannot work together fail the build, before any
        // pool exists.
        for (_, manager) in &hosts {
            manager
                .check()
                .map_err(|e| HostConfigError::Manager(Box::new(e)))?;
        }
        let mut pools = Vec::with_capacity(hosts.len());
        for (index, (name, manager)) in hosts.into_iter().enumerate() {
            let pool_config = self
                .pool_config
                .clone()
                .with_metric_label("host", &*name)
                .map_err(HostConfigError::Pool)?;
            let manager = HostManager {
                inner: manager,
                registry: Arc::clone(&registry),
                index,
            };
            pools.push(Pool::new_lazy(manager, pool_config));
        }
        let schedule = Schedule::new(
            self.recheck_interval,
            self.recheck_gap,
            self.pool_config.connect_timeout(),
        );
        let inner = Arc::new(Inner {
            registry,
            pools,
            read_target: self.read_target,
            load_balance: self.load_balance,
            acquire_timeout: self.pool_config.acquire_timeout(),
            schedule,
            closed: AtomicBool::new(false),
        });
        let mut progress = inner.registry.progress();
        inner.ensure_probers();
        // Every first check ends within its limit; the margin is for a
        // loaded machine, and only bounds the wait if a check was lost.
        let deadline = Instant::now() + schedule.limit() * 2 + Duration::from_secs(1);
        loop {
            if let Some(ready) = inner.first_checks(false) {
                return match ready {
                    Ok(()) => Ok(HostPool { inner }),
                    Err(errors) => {
                        inner.close().await;
                        Err(HostPoolError::Unreachable { errors })
                    }
                };
            }
            // Progress is counted, never lost: a change made since the
            // last look is seen at once.
            if tokio::time::timeout_at(deadline, progress.changed())
                .await
                .is_err()
            {
                let Some(Err(errors)) = inner.first_checks(true) else {
                    return Ok(HostPool { inner });
                };
                inner.close().await;
                return Err(HostPoolError::Unreachable { errors });
            }
        }
    }
}

/// What every handle of one host pool shares.
struct Inner<M: HostBackend> {
    registry: Arc<Registry>,
    pools: Vec<Pool<HostManager<M>>>,
    read_target: SessionTarget,
    load_balance: LoadBalanceHosts,
    acquire_timeout: Duration,
    /// When each host is checked, and for how long at most.
    schedule: Schedule,
    closed: AtomicBool,
}

impl<M: HostBackend> Drop for Inner<M> {
    fn drop(&mut self) {
        // The probers hold weak handles: wake them so they see the end.
        self.registry.wake_all();
    }
}

/// Clears host `index`'s `probing` flag however its prober ends: made
/// before the spawn and moved into the task's future, so a future dropped
/// midway or before its first poll (its runtime shut down) clears it too,
/// and the next checkout starts another prober.
struct Probing {
    registry: Arc<Registry>,
    index: usize,
}

impl Drop for Probing {
    fn drop(&mut self) {
        // Relaxed: a flag only `ensure_probers` sets and this clears; a
        // checkout that reads it stale starts the prober at its next call.
        self.registry.hosts[self.index]
            .probing
            .store(false, Ordering::Relaxed);
    }
}

impl<M: HostBackend> Inner<M> {
    /// Starts a prober on the current runtime for every host that has none
    /// running (at the build; again after the runtime they ran on ended).
    /// Outside a tokio runtime nothing starts.
    fn ensure_probers(self: &Arc<Self>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        for (index, host) in self.registry.hosts.iter().enumerate() {
            // Relaxed: see `Probing`; two checkouts racing see one `false`
            // from the swap.
            if host.probing.load(Ordering::Relaxed) || host.probing.swap(true, Ordering::Relaxed) {
                continue;
            }
            let guard = Probing {
                registry: Arc::clone(&self.registry),
                index,
            };
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                // The guard clears the flag.
                return;
            };
            runtime.spawn(prober(
                guard,
                Arc::downgrade(self),
                Arc::clone(&self.registry),
                index,
                self.schedule,
            ));
        }
    }

    /// What the build waits for: `None` while it should wait; `Ok` once a
    /// writable host and a host of the read target are known, or every
    /// host's first check ended with one up; the errors when every host's
    /// first check failed. `give_up`: the wait is over whatever is known (a
    /// host up is enough).
    fn first_checks(&self, give_up: bool) -> Option<Result<(), HostErrors>> {
        let n = self.pools.len();
        let status = |i| self.registry.status(i);
        let known =
            |fits: &dyn Fn(ServerRole) -> bool| (0..n).any(|i| status(i).role().is_some_and(fits));
        if known(&ServerRole::is_writable) && known(&|role| self.read_target.accepts(role)) {
            return Some(Ok(()));
        }
        if !give_up && !(0..n).all(|i| self.registry.was_checked(i)) {
            return None;
        }
        if (0..n).any(|i| matches!(status(i), HostStatus::Up(_))) {
            return Some(Ok(()));
        }
        Some(Err((0..n)
            .map(|i| {
                let error = self.registry.last_error(i).map_or_else(
                    || "no answer to its first check".to_owned(),
                    |e| e.to_string(),
                );
                (Arc::clone(&self.registry.hosts[i].addr), error)
            })
            .collect()))
    }
}

impl<M: HostBackend> Inner<M> {
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
    ) -> Result<HostConnection<M>, HostPoolError<M::Error>> {
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
                let mut conn = match self.pools[i].get_for(left, site).await {
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
                let manager = self.pools[i].manager();
                let role = match self.registry.status(i) {
                    HostStatus::Up(role) => role,
                    // Unknown since the checkout began: ask this
                    // connection, within a check's limit.
                    _ => match tokio::time::timeout_at(
                        deadline.min(tokio::time::Instant::now() + self.schedule.limit()),
                        manager.inner.current_role(&mut conn),
                    )
                    .await
                    {
                        Err(_) => {
                            PooledConnection::discard(conn);
                            last_error = Some(no_answer(
                                &self.pools[i],
                                &self.registry,
                                i,
                                self.schedule.limit(),
                            ));
                            continue;
                        }
                        Ok(Ok(role)) => {
                            if self.registry.up(i, role) {
                                manager.inner.retire_all();
                                PooledConnection::discard(conn);
                                continue;
                            }
                            role
                        }
                        Ok(Err(error)) => {
                            self.registry.down(i, &error);
                            last_error = Some(error.to_string());
                            PooledConnection::discard(conn);
                            continue;
                        }
                    },
                };
                let fits = if second_pass {
                    target.accepts_on_second_pass(role)
                } else {
                    target.accepts(role)
                };
                if fits && !manager.inner.is_retired(&conn) {
                    return Ok(HostConnection {
                        conn,
                        host: Arc::clone(&self.registry.hosts[i].addr),
                        role,
                    });
                }
            }
        }
        self.registry.wake_all();
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

    /// Checks every host's role at once, each within a check's limit; the
    /// errors of the hosts that did not answer.
    async fn probe_all(&self) -> Vec<(Arc<str>, String)> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let pool = pool.clone();
            let registry = Arc::clone(&self.registry);
            let limit = self.schedule.limit();
            tasks.spawn(async move { (i, probe(&pool, &registry, i, limit).await) });
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
        self.registry.wake_all();
        for pool in &self.pools {
            pool.close().await;
        }
    }
}

/// Checks host `i`'s role on one of its pool's connections (an idle one,
/// or a new one), all within `limit`; a host whose every connection is in
/// use is left as it is.
async fn probe<M: HostBackend>(
    pool: &Pool<HostManager<M>>,
    registry: &Registry,
    i: usize,
    limit: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    let mut conn = match pool.try_get() {
        Some(conn) => conn,
        None => {
            let state = pool.state();
            if state.in_use >= state.max_size {
                return Ok(());
            }
            // The pool's own wait is bounded by `limit` too; the outer
            // bound also covers what it runs before it starts waiting.
            match tokio::time::timeout_at(deadline, pool.get_timeout(limit)).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(PoolError::Timeout { state, .. })) if state.in_use >= state.max_size => {
                    return Ok(());
                }
                Ok(Err(PoolError::Timeout { .. })) | Err(_) => {
                    return Err(no_answer(pool, registry, i, limit));
                }
                Ok(Err(e)) => {
                    registry.down(i, &e);
                    return Err(e.to_string());
                }
            }
        }
    };
    let manager = pool.manager();
    match tokio::time::timeout_at(deadline, manager.inner.current_role(&mut conn)).await {
        Ok(Ok(role)) => {
            if registry.up(i, role) {
                manager.inner.retire_all();
            }
            Ok(())
        }
        Ok(Err(e)) => {
            registry.down(i, &e);
            PooledConnection::discard(conn);
            Err(e.to_string())
        }
        Err(_) => {
            // Dropped mid-query: the manager marked the connection so
            // that its close does not wait for the answer.
            PooledConnection::discard(conn);
            Err(no_answer(pool, registry, i, limit))
        }
    }
}

/// Host `i` did not answer a check in time: it is down, and every
/// connection to it is retired (idle ones now, ones in use when they come
/// back), since they may sit on sockets that will never answer; the next
/// check opens a new one. Returns the error, as text.
fn no_answer<M: HostBackend>(
    pool: &Pool<HostManager<M>>,
    registry: &Registry,
    i: usize,
    limit: Duration,
) -> String {
    let error = format!("no answer to the role check within {limit:?}");
    registry.down(i, &error);
    pool.soft_evict_all();
    error
}

/// Checks host `index` at each of its schedule's ticks, and when woken, at
/// most once per gap; each check bounded by the schedule's limit. Ends when
/// the host pool is dropped or closed; `_probing` clears the host's flag
/// however it ends.
async fn prober<M: HostBackend>(
    _probing: Probing,
    pool: Weak<Inner<M>>,
    registry: Arc<Registry>,
    index: usize,
    mut schedule: Schedule,
) {
    let wake = &registry.hosts[index].wake;
    loop {
        let now = Instant::now();
        let tick = schedule.next_tick(now);
        if tick > now {
            // Woken before the tick: a check was asked for.
            let asked = tokio::time::timeout_at(tick, wake.notified()).await.is_ok();
            if asked {
                tokio::time::sleep_until(schedule.next_asked(Instant::now())).await;
            }
        }
        let Some(inner) = pool.upgrade() else { return };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        schedule.start(Instant::now());
        let _ = probe(&inner.pools[index], &registry, index, schedule.limit()).await;
        registry.checked(index);
        drop(inner);
    }
}

/// One handle over a primary and its standbys, one pool per host; see the
/// [module docs](self). Clones share the host pool.
pub struct HostPool<M: HostBackend> {
    inner: Arc<Inner<M>>,
}

impl<M: HostBackend> Clone for HostPool<M> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<M: HostBackend> fmt::Debug for HostPool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostPool")
            .field("hosts", &self.inner.statuses())
            .field("read_target", &self.inner.read_target)
            .field("load_balance", &self.inner.load_balance)
            .finish_non_exhaustive()
    }
}

impl<M: HostBackend> HostPool<M> {
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
    ) -> impl Future<Output = Result<HostConnection<M>, HostPoolError<M::Error>>> + Send + '_ {
        let site = Location::caller();
        self.checkout(target, site)
    }

    /// Starts the probers if their runtime ended, then checks out.
    async fn checkout(
        &self,
        target: SessionTarget,
        site: &'static Location<'static>,
    ) -> Result<HostConnection<M>, HostPoolError<M::Error>> {
        self.inner.ensure_probers();
        self.inner.get(target, site).await
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
    ) -> impl Future<Output = Result<HostConnection<M>, HostPoolError<M::Error>>> + Send + '_ {
        let site = Location::caller();
        self.checkout(SessionTarget::ReadWrite, site)
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
    ) -> impl Future<Output = Result<HostConnection<M>, HostPoolError<M::Error>>> + Send + '_ {
        let site = Location::caller();
        self.checkout(self.inner.read_target, site)
    }

    /// Checks every host's role now, as the background recheck does (each
    /// check within its limit, all at once); returns the hosts that did not
    /// answer, with their errors.
    pub async fn recheck(&self) -> Vec<(Arc<str>, String)> {
        self.inner.ensure_probers();
        self.inner.probe_all().await
    }

    /// Closes every host's pool (as [`Pool::close`]) and stops the
    /// rechecks; checkouts then fail with [`HostPoolError::Closed`].
    pub async fn close(&self) {
        self.inner.close().await;
    }

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
    pub fn host_pool(&self, host: &str) -> Option<&Pool<HostManager<M>>> {
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
    /// [`write`](Self::write)'s caller) and for how long. A role check in
    /// progress shows as one more, held at the host pool's own code.
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
/// manager's connection (a `PgClient`, a `PgConnection`); dropping it
/// returns it to its host's pool.
///
/// Its own operations are associated functions
/// (`HostConnection::host(&conn)`), so that they never hide the
/// connection's methods of the same name.
#[must_use = "dropping the guard returns the connection to its host's pool at once"]
pub struct HostConnection<M: HostBackend> {
    conn: PooledConnection<HostManager<M>>,
    host: Arc<str>,
    role: ServerRole,
}

impl<M: HostBackend> HostConnection<M> {
    /// `host:port` of its server.
    pub fn host(this: &Self) -> &str {
        &this.host
    }

    /// Its server's role when it was checked out.
    pub fn role(this: &Self) -> ServerRole {
        this.role
    }

    /// The pooled connection itself.
    pub fn into_pooled(this: Self) -> PooledConnection<HostManager<M>> {
        this.conn
    }
}

impl<M: HostBackend> fmt::Debug for HostConnection<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostConnection")
            .field("host", &self.host)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl<M: HostBackend> Deref for HostConnection<M> {
    type Target = M::Connection;

    fn deref(&self) -> &M::Connection {
        &self.conn
    }
}

impl<M: HostBackend> DerefMut for HostConnection<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_query_text_reads_as_libpq_would() {
        assert_eq!(
            role_from_text(Some("false"), Some("off")),
            ServerRole::Primary
        );
        assert_eq!(
            role_from_text(Some("false"), Some("on")),
            ServerRole::ReadOnlyPrimary
        );
        assert_eq!(
            role_from_text(Some("true"), Some("on")),
            ServerRole::Standby
        );
        assert_eq!(role_from_text(None, None), ServerRole::Standby);
        assert_eq!(
            role_from_text(Some("false"), None),
            ServerRole::ReadOnlyPrimary,
            "no answer is not a writable answer"
        );
    }
}
