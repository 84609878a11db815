//! The pool's settings, checked once when built.

use std::fmt;
use std::time::Duration;

use crate::MetricNames;

/// The largest `max_size` a pool accepts.
///
/// The pool addresses its connection slots with 16-bit indices so that the
/// idle stack's head, its ABA tag and its flags fit in one atomic word.
pub const MAX_POOL_SIZE: u32 = 65_535;

/// Label keys the pool sets itself, refused by `metric_label`.
const RESERVED_LABELS: [&str; 5] = [
    "pool",
    "reason",
    "state",
    "db.client.connection.pool.name",
    "db.client.connection.state",
];

/// How a connection is checked when it is handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ValidationMode {
    /// Hand connections out unchecked. A dead connection shows itself on
    /// first use.
    None,
    /// Call [`ManageConnection::is_valid`](crate::ManageConnection::is_valid)
    /// at checkout, unless the connection was in use within
    /// `validation_bypass`.
    #[default]
    IsValid,
}

/// A setting, or a combination of settings, that the pool cannot run with.
///
/// It names the field and the rule it broke.
///
/// ```
/// use pool_api::PoolConfig;
///
/// let err = PoolConfig::builder().max_size(0).build().unwrap_err();
/// assert_eq!(err.field(), "max_size");
/// assert_eq!(err.to_string(), "invalid pool config: `max_size` must be at least 1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    rule: &'static str,
}

impl ConfigError {
    fn new(field: &'static str, rule: &'static str) -> Self {
        Self { field, rule }
    }

    /// The builder method whose value broke the rule.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The rule, in words ("must be at least 1").
    pub fn rule(&self) -> &'static str {
        self.rule
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid pool config: `{}` {}", self.field, self.rule)
    }
}

impl std::error::Error for ConfigError {}

/// The pool's settings, every one validated.
///
/// Made by [`PoolConfig::builder`]; [`PoolConfig::default`] gives the
/// defaults listed on [`PoolConfigBuilder`](crate::PoolConfigBuilder).
///
/// ```
/// use std::time::Duration;
/// use pool_api::PoolConfig;
///
/// let config = PoolConfig::builder()
///     .name("orders")
///     .max_size(16)
///     .min_size(2)
///     .acquire_timeout(Duration::from_secs(5))
///     .build()?;
/// assert_eq!(config.max_size(), 16);
/// # Ok::<(), pool_api::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    pub(crate) name: String,
    pub(crate) min_size: u32,
    pub(crate) max_size: u32,
    pub(crate) acquire_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) max_lifetime: Option<Duration>,
    pub(crate) max_lifetime_jitter: f64,
    pub(crate) validation_mode: ValidationMode,
    pub(crate) validation_bypass: Duration,
    pub(crate) validation_timeout: Duration,
    pub(crate) leak_detection_threshold: Option<Duration>,
    pub(crate) leak_detection_backtrace: bool,
    pub(crate) slow_acquire_threshold: Option<Duration>,
    pub(crate) keepalive_interval: Option<Duration>,
    pub(crate) housekeeping_period: Duration,
    pub(crate) max_concurrent_connects: u32,
    pub(crate) max_concurrent_reconnects: u32,
    pub(crate) metric_names: MetricNames,
    pub(crate) fail_fast: bool,
    pub(crate) min_idle: u32,
    pub(crate) max_size_ceiling: Option<u32>,
    pub(crate) thread_affinity: bool,
    pub(crate) metric_labels: Vec<(String, String)>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            name: "pool".to_owned(),
            min_size: 0,
            max_size: 10,
            acquire_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(10 * 60)),
            max_lifetime: Some(Duration::from_secs(30 * 60)),
            max_lifetime_jitter: 0.05,
            validation_mode: ValidationMode::IsValid,
            validation_bypass: Duration::from_millis(500),
            validation_timeout: Duration::from_secs(5),
            leak_detection_threshold: None,
            leak_detection_backtrace: true,
            slow_acquire_threshold: None,
            keepalive_interval: None,
            housekeeping_period: Duration::from_secs(30),
            max_concurrent_connects: 2,
            max_concurrent_reconnects: 16,
            metric_names: MetricNames::Hikari,
            fail_fast: true,
            min_idle: 0,
            max_size_ceiling: None,
            thread_affinity: true,
            metric_labels: Vec::new(),
        }
    }
}

