//! The cancel on timeout: [`PgClient::with_timeout`] runs a query under a
//! time limit and, past it, sends the server-side cancel request and marks
//! the connection so the pool closes it.

use std::future::IntoFuture;
use std::time::Duration;

use super::client::PgClient;
use super::timeout::QueryError;

impl PgClient {
    /// Runs `query` for at most `limit`; past that, cancels it on the server
    /// and marks this connection so the pool closes it on return.
    ///
    /// Dropping a query's future does not stop the query: the server runs it
    /// to the end and the next user of the connection waits behind it. This
    /// sends PostgreSQL's cancel request (a new connection to the server,
    /// bounded by the manager's
    /// [`cancel_timeout`](super::PostgresManager::cancel_timeout)) and then
    /// retires the connection. It is retired rather than reused because a
    /// cancel request is not tied to a query: one that reaches the server
    /// late would cancel whatever runs on the connection next.
    ///
    /// Do not run further queries on a connection after it timed out; drop
    /// it.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pool_postgres::{PgClient, QueryError};
    /// # async fn run(conn: &PgClient) -> Result<(), QueryError> {
    /// let rows = conn
    ///     .with_timeout(Duration::from_millis(100), conn.query("SELECT pg_sleep(5)", &[]))
    ///     .await;
    /// assert!(matches!(rows, Err(ref e) if e.is_timeout()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QueryError::Db`] if the query fails in time;
    /// [`QueryError::Refused`] if the pooled client refused it before
    /// sending it;
    /// [`QueryError::TimedOut`] if the limit passed and the cancel request
    /// was sent; [`QueryError::CancelFailed`] if the limit passed and the
    /// cancel request could not be delivered.
    ///
    /// # Cancel safety
    ///
    /// If this future is dropped, the query is abandoned without a cancel
    /// and the connection is not marked: the same situation as dropping the
    /// bare query future.
    pub async fn with_timeout<F, T, E>(&self, limit: Duration, query: F) -> Result<T, QueryError>
    where
        F: IntoFuture<Output = Result<T, E>>,
        E: Into<QueryError>,
    {
        match tokio::time::timeout(limit, query).await {
            Ok(result) => result.map_err(Into::into),
            Err(_elapsed) => {
                self.set_abandoned(true);
                Err(self
                    .cancel_handle()
                    .cancel(self.client().cancel_token(), limit)
                    .await)
            }
        }
    }
}
