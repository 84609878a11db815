//! PostgreSQL: `PgConnection`.

use std::fmt;

use super::backend::BoxFuture;
use super::backend::Provider;
use super::backend::{private, SqlxConnection, SqlxPasswordConnection};
use super::driver::postgres::{
    PgConnectOptions, PgConnection, PgListener, PgPoolOptions, PgSslMode,
};
use super::driver::{Connection, Error, Executor, Row};
use super::server_flag::{queue_tracked_rollbacks, roll_back_by_server_flag};
use super::SqlxManager;
use pool_postgres::fleet::{self, ControlSession, FleetBudget, FleetShareView, OpenControl};
use pool_postgres::pooler::TransactionPoolerError;
use pool_postgres::pooler::{PoolerMode, PoolerStatements};
use pool_postgres::relay::{self, Relay};

/// sqlx's statement cache per connection with unnamed statements (sqlx's
/// own default), whatever the options say: every statement the cache holds
/// is one the relay keeps.
const TRANSACTION_STATEMENT_CACHE: usize = 100;

/// Opens a connection through a statement relay to where `options` point.
async fn connect_through_relay(options: &PgConnectOptions) -> Result<PgConnection, Error> {
    let upstream = relay::upstream(
        options.get_socket().map(|dir| dir.as_path()),
        options.get_host(),
        options.get_port(),
    );
    let relay = Relay::start(&upstream).await.map_err(Error::Io)?;
    let through = options
        .clone()
        .socket(&relay.dir)
        .port(relay.port)
        .ssl_mode(PgSslMode::Disable);
    let conn = PgConnection::connect_with(&through).await;
    // A relay whose driver never connected ends here.
    drop(relay);
    conn
}

impl SqlxConnection for PgConnection {}
impl SqlxPasswordConnection for PgConnection {}

impl private::Sealed for PgConnection {
    // sqlx-postgres reads a message only once all of it is buffered, so a
    // read dropped half-way loses nothing.
    const POLL_IN_FLIGHT: bool = true;
    // A `BEGIN` whose reply arrived before the connection came back is read
    // by the poll above, but sqlx does not count its transaction.
    const CLOSE_ON_CANCELLED_BEGIN: bool = true;

    fn describe(options: &PgConnectOptions, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("driver", &"postgres");
        match options.get_socket() {
            Some(socket) => out.field("socket", socket),
            None => out.field("host", &options.get_host()),
        };
        out.field("port", &options.get_port())
            .field("database", &options.get_database())
            .field("user", &options.get_username());
    }

    fn target(options: &PgConnectOptions) -> Option<String> {
        let port = options.get_port();
        Some(match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None if options.get_host().contains(':') => format!("[{}]:{port}", options.get_host()),
            None => format!("{}:{port}", options.get_host()),
        })
    }

    fn for_pooler(options: &PgConnectOptions, unnamed: bool) -> Option<PgConnectOptions> {
        unnamed.then(|| {
            options
                .clone()
                .statement_cache_capacity(TRANSACTION_STATEMENT_CACHE)
        })
    }

    fn check_pooler(
        options: &PgConnectOptions,
        unnamed: bool,
    ) -> Result<(), TransactionPoolerError> {
        if !unnamed {
            return Ok(());
        }
        if cfg!(not(unix)) {
            return Err(TransactionPoolerError::NoUnixSockets);
        }
        let ssl_mode = match options.get_ssl_mode() {
            PgSslMode::Require => "require",
            PgSslMode::VerifyCa => "verify-ca",
            PgSslMode::VerifyFull => "verify-full",
            _ => return Ok(()),
        };
        Err(TransactionPoolerError::Tls { ssl_mode })
    }

    fn connect_pooled(
        options: &PgConnectOptions,
        unnamed: bool,
    ) -> BoxFuture<'_, Result<Self, Error>> {
        if unnamed {
            Box::pin(connect_through_relay(options))
        } else {
            Box::pin(Self::connect_with(options))
        }
    }

    fn with_password(options: PgConnectOptions, password: &str) -> PgConnectOptions {
        options.password(password)
    }

    fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            // The queued rollbacks, the probe and their replies share one
            // round trip.
            queue_tracked_rollbacks(conn);
            roll_back_by_server_flag(conn, "SELECT 1").await
        })
    }

    fn execute_raw<'a>(conn: &'a mut Self, sql: &'static str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(super::raw(sql)).await.map(drop) })
    }

    fn execute_built<'a>(conn: &'a mut Self, sql: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(super::raw_built(sql)).await.map(drop) })
    }

    fn claim_ticket<'a>(conn: &'a mut Self, sql: &'a str) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(async move {
            // Without parameters sqlx sends it as a simple query: one round
            // trip, no statement prepared or cached. With them it would
            // prepare first, a second round trip.
            let row = conn.fetch_optional(super::built_sql(sql)).await?;
            Ok(row.is_some())
        })
    }

    fn control_opener(options: PgConnectOptions, password: Option<Provider>) -> OpenControl {
        Box::new(move || {
            let (options, password) = (options.clone(), password.clone());
            Box::pin(async move {
                let options = match password {
                    Some(provider) => options.password(&provider().await?),
                    None => options,
                };
                // A listener, for the knocks of instances that cannot join,
                // on a pool of its one connection that never replaces it:
                // only `next_buffered` is called, which never reconnects,
                // and the control task drops the session on any error.
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .min_connections(0)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .test_before_acquire(false)
                    .connect_with(options)
                    .await?;
                let listener = PgListener::connect_with(&pool).await?;
                Ok(Box::new(SqlxControl(listener)) as Box<dyn ControlSession>)
            })
        })
    }
}

