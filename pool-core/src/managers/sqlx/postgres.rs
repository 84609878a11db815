//! PostgreSQL: `PgConnection`.

use std::fmt;

use super::backend::{private, SqlxConnection, SqlxPasswordConnection};
use super::driver::postgres::{PgConnectOptions, PgConnection};
use super::driver::{Error, Executor};
use super::reset::BoxFuture;
use super::server_flag::{queue_tracked_rollbacks, roll_back_by_server_flag};
use super::SqlxManager;
use crate::managers::fleet::{FleetBudget, FleetBudgetConfigError};
use crate::PoolerMode;

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

    fn for_pooler(options: &PgConnectOptions, mode: PoolerMode) -> Option<PgConnectOptions> {
        match mode {
            PoolerMode::Transaction => Some(options.clone().statement_cache_capacity(0)),
            _ => None,
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

    fn claim_ticket<'a>(
        conn: &'a mut Self,
        budget: &'a FleetBudget,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(async move {
            // Without parameters sqlx sends it as a simple query: one round
            // trip, no statement prepared or cached. With them it would
            // prepare first, a second round trip.
            let sql = budget.claim_sql_literal(budget.random_start());
            let row = conn.fetch_optional(super::built_sql(&sql)).await?;
            Ok(row.is_some())
        })
    }
}

impl private::SealedPassword for PgConnection {}

