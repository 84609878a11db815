//! What [`PgClient::with_timeout`](super::PgClient::with_timeout) fails with,
//! and the handle that sends its cancel request.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::CancelToken;

use super::error::PgError;

/// A query run under a time limit failed or ran out of time.
#[derive(Debug)]
#[non_exhaustive]
pub enum QueryError {
    /// The query failed within the limit; the driver's error is the source.
    Db(tokio_postgres::Error),
    /// The pooled client refused the query before sending it (see
    /// [`PgError::SessionStateBehindPooler`]); that error is the source.
    Refused(PgError),
    /// The limit passed; the cancel request was delivered to the server and
    /// the connection will be closed when it returns to the pool.
    TimedOut {
        /// The limit that passed.
        limit: Duration,
    },
    /// The limit passed and the cancel request could not be delivered
    /// (`error` is `None` when it did not finish within the manager's
    /// `cancel_timeout`); the query may still run on the server. The
    /// connection will be closed when it returns to the pool, which ends the
    /// query once the server notices the closed socket.
    CancelFailed {
        /// The limit that passed.
        limit: Duration,
        /// Why the cancel request failed, if the driver said: `None` when
        /// it timed out, or when the relay of
        /// [`PoolerMode::Transaction`](crate::PoolerMode::Transaction) could
        /// not reach the pooler to send it (the I/O error is logged).
        error: Option<tokio_postgres::Error>,
    },
}

impl QueryError {
    /// Whether the limit passed (`TimedOut` or `CancelFailed`).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            QueryError::TimedOut { .. } | QueryError::CancelFailed { .. }
        )
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Db(_) => f.write_str("query failed"),
            QueryError::Refused(e) => fmt::Display::fmt(e, f),
            QueryError::TimedOut { limit } => {
                write!(f, "query did not finish within {limit:?} and was cancelled")
            }
            QueryError::CancelFailed { limit, error: None } => write!(
                f,
                "query did not finish within {limit:?}; the cancel request timed out or could not \
                 reach the server"
            ),
            QueryError::CancelFailed { limit, .. } => write!(
                f,
                "query did not finish within {limit:?}; the cancel request failed"
            ),
        }
    }
}

impl Error for QueryError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            QueryError::Db(e) => Some(e),
            QueryError::Refused(e) => e.source(),
            QueryError::CancelFailed { error: Some(e), .. } => Some(e),
            QueryError::TimedOut { .. } | QueryError::CancelFailed { error: None, .. } => None,
        }
    }
}

impl From<tokio_postgres::Error> for QueryError {
    fn from(e: tokio_postgres::Error) -> Self {
        QueryError::Db(e)
    }
}

impl From<PgError> for QueryError {
    fn from(e: PgError) -> Self {
        match e {
            PgError::Db(e) => QueryError::Db(e),
            e => QueryError::Refused(e),
        }
    }
}

/// Sends a cancel request for the query running behind a token, over a new
/// connection made with the manager's TLS connector (or, for a relayed
/// connection, straight to the pooler). `Err(None)`: no connection could be
/// made to send it, and the cause was logged.
pub(super) type Canceller = Arc<
    dyn Fn(
            CancelToken,
        )
            -> Pin<Box<dyn Future<Output = Result<(), Option<tokio_postgres::Error>>> + Send>>
        + Send
        + Sync,
>;

/// How a connection cancels a query that ran past its limit: the request's
/// sender and how long the request may take.
pub(super) struct CancelHandle {
    canceller: Canceller,
    timeout: Duration,
}

impl CancelHandle {
    pub(super) fn new(canceller: Canceller, timeout: Duration) -> Self {
        Self { canceller, timeout }
    }

    /// Sends the cancel request for the query behind `token`, which ran past
    /// `limit`, and says how that went as the timed-out query's error.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the request may or may not have reached the server.
    pub(super) async fn cancel(&self, token: CancelToken, limit: Duration) -> QueryError {
        match tokio::time::timeout(self.timeout, (self.canceller)(token)).await {
            Ok(Ok(())) => QueryError::TimedOut { limit },
            Ok(Err(Some(error))) => {
                tracing::warn!(%error, "cancel request for a timed-out query failed");
                QueryError::CancelFailed {
                    limit,
                    error: Some(error),
                }
            }
            Ok(Err(None)) => QueryError::CancelFailed { limit, error: None },
            Err(_elapsed) => {
                tracing::warn!(
                    cancel_timeout = ?self.timeout,
                    "cancel request for a timed-out query did not finish in time"
                );
                QueryError::CancelFailed { limit, error: None }
            }
        }
    }
}