impl PoolConfig {
    /// Label in logs and metrics.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Connections kept open even when idle.
    pub fn min_size(&self) -> u32 {
        self.min_size
    }
    /// Hard bound on open connections (idle, in use and being opened).
    pub fn max_size(&self) -> u32 {
        self.max_size
    }
    /// How long `get()` may wait in total.
    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout
    }
    /// Bound on one `connect()`.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
    /// Connections idle this long are closed, never below `min_size`.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }
    /// Connections this old are retired.
    pub fn max_lifetime(&self) -> Option<Duration> {
        self.max_lifetime
    }
    /// Fraction of `max_lifetime` by which each connection's lifetime is
    /// shortened at random.
    pub fn max_lifetime_jitter(&self) -> f64 {
        self.max_lifetime_jitter
    }
    /// How connections are checked at checkout.
    pub fn validation_mode(&self) -> ValidationMode {
        self.validation_mode
    }
    /// Validation is skipped for a connection in use this recently.
    pub fn validation_bypass(&self) -> Duration {
        self.validation_bypass
    }
    /// Bound on `is_valid`, `reset` and the checkout/return hooks.
    pub fn validation_timeout(&self) -> Duration {
        self.validation_timeout
    }
    /// A connection held longer than this is reported as a leak.
    pub fn leak_detection_threshold(&self) -> Option<Duration> {
        self.leak_detection_threshold
    }
    /// Whether leak reports carry the backtrace of the `get()` that took
    /// the connection, on top of its call site.
    pub fn leak_detection_backtrace(&self) -> bool {
        self.leak_detection_backtrace
    }
    /// A `get()` that waited longer than this logs a WARN.
    pub fn slow_acquire_threshold(&self) -> Option<Duration> {
        self.slow_acquire_threshold
    }
    /// Idle connections are pinged at this interval.
    pub fn keepalive_interval(&self) -> Option<Duration> {
        self.keepalive_interval
    }
    /// How often the housekeeper runs.
    pub fn housekeeping_period(&self) -> Duration {
        self.housekeeping_period
    }
    /// Bound on simultaneous `connect()` calls.
    pub fn max_concurrent_connects(&self) -> u32 {
        self.max_concurrent_connects
    }
    /// Bound on simultaneous `connect()` calls while the pool reopens after
    /// an outage (below its size when failures were seen, with connects
    /// succeeding again); the larger of this and `max_concurrent_connects`
    /// applies then.
    pub fn max_concurrent_reconnects(&self) -> u32 {
        self.max_concurrent_reconnects
    }
    /// Labels added to every exported series, beside the pool's name.
    pub fn metric_labels(&self) -> &[(String, String)] {
        &self.metric_labels
    }

    /// This config with one more label on every exported series (see
    /// [`PoolConfigBuilder::metric_label`](crate::PoolConfigBuilder::metric_label)),
    /// for a wrapper that builds one pool per backend from a config it was
    /// given.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for field `metric_label` when the key is empty,
    /// already present, or one the pool sets itself.
    pub fn with_metric_label(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, ConfigError> {
        self.metric_labels.push((key.into(), value.into()));
        self.validate()?;
        Ok(self)
    }

    /// Which names the series are exported under.
    pub fn metric_names(&self) -> MetricNames {
        self.metric_names
    }
    /// Whether connect failures reach waiting callers at once when nothing
    /// open could serve them (see
    /// [`PoolConfigBuilder::fail_fast`](crate::PoolConfigBuilder::fail_fast)).
    pub fn fail_fast(&self) -> bool {
        self.fail_fast
    }
    /// Whether a connection returned while nobody waits is kept for the
    /// thread that returned it (see
    /// [`PoolConfigBuilder::thread_affinity`](crate::PoolConfigBuilder::thread_affinity)).
    pub fn thread_affinity(&self) -> bool {
        self.thread_affinity
    }
    /// The largest `max_size` `Pool::resize` accepts: the slots allocated
    /// when the pool is built (see
    /// [`PoolConfigBuilder::max_size_ceiling`](crate::PoolConfigBuilder::max_size_ceiling)).
    pub fn max_size_ceiling(&self) -> u32 {
        self.max_size_ceiling
            .unwrap_or_else(|| self.max_size.saturating_mul(4).min(MAX_POOL_SIZE))
    }
    /// Checks a new `max_size` for `Pool::resize` against the rules of
    /// [`validate`](Self::validate).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_size` for 0, a size above
    /// [`max_size_ceiling`](Self::max_size_ceiling), or one below
    /// `min_size` or `min_idle`.
    pub fn check_resize(&self, max_size: u32) -> Result<(), ConfigError> {
        let err = |rule| Err(ConfigError::new("max_size", rule));
        if max_size == 0 {
            return err("must be at least 1");
        }
        if max_size > self.max_size_ceiling() {
            return err("must not exceed max_size_ceiling");
        }
        if max_size < self.min_size {
            return err("must not be below min_size");
        }
        if max_size < self.min_idle {
            return err("must not be below min_idle");
        }
        Ok(())
    }
    /// Idle connections kept ready (see
    /// [`PoolConfigBuilder::min_idle`](crate::PoolConfigBuilder::min_idle)).
    pub fn min_idle(&self) -> u32 {
        self.min_idle
    }

    /// Checks every rule; the builder calls this, and so does the pool for a
    /// config it is handed.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first field that breaks a rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, rule| Err(ConfigError::new(field, rule));
        if self.name.is_empty() {
            return err("name", "must not be empty");
        }
        if self.max_size == 0 {
            return err("max_size", "must be at least 1");
        }
        if self.max_size > MAX_POOL_SIZE {
            return err("max_size", "must be at most 65535");
        }
        if self.min_size > self.max_size {
            return err("min_size", "must not exceed max_size");
        }
        if self.min_idle > self.max_size {
            return err("min_idle", "must not exceed max_size");
        }
        if self
            .max_size_ceiling
            .is_some_and(|c| c < self.max_size || c > MAX_POOL_SIZE)
        {
            return err("max_size_ceiling", "must be from max_size to 65535");
        }
        for (i, (key, _)) in self.metric_labels.iter().enumerate() {
            if key.is_empty() {
                return err("metric_label", "needs a non-empty key");
            }
            if RESERVED_LABELS.contains(&key.as_str()) {
                return err(
                    "metric_label",
                    "must not use a key the pool sets itself (pool, reason, state, \
                     db.client.connection.pool.name, db.client.connection.state)",
                );
            }
            if self.metric_labels[..i].iter().any(|(k, _)| k == key) {
                return err("metric_label", "must not repeat a key");
            }
        }
        if self.max_concurrent_connects == 0 {
            return err("max_concurrent_connects", "must be at least 1");
        }
        if self.max_concurrent_reconnects == 0 {
            return err("max_concurrent_reconnects", "must be at least 1");
        }
        let nonzero: [(&'static str, Duration); 4] = [
            ("acquire_timeout", self.acquire_timeout),
            ("connect_timeout", self.connect_timeout),
            ("validation_timeout", self.validation_timeout),
            ("housekeeping_period", self.housekeeping_period),
        ];
        for (field, value) in nonzero {
            if value.is_zero() {
                return err(field, "must be greater than zero");
            }
        }
        let optional: [(&'static str, Option<Duration>); 5] = [
            ("idle_timeout", self.idle_timeout),
            ("max_lifetime", self.max_lifetime),
            ("leak_detection_threshold", self.leak_detection_threshold),
            ("slow_acquire_threshold", self.slow_acquire_threshold),
            ("keepalive_interval", self.keepalive_interval),
        ];
        for (field, value) in optional {
            if value.is_some_and(|d| d.is_zero()) {
                return err(field, "must be greater than zero (use None to turn it off)");
            }
        }
        if !(self.max_lifetime_jitter.is_finite()
            && (0.0..=0.5).contains(&self.max_lifetime_jitter))
        {
            return err("max_lifetime_jitter", "must be a number from 0.0 to 0.5");
        }
        if let (Some(idle), Some(life)) = (self.idle_timeout, self.max_lifetime) {
            if idle >= life {
                return err("idle_timeout", "must be shorter than max_lifetime");
            }
        }
        if let (Some(keepalive), Some(life)) = (self.keepalive_interval, self.max_lifetime) {
            if keepalive >= life {
                return err("keepalive_interval", "must be shorter than max_lifetime");
            }
        }
        Ok(())
    }
}
