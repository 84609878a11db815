//! [`PoolConfigBuilder`]: the one way to make a [`PoolConfig`], checking the
//! combination once when built.

use std::time::Duration;

use crate::{ConfigError, MetricNames, PoolConfig, ValidationMode};
// Named by the docs' links and by the tests; `validate` does the checking.
#[cfg(any(doc, test))]
use crate::MAX_POOL_SIZE;

impl PoolConfig {
    /// Starts a builder holding the defaults.
    pub fn builder() -> PoolConfigBuilder {
        PoolConfigBuilder {
            config: PoolConfig::default(),
            idle_timeout_set: false,
        }
    }
}

/// Builds a [`PoolConfig`]; every setter is optional.
///
/// Each setter takes and returns the builder; [`build`](Self::build) checks
/// the combination and never panics.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct PoolConfigBuilder {
    config: PoolConfig,
    /// Whether `idle_timeout` was called: a default idle timeout yields to a
    /// short `max_lifetime`, an explicit one is checked against it.
    idle_timeout_set: bool,
}

impl PoolConfigBuilder {
    /// Label in logs and metrics (the `pool` label of every series).
    /// Defaults to `"pool"`; must not be empty.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// Connections kept open even when idle; the housekeeper refills to it
    /// after losses. Defaults to 0; must not exceed `max_size`.
    pub fn min_size(mut self, min_size: u32) -> Self {
        self.config.min_size = min_size;
        self
    }

    /// Hard bound on open connections: idle, in use and being opened
    /// together. Defaults to 10; from 1 to [`MAX_POOL_SIZE`].
    pub fn max_size(mut self, max_size: u32) -> Self {
        self.config.max_size = max_size;
        self
    }