/// The fair share's control session on sqlx.
struct SqlxControl(PgListener);

impl ControlSession for SqlxControl {
    fn row<'a>(
        &'a mut self,
        sql: &'a str,
    ) -> fleet::BoxFuture<'a, Result<Vec<i64>, fleet::BoxError>> {
        Box::pin(async move {
            // No parameters: a simple query, its values as text, which
            // sqlx decodes to `i64` all the same.
            let row = (&mut self.0).fetch_one(super::built_sql(sql)).await?;
            (0..row.len())
                .map(|i| Ok(row.try_get::<i64, usize>(i)?))
                .collect()
        })
    }

    fn execute<'a>(
        &'a mut self,
        sql: &'a str,
    ) -> fleet::BoxFuture<'a, Result<(), fleet::BoxError>> {
        Box::pin(async move {
            (&mut self.0).execute(super::built_sql(sql)).await?;
            Ok(())
        })
    }

    fn notifications(&mut self) -> Vec<String> {
        // Bounded: at most what one recheck reads.
        std::iter::from_fn(|| self.0.next_buffered())
            .take(1024)
            .map(|n| n.payload().to_owned())
            .collect()
    }
}

impl private::SealedPassword for PgConnection {}

impl SqlxManager<PgConnection> {
    /// Makes the manager safe behind a pooler that hands out server
    /// connections per transaction (PgBouncer, pgdog, pgcat, Supavisor in
    /// transaction mode). Defaults to [`PoolerMode::Session`]: connections
    /// as configured.
    ///
    /// [`PoolerMode::Transaction`] sets the session rules: a
    /// [`fleet_budget`](Self::fleet_budget), which needs a session, is
    /// refused (in whichever order the two are set,
    /// [`validate`](Self::validate) and `Pool::new` say so). Both
    /// [`ResetMode`](super::ResetMode)s stay available: their reset is a
    /// plain statement plus, when a transaction is open, its `ROLLBACK`,
    /// neither of which needs the same server session. Session state (`SET`
    /// without `LOCAL`, `LISTEN`, advisory session locks, temporary tables)
    /// does not survive a transaction behind such a pooler. With
    /// [`PoolerStatements::Unnamed`] the
    /// relay refuses `SET` without `LOCAL`, `LISTEN` and session-level
    /// advisory locks on every path: the query fails with
    /// `sqlx::Error::Database`, SQLSTATE `0A000`, and nothing of it is sent.
    /// With statements passed through the pool does not read query texts
    /// (sqlx hands them to the connection), so nothing is refused.
    ///
    /// Statements are handled as
    /// [`pooler_statements`](Self::pooler_statements) says: by default
    /// passed through as sqlx names them, on the direct path, for poolers
    /// that keep named statements (PgBouncer 1.21 or later with
    /// `max_prepared_statements` above 0, pgdog).
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo() -> Result<(), sqlx::Error> {
    /// use pool_sqlx::SqlxManager;
    /// use pool_postgres::pooler::PoolerMode;
    ///
    /// let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@pgbouncer:6432/app")?
    ///     .pooler_mode(PoolerMode::Transaction);
    /// assert!(manager.validate().is_ok());
    /// # Ok(())
    /// # }
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # demo().unwrap();
    /// ```
    #[must_use]
    pub fn pooler_mode(mut self, mode: PoolerMode) -> Self {
        self.settings.set_pooler_mode(mode);
        self
    }

    /// What reaches a transaction-mode pooler of the statements sqlx
    /// prepares: [`PoolerStatements::PassThrough`] (the default) or
    /// [`PoolerStatements::Unnamed`], for poolers that do not keep named
    /// statements (PgBouncer before 1.21 or with
    /// `max_prepared_statements = 0`).
    ///
    /// With `Unnamed`, no statement name ever reaches the server, whichever
    /// way a query goes: `&pool`, `&mut *conn`, a
    /// [`Transaction`](super::Transaction) from `pool.begin()`, sqlx's own
    /// `conn.begin()`, `prepare`, with or without `.persistent(false)`.
    /// Each connection reaches the pooler through a small relay in this
    /// process (a task and a Unix socket in a private temporary directory,
    /// removed once sqlx is connected) that sends every statement sqlx
    /// prepares as the unnamed statement, and parses it again, in the same
    /// round trip, before a `Bind` whose statement the current server
    /// connection may not hold. So:
    ///
    /// - no "prepared statement ... already exists" or "... does not exist"
    ///   from statements that outlived their transaction;
    /// - sqlx's statement cache keeps working (its metadata saves a round
    ///   trip per cached query); it holds 100 statements per connection
    ///   with `Unnamed` (sqlx's default), whatever the options say;
    /// - the server parses a query again each time it runs outside the
    ///   transaction that parsed it, as it does for `.persistent(false)`.
    ///
    /// The relay reads the plaintext protocol: the options' `sslmode` must
    /// not be `require`, `verify-ca` or `verify-full` (that is a
    /// [`TransactionPoolerError::Tls`], reported when the pool is built),
    /// and under `prefer` (sqlx's default) or `allow` the connection to the
    /// pooler is plaintext. Keep the pooler on loopback or a private
    /// network. Platforms without Unix domain sockets get
    /// [`TransactionPoolerError::NoUnixSockets`]. The relay ends when its
    /// connection closes, or when the pooler closes it.
    ///
    /// The setter never fails, so it chains: `Unnamed` without
    /// [`PoolerMode::Transaction`] is a
    /// [`TransactionPoolerError::UnnamedOutsideTransactionMode`] from
    /// [`validate`](Self::validate), which `Pool::new` returns.
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo() -> Result<(), sqlx::Error> {
    /// use pool_sqlx::SqlxManager;
    /// use pool_postgres::pooler::{PoolerMode, PoolerStatements};
    ///
    /// // PgBouncer 1.18 in transaction mode.
    /// let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@pgbouncer:6432/app")?
    ///     .pooler_mode(PoolerMode::Transaction)
    ///     .pooler_statements(PoolerStatements::Unnamed);
    /// assert!(manager.validate().is_ok());
    /// # Ok(())
    /// # }
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # demo().unwrap();
    /// ```
    #[must_use]
    pub fn pooler_statements(mut self, statements: PoolerStatements) -> Self {
        self.settings.set_pooler_statements(statements);
        self
    }

    /// Makes every connection hold one of `total` tickets of the fleet
    /// budget `name`, shared by every process that uses the same name on the
    /// same database (with this manager, on sqlx 0.8 or 0.9, or with
    /// `PostgresManager::fleet_budget`): a session-level advisory lock taken
    /// right after connecting, one round trip per connect and none per
    /// checkout. How it works, its limits and fair share: the [fleet budget
    /// guide](pool_postgres::guide::fleet_budget).
    ///
    /// A connect that finds no ticket free fails with
    /// `sqlx::Error::Configuration` holding a
    /// [`FleetBudgetExhausted`](pool_postgres::fleet::FleetBudgetExhausted),
    /// whose text says "fleet budget"; the pool retries it with back-off
    /// while callers wait within their `acquire_timeout`. Both reset modes
    /// keep the ticket (their statements release no lock).
    ///
    /// The setter never fails, so it chains: an empty name, a total of 0 or
    /// above `i32::MAX`, or a budget in [`PoolerMode::Transaction`] is a
    /// [`FleetBudgetConfigError`](pool_postgres::fleet::FleetBudgetConfigError)
    /// from [`validate`](Self::validate), which `Pool::new` returns before
    /// opening anything (and a lazy pool's first connect).
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use pool_postgres::fleet::FleetBudgetExhausted;
    /// use pool_sqlx::{ResetMode, SqlxManager};
    ///
    /// let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@db.internal/shop")?
    ///     .fleet_budget("shop-api", 80)
    ///     .reset_mode(ResetMode::Strict);
    /// manager.validate()?;
    ///
    /// // How a caller tells an exhausted budget from other connect errors:
    /// fn is_budget_exhausted(err: &sqlx::Error) -> bool {
    ///     matches!(err, sqlx::Error::Configuration(cause) if cause.is::<FleetBudgetExhausted>())
    /// }
    /// # let _ = (manager, is_budget_exhausted);
    /// # Ok(())
    /// # }
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # demo().unwrap();
    /// ```
    ///
    /// Fair share is on for a total of 2 or more: see
    /// [`fleet_share_interval`](Self::fleet_share_interval).
    #[must_use]
    pub fn fleet_budget(mut self, name: &str, total: u32) -> Self {
        self.settings.set_fleet_budget(name, total);
        self
    }

    /// Sets how often this instance rechecks its [fair
    /// share](pool_postgres::fleet#fair-share) of the fleet budget, or
    /// turns fair share off (`None`). Defaults to
    /// [`DEFAULT_SHARE_INTERVAL`](fleet::DEFAULT_SHARE_INTERVAL), 1 s.
    ///
    /// With fair share on, each of the `N` live instances of the budget is
    /// guaranteed `floor(total / N)` tickets and may borrow the rest while
    /// nobody else needs them. An instance is this manager and its clones
    /// (pools built from clones share one share); each holds a control
    /// session, which holds a ticket: see [fair
    /// share](pool_postgres::guide::fleet_budget#fair-share).
    ///
    /// The setter never fails, so it chains: a zero interval is
    /// [`ZeroShareInterval`](pool_postgres::fleet::FleetBudgetConfigError::ZeroShareInterval),
    /// an interval on a budget of one ticket
    /// [`ShareOfOneTicket`](pool_postgres::fleet::FleetBudgetConfigError::ShareOfOneTicket),
    /// and a call before [`fleet_budget`](Self::fleet_budget)
    /// [`ShareIntervalWithoutBudget`](pool_postgres::fleet::FleetBudgetConfigError::ShareIntervalWithoutBudget),
    /// from [`validate`](Self::validate).
    #[must_use]
    pub fn fleet_share_interval(mut self, interval: Option<std::time::Duration>) -> Self {
        self.settings.set_fleet_share_interval(interval);
        self
    }

    /// This instance's view of its fair share of the fleet budget, as of
    /// its last recheck; `None` without a budget or with fair share off.
    pub fn fleet_share(&self) -> Option<FleetShareView> {
        self.settings.fleet_share()
    }

    /// The fleet budget, if one is set and valid.
    pub fn current_fleet_budget(&self) -> Option<&FleetBudget> {
        self.budget()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pool_postgres::fleet::FleetBudgetConfigError;

    fn cause<E: std::error::Error + Clone + 'static>(result: Result<(), Error>) -> E {
        match result {
            Err(Error::Configuration(cause)) => cause
                .downcast_ref::<E>()
                .cloned()
                .unwrap_or_else(|| panic!("another cause: {cause}")),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn transaction_pooler_mode_fixes_the_statement_cache_the_relay_keeps() {
        let options = PgConnectOptions::new().statement_cache_capacity(7);
        let manager = SqlxManager::<PgConnection>::new(options);
        let session = format!("{:?}", manager.options_for_connect(None));
        assert!(
            session.contains("statement_cache_capacity: 7,"),
            "{session}"
        );

        // Passed through, the options are as given.
        let manager = manager.pooler_mode(PoolerMode::Transaction);
        let passed = format!("{:?}", manager.options_for_connect(None));
        assert!(passed.contains("statement_cache_capacity: 7,"), "{passed}");

        let manager = manager.pooler_statements(PoolerStatements::Unnamed);
        let transaction = format!("{:?}", manager.options_for_connect(None));
        assert!(
            transaction.contains(&format!(
                "statement_cache_capacity: {TRANSACTION_STATEMENT_CACHE},"
            )),
            "{transaction}"
        );
        // The manager's own options are left as given.
        let kept = format!("{:?}", manager.connect_options());
        assert!(kept.contains("statement_cache_capacity: 7,"), "{kept}");
    }

    #[test]
    fn bad_fair_share_settings_fail_validate_and_clones_share_one_instance() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        let zero = manager
            .clone()
            .fleet_budget("api", 3)
            .fleet_share_interval(Some(std::time::Duration::ZERO));
        assert_eq!(
            cause::<FleetBudgetConfigError>(zero.validate()),
            FleetBudgetConfigError::ZeroShareInterval
        );
        assert!(zero.fleet_share().is_none());
        let early = manager
            .clone()
            .fleet_share_interval(None)
            .fleet_budget("api", 3);
        assert_eq!(
            cause::<FleetBudgetConfigError>(early.validate()),
            FleetBudgetConfigError::ShareIntervalWithoutBudget
        );
        let off = manager
            .clone()
            .fleet_budget("api", 3)
            .fleet_share_interval(None);
        assert!(off.validate().is_ok() && off.fleet_share().is_none());
        let on = manager.fleet_budget("api", 3);
        let view = on.fleet_share().expect("on by default");
        assert_eq!((view.members, view.share, view.held), (0, 3, 0));
        let clone = on.clone();
        assert!(std::sync::Arc::ptr_eq(
            on.settings.share().expect("on"),
            clone.settings.share().expect("on")
        ));
    }

    #[test]
    fn a_fleet_budget_is_refused_behind_a_transaction_pooler_either_way_round() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        let first = manager
            .clone()
            .pooler_mode(PoolerMode::Transaction)
            .fleet_budget("api", 3);
        assert_eq!(
            cause::<FleetBudgetConfigError>(first.validate()),
            FleetBudgetConfigError::BehindTransactionPooler
        );
        let budgeted = manager.fleet_budget("api", 3);
        assert!(budgeted.validate().is_ok());
        assert_eq!(
            budgeted.current_fleet_budget().map(FleetBudget::total),
            Some(3)
        );
        assert!(format!("{budgeted:?}").contains("\"api\""), "{budgeted:?}");
        let late = budgeted.pooler_mode(PoolerMode::Transaction);
        let error = late.validate().expect_err("refused");
        assert_eq!(
            cause::<FleetBudgetConfigError>(Err(error)),
            FleetBudgetConfigError::BehindTransactionPooler
        );
        let text = late.validate().expect_err("refused").to_string();
        assert!(
            text.contains("fleet_budget") && text.contains("PoolerMode::Transaction"),
            "{text}"
        );
    }

    #[test]
    fn the_target_names_the_host_and_port_or_the_socket() {
        use pool_core::ManageConnection;
        let target = |options: PgConnectOptions| SqlxManager::<PgConnection>::new(options).target();
        let tcp = PgConnectOptions::new().host("db1").port(6000);
        assert_eq!(target(tcp).as_deref(), Some("db1:6000"));
        let v6 = PgConnectOptions::new().host("::1").port(6000);
        assert_eq!(target(v6).as_deref(), Some("[::1]:6000"));
        let socket = PgConnectOptions::new().socket("/run/pg");
        assert_eq!(target(socket).as_deref(), Some("/run/pg"));
    }

    #[tokio::test]
    async fn settings_that_clash_fail_pool_new_and_every_connect_without_io() {
        use pool_core::{ManageConnection, Pool, PoolConfig, PoolError};

        // Port 1 on loopback: were a connect attempted, it would fail with
        // an I/O error, not this one.
        let options = PgConnectOptions::new().host("127.0.0.1").port(1);
        let manager = SqlxManager::<PgConnection>::new(options)
            .fleet_budget("api", 3)
            .pooler_mode(PoolerMode::Transaction);
        assert_eq!(
            cause::<FleetBudgetConfigError>(manager.connect().await.map(drop)),
            FleetBudgetConfigError::BehindTransactionPooler
        );
        let config = PoolConfig::builder().max_size(1).build().expect("config");
        match Pool::new(manager, config).await.map(drop) {
            Err(PoolError::Backend(error)) => assert_eq!(
                cause::<FleetBudgetConfigError>(Err(error)),
                FleetBudgetConfigError::BehindTransactionPooler
            ),
            other => panic!("expected the settings to be refused, got {other:?}"),
        }
    }

    #[test]
    fn bad_budgets_are_typed_errors_at_validation() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        let empty = manager.clone().fleet_budget("", 3);
        assert_eq!(
            cause::<FleetBudgetConfigError>(empty.validate()),
            FleetBudgetConfigError::EmptyName
        );
        assert!(empty.current_fleet_budget().is_none());
        assert_eq!(
            cause::<FleetBudgetConfigError>(manager.clone().fleet_budget("api", 0).validate()),
            FleetBudgetConfigError::ZeroTotal
        );
        // The last call wins.
        let fixed = manager.fleet_budget("api", 0).fleet_budget("api", 2);
        assert!(fixed.validate().is_ok());
    }

    #[test]
    fn tls_to_a_transaction_pooler_is_refused() {
        for (mode, name) in [
            (PgSslMode::Require, "require"),
            (PgSslMode::VerifyCa, "verify-ca"),
            (PgSslMode::VerifyFull, "verify-full"),
        ] {
            let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new().ssl_mode(mode));
            assert!(manager.validate().is_ok(), "session mode takes {name}");
            let manager = manager.pooler_mode(PoolerMode::Transaction);
            assert!(manager.validate().is_ok(), "passed through, {name} is fine");
            let manager = manager.pooler_statements(PoolerStatements::Unnamed);
            assert_eq!(
                cause::<TransactionPoolerError>(manager.validate()),
                TransactionPoolerError::Tls { ssl_mode: name }
            );
            let text = manager.validate().expect_err("refused").to_string();
            assert!(
                text.contains("pooler_statements") && text.contains(name),
                "{text}"
            );
        }
        for mode in [PgSslMode::Prefer, PgSslMode::Allow, PgSslMode::Disable] {
            let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new().ssl_mode(mode))
                .pooler_mode(PoolerMode::Transaction)
                .pooler_statements(PoolerStatements::Unnamed);
            assert!(manager.validate().is_ok(), "{mode:?}");
        }
    }

    #[test]
    fn unnamed_statements_without_transaction_mode_are_refused_either_way_round() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        for clash in [
            manager.clone().pooler_statements(PoolerStatements::Unnamed),
            manager
                .clone()
                .pooler_mode(PoolerMode::Transaction)
                .pooler_statements(PoolerStatements::Unnamed)
                .pooler_mode(PoolerMode::Session),
        ] {
            assert_eq!(
                cause::<TransactionPoolerError>(clash.validate()),
                TransactionPoolerError::UnnamedOutsideTransactionMode
            );
            let text = clash.validate().expect_err("refused").to_string();
            assert!(
                text.contains("pooler_statements") && text.contains("pooler_mode"),
                "{text}"
            );
        }
        let fine = manager
            .pooler_statements(PoolerStatements::Unnamed)
            .pooler_mode(PoolerMode::Transaction);
        assert!(fine.validate().is_ok());
    }
}
