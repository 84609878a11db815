//! [`Transaction`]: an owned transaction on a pooled connection, from
//! `Pool::begin`.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::backend::SqlxConnection;
use super::driver::Error;
use super::driver_core::error::{DatabaseError, ErrorKind};
use super::driver_core::transaction::TransactionManager;
use super::reset::Tm;
use super::Pool;
use super::SqlxManager;
use pool_core::{PoolError, PooledConnection};

/// A transaction on a connection checked out of the pool, from
/// [`Pool::begin`](Pool::begin): owned, `Send` and `'static`, so it
/// can be moved into a task or stored.
///
/// Derefs (mutably) to the connection, so `&mut *tx` is a sqlx executor.
/// End it with [`commit`](Self::commit) or [`rollback`](Self::rollback);
/// the connection then goes back to the pool. Dropped without either, the
/// connection goes back with its transaction open, which the manager's
/// reset rolls back (one round trip on PostgreSQL and MySQL) before anyone
/// else can check it out.
///
/// # Example
///
/// ```
/// # #[cfg(feature = "sqlx-sqlite")]
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use pool_core::PoolConfig;
/// use pool_sqlx::{Pool, SqlxManager};
///
/// let manager = SqlxManager::<sqlx::SqliteConnection>::from_url("sqlite::memory:")?;
/// let pool = Pool::new(manager, PoolConfig::builder().max_size(1).build()?).await?;
/// sqlx::query("CREATE TABLE t (x INTEGER)").execute(&pool).await?;
///
/// let mut tx = pool.begin().await?;
/// sqlx::query("INSERT INTO t VALUES (1)").execute(&mut *tx).await?;
/// tx.commit().await?;
///
/// let tx = pool.begin().await?;
/// tokio::spawn(async move {
///     let mut tx = tx;
///     sqlx::query("INSERT INTO t VALUES (2)").execute(&mut *tx).await?;
///     drop(tx); // neither committed nor rolled back: rolled back
///     Ok::<_, sqlx::Error>(())
/// })
/// .await??;
///
/// let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t").fetch_one(&pool).await?;
/// assert_eq!(rows, 1);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "sqlx-sqlite"))]
/// # fn main() {}
/// ```
#[must_use = "dropping the transaction rolls it back"]
pub struct Transaction<C: SqlxConnection> {
    conn: PooledConnection<SqlxManager<C>>,
}

impl<C: SqlxConnection> Transaction<C> {
    /// Commits the transaction and gives the connection back to the pool.
    ///
    /// # Errors
    ///
    /// The `COMMIT`'s error. The connection then goes back with its
    /// transaction still counted by sqlx, so the pool rolls it back.
    ///
    /// # Cancel safety
    ///
    /// Cancelled, the connection goes back to the pool as if dropped: the
    /// transaction is rolled back unless the `COMMIT` already took effect.
    pub async fn commit(mut self) -> Result<(), Error> {
        Tm::<C>::commit(&mut self.conn).await
    }

    /// Rolls the transaction back and gives the connection back to the
    /// pool.
    ///
    /// # Errors
    ///
    /// The `ROLLBACK`'s error; the pool's reset then tries again or closes
    /// the connection.
    ///
    /// # Cancel safety
    ///
    /// Cancelled, the connection goes back to the pool as if dropped, and
    /// the pool rolls the transaction back.
    pub async fn rollback(mut self) -> Result<(), Error> {
        Tm::<C>::rollback(&mut self.conn).await
    }
}

impl<C: SqlxConnection> Deref for Transaction<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.conn
    }
}

impl<C: SqlxConnection> DerefMut for Transaction<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.conn
    }
}

impl<C: SqlxConnection> fmt::Debug for Transaction<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("conn", &self.conn)
            .finish()
    }
}

/// Holds the connection while `Pool::begin` runs its `BEGIN`; dropped
/// before that finished (the call was cancelled), it closes the connection
/// where a transaction could be open that no cheap check sees.
struct BeginGuard<C: SqlxConnection> {
    /// `Some` until [`defuse`](Self::defuse).
    conn: Option<PooledConnection<SqlxManager<C>>>,
}

impl<C: SqlxConnection> BeginGuard<C> {
    fn conn(&mut self) -> &mut C {
        match &mut self.conn {
            Some(conn) => conn,
            None => unreachable!("the guard holds its connection until defused"),
        }
    }

    fn defuse(mut self) -> PooledConnection<SqlxManager<C>> {
        match self.conn.take() {
            Some(conn) => conn,
            None => unreachable!("the guard holds its connection until defused"),
        }
    }
}

impl<C: SqlxConnection> Drop for BeginGuard<C> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if C::CLOSE_ON_CANCELLED_BEGIN {
                PooledConnection::discard(conn);
            }
        }
    }
}