    /// How long `get()` may take in total: waiting for a connection, the
    /// connect it may wait on, and checkout validation. It also bounds
    /// `Pool::new` as a whole: its first connections, retry included, are
    /// opened within it. Defaults to 30 seconds; must be greater than zero.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.config.acquire_timeout = timeout;
        self
    }

    /// Bound on one `connect()` plus the `after_connect` hook. Defaults to 10
    /// seconds; must be greater than zero. May be above `acquire_timeout`:
    /// `Pool::new` cuts each of its connects to what its `acquire_timeout`
    /// has left, and a background connect that outlasts the `get()` that
    /// asked for it goes on for the next caller.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Close connections idle this long, never going below `min_size`;
    /// `None` keeps idle connections forever.
    ///
    /// Defaults to 10 minutes, or to half of `max_lifetime` when that is 10
    /// minutes or less (the default yields: a `max_lifetime` of 4 minutes
    /// alone gives an idle timeout of 2 minutes, so idle connections still
    /// retire before they age out). Set explicitly, it must be shorter than
    /// `max_lifetime`: two explicit settings that contradict are a
    /// [`ConfigError`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use pool_api::PoolConfig;
    ///
    /// let min = Duration::from_secs(60);
    /// let config = PoolConfig::builder().max_lifetime(4 * min).build()?;
    /// assert_eq!(config.idle_timeout(), Some(2 * min));
    ///
    /// let err = PoolConfig::builder()
    ///     .idle_timeout(5 * min)
    ///     .max_lifetime(4 * min)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "idle_timeout");
    /// # Ok::<(), pool_api::ConfigError>(())
    /// ```
    pub fn idle_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.config.idle_timeout = timeout.into();
        self.idle_timeout_set = true;
        self
    }

    /// Retire connections this old (less a random jitter, see
    /// [`max_lifetime_jitter`](Self::max_lifetime_jitter)); an in-use one is
    /// retired when it comes back. `None` keeps them forever. Defaults to 30
    /// minutes; set it a little below the server's or proxy's own limit.
    ///
    /// A lifetime of 10 minutes or less, with `idle_timeout` left at its
    /// default, halves the idle timeout instead of being rejected (see
    /// [`idle_timeout`](Self::idle_timeout)).
    pub fn max_lifetime(mut self, lifetime: impl Into<Option<Duration>>) -> Self {
        self.config.max_lifetime = lifetime.into();
        self
    }

    /// Fraction of `max_lifetime` by which each connection's lifetime is
    /// shortened at random, so connections opened together do not all expire
    /// together. Defaults to 0.05; from 0.0 to 0.5.
    pub fn max_lifetime_jitter(mut self, jitter: f64) -> Self {
        self.config.max_lifetime_jitter = jitter;
        self
    }

    /// How connections are checked at checkout. Defaults to
    /// [`ValidationMode::IsValid`].
    pub fn validation_mode(mut self, mode: ValidationMode) -> Self {
        self.config.validation_mode = mode;
        self
    }

    /// Skip checkout validation when the connection was in use this recently:
    /// a connection returned a moment ago is almost surely alive, and the
    /// round trip would double a short query's cost. `Duration::ZERO`
    /// validates at every checkout (a server that accepts connections but
    /// fails every check then has its replacements paced by the connect
    /// back-off). Defaults to 500 ms.
    pub fn validation_bypass(mut self, bypass: Duration) -> Self {
        self.config.validation_bypass = bypass;
        self
    }

    /// Bound on `is_valid`, `reset`, keepalive pings and the checkout and
    /// return hooks. Defaults to 5 seconds; must be greater than zero.
    pub fn validation_timeout(mut self, timeout: Duration) -> Self {
        self.config.validation_timeout = timeout;
        self
    }

    /// Warn, with the call site of the `get()` that took it (and its
    /// backtrace, see [`leak_detection_backtrace`](Self::leak_detection_backtrace)),
    /// when a connection is held longer than this. `None` turns leak
    /// detection off and costs nothing. Defaults to `None`.
    pub fn leak_detection_threshold(mut self, threshold: impl Into<Option<Duration>>) -> Self {
        self.config.leak_detection_threshold = threshold.into();
        self
    }

    /// Whether leak reports show a backtrace, on top of the call site
    /// (which is always recorded, at the cost of a pointer store). The
    /// backtrace shows the async calls that led to the `get()`; capturing
    /// one costs a few microseconds, so it is sampled: each thread captures
    /// the first checkout it makes at each call site and one in 256 after
    /// that, a few tens of nanoseconds per checkout on average. A leaked
    /// checkout that was captured is reported with its own backtrace; any
    /// other with the latest one captured at the same call site, marked as
    /// such (the same `get()` line; the path that led to it may differ
    /// when the site is reached from several callers). With `false`, leak
    /// reports name the call site alone. Both are cheap enough to stay on
    /// in production. Defaults to `true`.
    pub fn leak_detection_backtrace(mut self, capture: bool) -> Self {
        self.config.leak_detection_backtrace = capture;
        self
    }

    /// Log a WARN, with the wait and the sites holding the pool's
    /// connections, for every `get()` that waited longer than this. `None`
    /// turns it off. Defaults to `None`; must be greater than zero.
    pub fn slow_acquire_threshold(mut self, threshold: impl Into<Option<Duration>>) -> Self {
        self.config.slow_acquire_threshold = threshold.into();
        self
    }

    /// Ping idle connections at this interval so firewalls and proxies do
    /// not drop them silently; the ones that fail are retired. A connection
    /// is pinged once it has sat idle (and unpinged) this long, at most one
    /// housekeeper tick (1 s at most) later, whatever `housekeeping_period`
    /// is. `None` turns it off. Defaults to `None`; must be shorter than
    /// `max_lifetime`.
    pub fn keepalive_interval(mut self, interval: impl Into<Option<Duration>>) -> Self {
        self.config.keepalive_interval = interval.into();
        self
    }

    /// How often the housekeeper runs (idle and lifetime retirement, refill
    /// to `min_size`, keepalive, leak reports). Defaults to 30 seconds; tests
    /// use milliseconds.
    pub fn housekeeping_period(mut self, period: Duration) -> Self {
        self.config.housekeeping_period = period;
        self
    }

    /// Bound on simultaneous `connect()` calls, so a burst of demand does not
    /// become a connection storm. Defaults to 2; must be at least 1. While
    /// the pool reopens after an outage,
    /// [`max_concurrent_reconnects`](Self::max_concurrent_reconnects)
    /// applies instead.
    pub fn max_concurrent_connects(mut self, n: u32) -> Self {
        self.config.max_concurrent_connects = n;
        self
    }

    /// Bound on simultaneous `connect()` calls while the pool reopens after
    /// the database was unreachable. Defaults to 16; must be at least 1.
    ///
    /// Each failure the pool sees (a failed connect, a connection found
    /// broken, a failed check) records its size then: connections open
    /// plus callers waiting, the largest since it last got back to it.
    /// While the pool is below that size and connects succeed (the
    /// database restarted, a failover ended, the network came back), it
    /// opens up to this many connections at once, one per caller waiting
    /// (and the shortfall below `min_size` and `min_idle`), never more
    /// than it is short of that size nor above `max_size`; the larger of
    /// this and `max_concurrent_connects` applies. Once the pool is back to
    /// that size, and while connects keep failing, `max_concurrent_connects`
    /// applies again: connects already in flight finish, and no new one
    /// starts above it. A connect refused for capacity ends the reopening.
    /// So the callers queued through an outage are served about one
    /// connect's time after the database is back (deadpool and bb8 open
    /// one connection per waiting caller), where two at a time would take
    /// a round of connects per two callers. Set it to 1 (or to
    /// `max_concurrent_connects`) to reopen at the usual pace.
    pub fn max_concurrent_reconnects(mut self, n: u32) -> Self {
        self.config.max_concurrent_reconnects = n;
        self
    }

    /// Which names the pool's series are exported under (pool-core's
    /// `metrics` feature): [`MetricNames::Hikari`] (`pool_connections_*`,
    /// labelled `pool`) or [`MetricNames::OpenTelemetry`]
    /// (`db.client.connection.*`, labelled `db.client.connection.pool.name`).
    /// Defaults to [`MetricNames::Hikari`].
    pub fn metric_names(mut self, names: MetricNames) -> Self {
        self.config.metric_names = names;
        self
    }

    /// Adds a label to every series the pool exports, beside its name:
    /// `host` for one pool per database host, say. The key must not be
    /// empty, repeated, or one the pool sets itself (`pool`, `reason`,
    /// `state` and the OpenTelemetry names). None by default.
    ///
    /// ```
    /// use pool_api::PoolConfig;
    ///
    /// let config = PoolConfig::builder()
    ///     .name("orders")
    ///     .metric_label("host", "db2:5432")
    ///     .build()?;
    /// assert_eq!(config.metric_labels(), [("host".to_owned(), "db2:5432".to_owned())]);
    /// assert!(PoolConfig::builder().metric_label("pool", "x").build().is_err());
    /// # Ok::<(), pool_api::ConfigError>(())
    /// ```
    pub fn metric_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.metric_labels.push((key.into(), value.into()));
        self
    }

    /// Whether a failed connect reaches the callers waiting at once when the
    /// pool has no open connection that could come back to them (none idle,
    /// none in use, none being opened). Defaults to `true`.
    ///
    /// With `true`, those callers get [`PoolError::ConnectFailed`] with the
    /// connect error instead of waiting for `acquire_timeout`, and so do
    /// new `get()`s while the database is known down; a `get()` then
    /// starts the next connect attempt itself (within
    /// `max_concurrent_connects`), so the first one after the database is
    /// back succeeds. While a connection is still in use, callers keep
    /// waiting for it. A connect refused for capacity
    /// ([`ErrorClass::CapacityRefusal`], e.g. a fleet budget with
    /// no free ticket) never fails callers fast. With `false`, callers wait
    /// until `acquire_timeout` and get [`PoolError::Timeout`] carrying the
    /// last error (HikariCP's behaviour).
    ///
    /// [`PoolError::ConnectFailed`]: crate::PoolError::ConnectFailed
    /// [`PoolError::Timeout`]: crate::PoolError::Timeout
    /// [`ErrorClass::CapacityRefusal`]: crate::ErrorClass::CapacityRefusal
    pub fn fail_fast(mut self, fail_fast: bool) -> Self {
        self.config.fail_fast = fail_fast;
        self
    }

    /// Whether a connection returned while nobody waits is kept for the
    /// thread that returned it (HikariCP's `ConcurrentBag` thread-local
    /// list). Defaults to `true`.
    ///
    /// With `true`, a clean return with no caller waiting parks the
    /// connection in its own slot and the returning thread remembers it;
    /// that thread's next checkout takes it back with one compare-and-swap
    /// on the slot, so where nobody waits a checkout and a return by the
    /// same thread write no cache line that other threads write. Every
    /// other guarantee is unchanged: such a connection counts as idle, any
    /// caller takes it when nothing else is idle (before it would queue),
    /// a return while callers wait still goes to the longest waiter, and
    /// idle timeout, `max_lifetime`, `close()`, `soft_evict_all()`,
    /// `resize()` and `retain()` find it as they find the others. The
    /// idle set is then last-in-first-out per thread rather than
    /// pool-wide: a light load that moves between N runtime worker threads
    /// keeps up to N connections warm instead of one. With `false`, every
    /// idle connection sits on the one shared last-in-first-out stack.
    pub fn thread_affinity(mut self, on: bool) -> Self {
        self.config.thread_affinity = on;
        self
    }

    /// Keep at least this many idle connections ready (HikariCP's
    /// `minimumIdle`, bb8's and r2d2's `min_idle`): the housekeeper tops
    /// them up, and a checkout that leaves fewer idle asks for a connect in
    /// the background (never on the caller's path), never above
    /// `max_size` nor past `max_concurrent_connects`. Idle connections above
    /// it retire by `idle_timeout`; `min_size` keeps its meaning (open
    /// connections, idle or not). Defaults to 0; must not exceed
    /// `max_size`.
    pub fn min_idle(mut self, min_idle: u32) -> Self {
        self.config.min_idle = min_idle;
        self
    }

    /// The largest `max_size` that `Pool::resize` can grow the pool to:
    /// this many connection slots (about 128 bytes each) are allocated when
    /// the pool is built. Defaults to 4 x `max_size` (at most
    /// [`MAX_POOL_SIZE`]); from `max_size` to [`MAX_POOL_SIZE`].
    pub fn max_size_ceiling(mut self, ceiling: u32) -> Self {
        self.config.max_size_ceiling = Some(ceiling);
        self
    }

    /// Checks the settings and returns the config.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field and the rule, for: an empty name;
    /// `max_size` 0 or above [`MAX_POOL_SIZE`]; `min_size > max_size`;
    /// `min_idle > max_size`; `max_concurrent_connects` or
    /// `max_concurrent_reconnects` 0; a zero `acquire_timeout`,
    /// `connect_timeout`, `validation_timeout` or `housekeeping_period`; a
    /// `Some(ZERO)` idle timeout, lifetime, leak threshold or keepalive; a
    /// jitter outside 0.0..=0.5; an explicit `idle_timeout >=
    /// max_lifetime` (a default idle timeout is clamped instead, see
    /// [`idle_timeout`](Self::idle_timeout)); `keepalive_interval >=
    /// max_lifetime`.
    pub fn build(mut self) -> Result<PoolConfig, ConfigError> {
        if !self.idle_timeout_set {
            self.config.idle_timeout =
                clamped_idle_timeout(self.config.idle_timeout, self.config.max_lifetime);
        }
        self.config.validate()?;
        Ok(self.config)
    }
}

