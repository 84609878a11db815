//! [`HostPoolBuilder`]: the settings of a host pool, and its build.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pool_api::PoolConfig;
use tokio::time::Instant;

use crate::Pool;

use super::error::{HostConfigError, HostPoolError};
use super::manager::HostManager;
use super::registry::Registry;
use super::role::Schedule;
use super::role::{HostStatus, LoadBalanceHosts, SessionTarget};
use super::route::{self, Readiness};
use super::{HostBackend, HostPool, Inner, DEFAULT_RECHECK_GAP, DEFAULT_RECHECK_INTERVAL};

/// Each host that did not answer, with its error as text.
pub(super) type HostErrors = Vec<(Arc<str>, String)>;

/// Each host's `host:port` name and manager, or why they could not be made.
pub(super) type NamedManagers<M> = Result<Vec<(Arc<str>, M)>, HostConfigError>;

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
    pub(super) fn over(hosts: NamedManagers<M>) -> Self {
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
    /// [module docs](super#roles-and-rechecks)).
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

impl<M: HostBackend> Inner<M> {
    /// What the build waits for: `None` while it should wait; `Ok` once a
    /// writable host and a host of the read target are known, or every
    /// host's first check ended with one up; the errors when every host's
    /// first check failed. `give_up`: the wait is over whatever is known (a
    /// host up is enough). The verdict is [`route::readiness`]'s.
    fn first_checks(&self, give_up: bool) -> Option<Result<(), HostErrors>> {
        let n = self.pools.len();
        // Which checks ended, before the statuses: a check stores its
        // status before it counts as ended, so every ended check's finding
        // is among the statuses read after.
        let checked: Vec<bool> = (0..n).map(|i| self.registry.was_checked(i)).collect();
        let statuses: Vec<HostStatus> = (0..n).map(|i| self.registry.status(i)).collect();
        match route::readiness(&statuses, &checked, self.read_target, give_up) {
            Readiness::Wait => None,
            Readiness::Ready => Some(Ok(())),
            Readiness::Unreachable => Some(Err((0..n)
                .map(|i| {
                    let error = self.registry.last_error(i).map_or_else(
                        || "no answer to its first check".to_owned(),
                        |e| e.to_string(),
                    );
                    (Arc::clone(&self.registry.hosts[i].addr), error)
                })
                .collect())),
        }
    }
}
