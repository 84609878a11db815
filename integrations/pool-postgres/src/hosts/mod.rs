//! [`HostPool`]: one handle over a PostgreSQL primary and its standbys,
//! with one pool per host, for the tokio-postgres manager (feature
//! `tokio-postgres`, [`HostPool::builder`]) and sqlx's `PgConnection`
//! (feature `sqlx-postgres`, `pool_sqlx::hosts::builder`).
//!
//! Each host gets a [`Pool`] of its own, so each has its own hard bound
//! (`max_size` of the [`PoolConfig`](pool_api::PoolConfig) given), its own metrics (the config's
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

mod builder;
mod checkout;
mod connection;
mod error;
mod manager;
#[cfg(feature = "tokio-postgres")]
mod postgres;
mod probe;
mod registry;
mod role;
mod route;

use std::fmt;
use std::future::Future;

use std::panic::Location;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pool_api::{async_trait, Holder, ManageConnection};
use tokio::sync::broadcast;

pub use builder::HostPoolBuilder;
#[cfg(feature = "tokio-postgres")]
use builder::NamedManagers;
pub use connection::{HostConnection, HostInfo};
pub use error::{BoxError, HostConfigError, HostPoolError};
pub use manager::HostManager;
#[cfg(feature = "tokio-postgres")]
pub use postgres::HostTls;
pub use registry::HostEvent;
pub use role::{HostStatus, LoadBalanceHosts, ServerRole, SessionTarget, UnknownSessionTarget};

use crate::Pool;
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
pub mod driver;

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
