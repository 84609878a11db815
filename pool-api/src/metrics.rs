//! The pool's figures at one moment.

use std::panic::Location;
use std::time::Duration;

/// Which names the pool exports its series under, through the `metrics`
/// crate facade (pool-core's `metrics` feature).
///
/// ```
/// use pool_api::{MetricNames, PoolConfig};
///
/// let config = PoolConfig::builder()
///     .name("orders")
///     .metric_names(MetricNames::OpenTelemetry)
///     .build()?;
/// assert_eq!(config.metric_names(), MetricNames::OpenTelemetry);
/// # Ok::<(), pool_api::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MetricNames {
    /// HikariCP's names with a `pool_` prefix (`pool_connections_idle`,
    /// `pool_connections_acquire_seconds`, ...), labelled `pool`; every
    /// figure of [`PoolMetrics`] has a series. The default.
    #[default]
    Hikari,
    /// The OpenTelemetry semantic conventions for database client connection
    /// pools: `db.client.connection.count` (labelled
    /// `db.client.connection.state` = `idle` | `used`),
    /// `db.client.connection.idle.max`, `db.client.connection.idle.min`,
    /// `db.client.connection.max`, `db.client.connection.pending_requests`,
    /// `db.client.connection.timeouts`, and the histograms
    /// `db.client.connection.create_time`, `db.client.connection.wait_time`
    /// and `db.client.connection.use_time` in seconds; every series
    /// labelled `db.client.connection.pool.name`. Figures the conventions
    /// have no name for (evictions by reason, leaks, failed connects) are
    /// only in the [`PoolMetrics`] snapshot under this scheme.
    OpenTelemetry,
}

/// Connections closed by the pool, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Evictions {
    /// Idle longer than `idle_timeout`.
    pub idle_timeout: u64,
    /// Older than `max_lifetime` (less jitter).
    pub max_lifetime: u64,
    /// `has_broken` said so at return.
    pub broken: u64,
    /// Failed checkout validation or a keepalive ping.
    pub validation: u64,
    /// `reset` failed or timed out.
    pub reset_failed: u64,
    /// Retired by `soft_evict_all`.
    pub soft_evict: u64,
    /// Rejected by a `before_acquire` or `after_release` hook.
    pub hook: u64,
    /// Closed with the pool, or by the caller (`discard`).
    pub closed: u64,
}

impl Evictions {
    /// Sum over every reason.
    pub fn total(&self) -> u64 {
        self.idle_timeout
            + self.max_lifetime
            + self.broken
            + self.validation
            + self.reset_failed
            + self.soft_evict
            + self.hook
            + self.closed
    }
}

/// A snapshot of the pool's counts and counters, cheap to take and lock-free.
///
/// The counts (`idle`, `in_use`, `opening`, `closing`, `total`) are read
/// slot by slot, and `total == idle + in_use + opening + closing`.
/// Counters only grow.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct PoolMetrics {
    /// Connections ready in the pool.
    pub idle: u32,
    /// Connections held by callers (or being reset on their way back).
    pub in_use: u32,
    /// Connections being opened.
    pub opening: u32,
    /// Connections being closed, their slots still taken (managers that
    /// [`awaits_close`](crate::ManageConnection::awaits_close)): the bound
    /// counts them until the server has them closed.
    pub closing: u32,
    /// `idle + in_use + opening + closing`.
    pub total: u32,
    /// Callers waiting for a connection.
    pub waiting: u32,
    /// The pool's bound.
    pub max_size: u32,
    /// Connections handed out.
    pub acquire_count: u64,
    /// Time callers spent in `get()` for the connections handed out, summed.
    pub acquire_wait_total: Duration,
    /// Median acquire wait (from a log-linear histogram; see the pool's docs
    /// for its precision).
    pub acquire_wait_p50: Duration,
    /// 99th percentile acquire wait.
    pub acquire_wait_p99: Duration,
    /// Longest acquire wait.
    pub acquire_wait_max: Duration,
    /// `get()` calls that timed out.
    pub timeout_count: u64,
    /// Connections opened.
    pub creation_count: u64,
    /// Connects that failed or timed out.
    pub creation_error_count: u64,
    /// Connections closed by the pool, all reasons (`evictions.total()`).
    pub eviction_count: u64,
    /// Connections closed by the pool, by reason.
    pub evictions: Evictions,
    /// Connections reported as held past `leak_detection_threshold`.
    pub leak_count: u64,
    /// Connections held by callers now, by the site that took them (the
    /// caller of `get()`), most first; `Pool::holders` has each one with
    /// how long it has been held.
    pub holders_by_site: Vec<(&'static Location<'static>, u32)>,
}