impl<C: SqlxConnection> Pool<C> {
    /// Checks out a connection and begins a transaction on it, as sqlx's
    /// `Pool::begin` does; the [`Transaction`] owns the connection.
    ///
    /// # Errors
    ///
    /// Checking out fails as `sqlx::Error::PoolTimedOut` or
    /// `sqlx::Error::PoolClosed` (see [`into_sqlx_error`] for what the
    /// timeout's details become); the `BEGIN` fails with sqlx's error, and
    /// the connection goes back to the pool.
    ///
    /// # Cancel safety
    ///
    /// Cancelled while waiting for a connection, nothing is lost. Cancelled
    /// while the `BEGIN` is in flight, the connection is closed on
    /// PostgreSQL and MySQL (a transaction may have opened that sqlx does not
    /// count) and returned on SQLite, whose worker rolls back by itself.
    ///
    /// `#[track_caller]`: the checkout is recorded at the caller's line
    /// (`Pool::holders`, leak reports, timeouts), not this one.
    #[track_caller]
    pub fn begin(
        &self,
    ) -> impl std::future::Future<Output = Result<Transaction<C>, Error>> + Send + '_ {
        let checkout = self.get();
        async move {
            let conn = checkout.await.map_err(into_sqlx_error)?;
            let mut guard = BeginGuard { conn: Some(conn) };
            let begun = Tm::<C>::begin(guard.conn(), None).await;
            // Finished, with or without error: a failed `BEGIN` left nothing
            // open that the reset would not see, so the connection is
            // returned.
            let conn = guard.defuse();
            begun.map(|()| Transaction { conn })
        }
    }
}

/// What a failed checkout becomes where sqlx's error type is expected (the
/// pool as an executor, [`Pool::begin`](Pool::begin),
/// [`Pool::acquire`](Pool::acquire); `pool.get().await.map_err(into_sqlx_error)?`
/// in your own code):
/// `PoolError::Timeout` is `sqlx::Error::PoolTimedOut`, `Closed` is
/// `PoolClosed`, `Backend(e)` is `e`, and `ConnectFailed(e)` (fail fast) is
/// `e` when this caller holds the only reference, else the same variant
/// with the same text: a `Database` error whose `code()`, `message()`,
/// `kind()`, `constraint()` and `table()` are the original's (only a
/// downcast to the driver's own type, `PgDatabaseError` and the like, needs
/// the only reference), an `Io` error of the same `kind()`, and so on.
///
/// `PoolTimedOut` carries nothing, so the timeout's details (how long, in
/// which phase, the pool's counts, the last connect error) are logged at
/// `debug` level under the `pool_core` target first. Call `Pool::get` for
/// the full error.
pub fn into_sqlx_error(error: PoolError<Error>) -> Error {
    match error {
        PoolError::Backend(e) => e,
        PoolError::ConnectFailed(e) => Arc::try_unwrap(e).unwrap_or_else(shared_copy),
        PoolError::Closed => Error::PoolClosed,
        e => {
            tracing::debug!(error = %e, "checkout for a sqlx call failed");
            Error::PoolTimedOut
        }
    }
}

/// The error several callers share (one failed connect reaching them all,
/// fail fast), as a `sqlx::Error` of this caller's own: the same variant,
/// whose part inside is [`Shared`], so its text, its `source()` and what
/// code matches on (`Database` with its SQLSTATE, `Io` with its kind) are
/// those of the original.
fn shared_copy(e: Arc<Error>) -> Error {
    match &*e {
        Error::Database(_) => Error::Database(Box::new(Shared(e))),
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), Shared(e))),
        Error::Configuration(_) => Error::Configuration(Box::new(Shared(e))),
        Error::Tls(_) => Error::Tls(Box::new(Shared(e))),
        Error::Protocol(text) => Error::Protocol(text.clone()),
        Error::PoolTimedOut => Error::PoolTimedOut,
        Error::PoolClosed => Error::PoolClosed,
        Error::WorkerCrashed => Error::WorkerCrashed,
        Error::RowNotFound => Error::RowNotFound,
        // Nothing a connect fails with: the nearest variant that carries
        // a text of its own.
        other => Error::Protocol(other.to_string()),
    }
}

/// The part inside a shared `sqlx::Error` (the boxed cause of
/// `Configuration` or `Tls`, the `io::Error` of `Io`, the database's error
/// of `Database`), shown and sourced as the original's.
struct Shared(Arc<Error>);

impl Shared {
    /// The part of the original error this stands for.
    fn part(&self) -> &(dyn StdError + Send + Sync + 'static) {
        match &*self.0 {
            Error::Configuration(e) | Error::Tls(e) => &**e,
            Error::Io(e) => e,
            Error::Database(e) => e.as_error(),
            other => other,
        }
    }

    /// The database's error, when the original is one.
    fn db(&self) -> Option<&dyn DatabaseError> {
        match &*self.0 {
            Error::Database(e) => Some(&**e),
            _ => None,
        }
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.part(), f)
    }
}

impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The database's error as shown (which may say more than the
        // driver's part inside, e.g. where the connect went).
        match self.db() {
            Some(db) => fmt::Display::fmt(db, f),
            None => fmt::Display::fmt(self.part(), f),
        }
    }
}

impl StdError for Shared {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.part().source()
    }
}

impl DatabaseError for Shared {
    fn message(&self) -> &str {
        self.db().map_or("", |db| db.message())
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        self.db().and_then(|db| db.code())
    }

    fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
        self
    }

    fn is_transient_in_connect_phase(&self) -> bool {
        self.db()
            .is_some_and(|db| db.is_transient_in_connect_phase())
    }

    fn constraint(&self) -> Option<&str> {
        self.db().and_then(|db| db.constraint())
    }

    fn table(&self) -> Option<&str> {
        self.db().and_then(|db| db.table())
    }

    fn kind(&self) -> ErrorKind {
        self.db().map_or(ErrorKind::Other, |db| db.kind())
    }
}
