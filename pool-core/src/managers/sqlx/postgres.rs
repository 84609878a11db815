//! PostgreSQL: `PgConnection`.

use std::fmt;

use super::backend::{private, SqlxConnection, SqlxPasswordConnection};
use super::driver::postgres::{PgConnectOptions, PgConnection};
use super::driver::{Error, Executor};
use super::reset::BoxFuture;
use super::server_flag::{queue_tracked_rollbacks, roll_back_by_server_flag};
use super::SqlxManager;
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
    #[must_use]
    pub fn pooler_mode(mut self, mode: PoolerMode) -> Self {
        self.pooler_mode = mode;
        self
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
}