/// The default idle timeout, or half of `max_lifetime` when the default is
/// not shorter than it; `None` for a lifetime too short to halve.
fn clamped_idle_timeout(idle: Option<Duration>, life: Option<Duration>) -> Option<Duration> {
    match (idle, life) {
        (Some(idle), Some(life)) if idle >= life => Some(life / 2).filter(|d| !d.is_zero()),
        _ => idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(builder: PoolConfigBuilder) -> &'static str {
        builder
            .build()
            .expect_err("config should be rejected")
            .field()
    }

    #[test]
    fn defaults_are_valid_and_documented() {
        let config = PoolConfig::builder().build().unwrap();
        assert_eq!(config, PoolConfig::default());
        assert_eq!(config.name(), "pool");
        assert_eq!(config.min_size(), 0);
        assert_eq!(config.max_size(), 10);
        assert_eq!(config.acquire_timeout(), Duration::from_secs(30));
        assert_eq!(config.connect_timeout(), Duration::from_secs(10));
        assert_eq!(config.idle_timeout(), Some(Duration::from_secs(600)));
        assert_eq!(config.max_lifetime(), Some(Duration::from_secs(1800)));
        assert_eq!(config.validation_mode(), ValidationMode::IsValid);
        assert_eq!(config.validation_bypass(), Duration::from_millis(500));
        assert_eq!(config.validation_timeout(), Duration::from_secs(5));
        assert_eq!(config.leak_detection_threshold(), None);
        assert_eq!(config.keepalive_interval(), None);
        assert_eq!(config.housekeeping_period(), Duration::from_secs(30));
        assert_eq!(config.max_concurrent_connects(), 2);
        assert_eq!(config.max_concurrent_reconnects(), 16);
        assert_eq!(config.max_lifetime_jitter(), 0.05);
        assert_eq!(config.metric_names(), MetricNames::Hikari);
        let otel = PoolConfig::builder()
            .metric_names(MetricNames::OpenTelemetry)
            .build()
            .unwrap();
        assert_eq!(otel.metric_names(), MetricNames::OpenTelemetry);
    }

    #[test]
    fn every_invalid_combination_names_its_field() {
        let b = PoolConfig::builder;
        let zero = Duration::ZERO;
        assert_eq!(field_of(b().name("")), "name");
        assert_eq!(field_of(b().max_size(0)), "max_size");
        assert_eq!(field_of(b().max_size(MAX_POOL_SIZE + 1)), "max_size");
        assert_eq!(field_of(b().max_size(4).min_size(5)), "min_size");
        assert_eq!(
            field_of(b().max_concurrent_connects(0)),
            "max_concurrent_connects"
        );
        assert_eq!(
            field_of(b().max_concurrent_reconnects(0)),
            "max_concurrent_reconnects"
        );
        assert_eq!(field_of(b().acquire_timeout(zero)), "acquire_timeout");
        assert_eq!(field_of(b().connect_timeout(zero)), "connect_timeout");
        assert_eq!(field_of(b().validation_timeout(zero)), "validation_timeout");
        assert_eq!(
            field_of(b().housekeeping_period(zero)),
            "housekeeping_period"
        );
        assert_eq!(field_of(b().idle_timeout(zero)), "idle_timeout");
        assert_eq!(field_of(b().max_lifetime(zero)), "max_lifetime");
        assert_eq!(
            field_of(b().slow_acquire_threshold(zero)),
            "slow_acquire_threshold"
        );
        assert_eq!(
            field_of(b().leak_detection_threshold(zero)),
            "leak_detection_threshold"
        );
        assert_eq!(field_of(b().keepalive_interval(zero)), "keepalive_interval");
        assert_eq!(
            field_of(b().max_lifetime_jitter(-0.1)),
            "max_lifetime_jitter"
        );
        assert_eq!(
            field_of(b().max_lifetime_jitter(0.6)),
            "max_lifetime_jitter"
        );
        assert_eq!(
            field_of(b().max_lifetime_jitter(f64::NAN)),
            "max_lifetime_jitter"
        );
        let min = Duration::from_secs(60);
        assert_eq!(
            field_of(b().idle_timeout(min).max_lifetime(min)),
            "idle_timeout"
        );
        assert_eq!(
            field_of(
                b().idle_timeout(None)
                    .keepalive_interval(min)
                    .max_lifetime(min)
            ),
            "keepalive_interval"
        );
    }

    #[test]
    fn edge_values_are_accepted() {
        let config = PoolConfig::builder()
            .max_size(MAX_POOL_SIZE)
            .min_size(MAX_POOL_SIZE)
            .validation_bypass(Duration::ZERO)
            .idle_timeout(None)
            .max_lifetime(None)
            .keepalive_interval(Duration::from_secs(1))
            .max_lifetime_jitter(0.0)
            .acquire_timeout(Duration::MAX)
            .build();
        assert!(config.is_ok(), "{config:?}");
    }

    #[test]
    fn a_short_lifetime_clamps_the_default_idle_timeout() {
        let min = Duration::from_secs(60);
        let with_life = |life: Duration| PoolConfig::builder().max_lifetime(life).build();
        assert_eq!(with_life(4 * min).unwrap().idle_timeout(), Some(2 * min));
        assert_eq!(with_life(10 * min).unwrap().idle_timeout(), Some(5 * min));
        // Longer than the default: the default stands.
        let config = with_life(10 * min + Duration::from_secs(1)).unwrap();
        assert_eq!(config.idle_timeout(), Some(10 * min));
        assert_eq!(
            with_life(Duration::from_nanos(3)).unwrap().idle_timeout(),
            Some(Duration::from_nanos(1))
        );
        // Too short to halve: no idle timeout, the lifetime retires them.
        let tiny = with_life(Duration::from_nanos(1)).unwrap();
        assert_eq!(tiny.idle_timeout(), None);
        assert_eq!(tiny.max_lifetime(), Some(Duration::from_nanos(1)));
        // Whatever order the setters come in.
        let config = PoolConfig::builder()
            .max_lifetime(min)
            .name("short")
            .build()
            .unwrap();
        assert_eq!(config.idle_timeout(), Some(min / 2));
    }

    #[test]
    fn only_explicit_contradictions_are_rejected() {
        let min = Duration::from_secs(60);
        let b = PoolConfig::builder;
        // An explicit idle timeout equal to the default is still explicit.
        let err = b()
            .idle_timeout(10 * min)
            .max_lifetime(4 * min)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "idle_timeout");
        assert_eq!(
            err.to_string(),
            "invalid pool config: `idle_timeout` must be shorter than max_lifetime"
        );
        assert_eq!(
            field_of(b().max_lifetime(4 * min).idle_timeout(4 * min)),
            "idle_timeout"
        );
        // Explicit and compatible, or turned off: kept as given.
        let config = b().idle_timeout(3 * min).max_lifetime(4 * min).build();
        assert_eq!(config.unwrap().idle_timeout(), Some(3 * min));
        let config = b().idle_timeout(None).max_lifetime(min).build().unwrap();
        assert_eq!(config.idle_timeout(), None);
        // No lifetime: nothing to clamp against.
        let config = b().max_lifetime(None).build().unwrap();
        assert_eq!(config.idle_timeout(), Some(10 * min));
        // A clamped default is checked like any value: keepalive still
        // has to be shorter than the lifetime.
        assert_eq!(
            field_of(b().max_lifetime(min).keepalive_interval(min)),
            "keepalive_interval"
        );
    }

    #[test]
    fn error_display_names_field_and_rule() {
        let err = PoolConfig::builder()
            .max_size(2)
            .min_size(3)
            .build()
            .unwrap_err();
        assert_eq!(err.rule(), "must not exceed max_size");
        assert_eq!(
            err.to_string(),
            "invalid pool config: `min_size` must not exceed max_size"
        );
    }
}