impl SqlxManager<PgConnection> {
    /// Makes the manager safe behind a pooler that hands out server
    /// connections per transaction (PgBouncer or pgcat in transaction mode).
    /// Defaults to [`PoolerMode::Session`]: connections as configured.
    ///
    /// In [`PoolerMode::Transaction`]:
    ///
    /// - every connection is opened with sqlx's `statement_cache_capacity(0)`,
    ///   so no prepared statement is cached for reuse on a server connection
    ///   the pooler may since have given to someone else;
    /// - every query through `&pool` (the pool as an executor) runs as an
    ///   unnamed statement, as with sqlx's `.persistent(false)`, so none is
    ///   left on the server.
    ///
    /// Queries through a connection or a [`Transaction`](super::Transaction)
    /// (`&mut *conn`, `&mut *tx`) go to sqlx directly: give them
    /// `.persistent(false)`. With the cache off, sqlx still prepares a
    /// persistent query (its default) under a new name each time and never
    /// closes it, so the server's statements for that session grow with
    /// every such query.
    ///
    /// Both [`ResetMode`](super::ResetMode)s stay available: their reset is
    /// a plain statement plus, when a transaction is open, its `ROLLBACK`,
    /// neither of which needs the same server session.
    ///
    /// sqlx prepares a statement in one round trip and binds it in the next;
    /// outside a transaction, a pooler may run the two on different server
    /// connections. PgBouncer 1.21 and later with `max_prepared_statements`
    /// above 0 carries statements across them; older poolers need queries in
    /// a transaction, where the server connection stays the same.
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo() -> Result<(), sqlx::Error> {
    /// use pool_core::managers::sqlx::SqlxManager;
    /// use pool_core::PoolerMode;
    ///
    /// let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@pgbouncer:6432/app")?
    ///     .pooler_mode(PoolerMode::Transaction);
    /// # Ok(())
    /// # }
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # demo().unwrap();
    /// ```
    ///
    /// A [`fleet_budget`](Self::fleet_budget) cannot work in
    /// [`PoolerMode::Transaction`]: set after a budget, this mode makes
    /// every connect fail (see [`validate`](Self::validate)).
    #[must_use]
    pub fn pooler_mode(mut self, mode: PoolerMode) -> Self {
        self.pooler_mode = mode;
        self
    }

    /// Makes every connection hold one of `total` tickets of the fleet
    /// budget `name`, shared by every process that uses the same name on the
    /// same database (with this manager, on sqlx 0.8 or 0.9, or with
    /// `PostgresManager::fleet_budget`): a session-level advisory lock taken
    /// right after connecting, in one round trip per connect and none per
    /// checkout. The server releases the ticket when the connection closes,
    /// however the process ends. See [`fleet`](crate::managers::fleet) for
    /// the lock key and its collisions.
    ///
    /// A connect that finds no ticket free fails with
    /// `sqlx::Error::Configuration` holding a
    /// [`FleetBudgetExhausted`](crate::managers::fleet::FleetBudgetExhausted),
    /// whose text says "fleet budget"; the pool retries it with back-off
    /// while callers wait within their `acquire_timeout`. Idle connections
    /// keep their tickets: an `idle_timeout` and a low `min_idle` let an
    /// idle process give its share back. A `DISCARD ALL` or
    /// `pg_advisory_unlock_all()` sent through a connection releases its
    /// ticket while the connection stays open, so the budget no longer
    /// counts it.
    ///
    /// # Errors
    ///
    /// [`FleetBudgetConfigError`] for an empty name or a total of 0 or above
    /// `i32::MAX`, and [`FleetBudgetConfigError::BehindTransactionPooler`]
    /// in [`PoolerMode::Transaction`].
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use pool_core::managers::fleet::FleetBudgetExhausted;
    /// use pool_core::managers::sqlx::SqlxManager;
    ///
    /// let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@db.internal/shop")?
    ///     .fleet_budget("shop-api", 80)?;
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
    pub fn fleet_budget(mut self, name: &str, total: u32) -> Result<Self, FleetBudgetConfigError> {
        self.fleet = Some(FleetBudget::new(name, total)?);
        self.check_settings()?;
        Ok(self)
    }

    /// The fleet budget, if one is set.
    pub fn current_fleet_budget(&self) -> Option<&FleetBudget> {
        self.fleet.as_ref()
    }

    /// Checks that the settings work together; every connect runs it too,
    /// before any I/O.
    ///
    /// # Errors
    ///
    /// [`FleetBudgetConfigError::BehindTransactionPooler`] for a fleet
    /// budget in [`PoolerMode::Transaction`].
    pub fn validate(&self) -> Result<(), FleetBudgetConfigError> {
        self.check_settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_pooler_mode_turns_the_statement_cache_off() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        let session = format!("{:?}", manager.options_for_connect(None));
        assert!(
            session.contains("statement_cache_capacity: 100"),
            "{session}"
        );

        let manager = manager.pooler_mode(PoolerMode::Transaction);
        let transaction = format!("{:?}", manager.options_for_connect(None));
        assert!(
            transaction.contains("statement_cache_capacity: 0,"),
            "{transaction}"
        );
        // The manager's own options are left as given.
        let kept = format!("{:?}", manager.connect_options());
        assert!(kept.contains("statement_cache_capacity: 100"), "{kept}");
    }

    #[test]
    fn a_fleet_budget_is_refused_behind_a_transaction_pooler_either_way_round() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        assert_eq!(
            manager
                .clone()
                .pooler_mode(PoolerMode::Transaction)
                .fleet_budget("api", 3)
                .map(drop),
            Err(FleetBudgetConfigError::BehindTransactionPooler)
        );
        let budgeted = manager.fleet_budget("api", 3).expect("valid budget");
        assert_eq!(budgeted.validate(), Ok(()));
        assert_eq!(
            budgeted.current_fleet_budget().map(FleetBudget::total),
            Some(3)
        );
        assert!(format!("{budgeted:?}").contains("\"api\""), "{budgeted:?}");
        let late = budgeted.pooler_mode(PoolerMode::Transaction);
        assert_eq!(
            late.validate(),
            Err(FleetBudgetConfigError::BehindTransactionPooler)
        );
    }

    #[tokio::test]
    async fn a_fleet_budget_set_before_a_transaction_pooler_fails_every_connect_without_io() {
        use crate::managers::fleet::FleetBudgetConfigError as E;
        use crate::ManageConnection;

        // Port 1 on loopback: were a connect attempted, it would fail with
        // an I/O error, not this one.
        let options = PgConnectOptions::new().host("127.0.0.1").port(1);
        let manager = SqlxManager::<PgConnection>::new(options)
            .fleet_budget("api", 3)
            .expect("valid budget")
            .pooler_mode(PoolerMode::Transaction);
        match manager.connect().await {
            Err(Error::Configuration(cause)) => {
                assert_eq!(cause.downcast_ref::<E>(), Some(&E::BehindTransactionPooler))
            }
            other => panic!("expected the settings to be refused, got {other:?}"),
        }
    }

    #[test]
    fn bad_budgets_are_typed_errors() {
        let manager = SqlxManager::<PgConnection>::new(PgConnectOptions::new());
        assert_eq!(
            manager.clone().fleet_budget("", 3).map(drop),
            Err(FleetBudgetConfigError::EmptyName)
        );
        assert_eq!(
            manager.fleet_budget("api", 0).map(drop),
            Err(FleetBudgetConfigError::ZeroTotal)
        );
    }
}
