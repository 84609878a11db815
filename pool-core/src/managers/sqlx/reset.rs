//! Telling a dirty connection from a clean one, and cleaning it.
//!
//! The checks here read only what sqlx keeps in memory, plus (for a driver
//! whose reads are cancel-safe) one non-blocking poll of the socket. The
//! cleaning reads the server's own transaction flag, so it also catches what
//! sqlx lost track of.
//!
//! sqlx 0.8 makes public, but hides from its docs, the items this relies on:
//! `Connection::should_flush` and `Connection::flush` (what sqlx's own pool
//! uses to send a queued rollback) and the `TransactionManager` of each
//! driver (`get_transaction_depth`, `start_rollback`, `rollback`). The
//! behaviour they give is pinned by the tests in `pool-core/tests/sqlx_*.rs`
//! against real servers, so a sqlx update that changes it fails there.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Wake, Waker};

use ::sqlx::{Connection, Database, Error, TransactionManager};

use super::backend::private::Sealed;
use super::backend::SqlxConnection;

/// How much work the manager does to make sure a returned connection is not
/// inside a transaction.
///
/// # Example
///
/// ```no_run
/// # #[cfg(feature = "sqlx-sqlite")]
/// # fn demo() -> Result<(), sqlx::Error> {
/// use pool_core::managers::sqlx::{ResetMode, SqlxManager};
///
/// let manager = SqlxManager::<sqlx::SqliteConnection>::from_url("sqlite://app.db")?
///     .reset_mode(ResetMode::Strict);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ResetMode {
    /// Trust what sqlx tracks, at no cost for a clean return. The default.
    ///
    /// A connection is reset when sqlx counts a transaction open on it (begun
    /// through `begin()` and neither committed nor rolled back, e.g. leaked
    /// with `mem::forget`), when it holds statements not yet sent (the
    /// `ROLLBACK` a dropped `sqlx::Transaction` queues, or a `BEGIN` whose
    /// `begin()` was cancelled before it left), and on PostgreSQL when a
    /// reply is still in flight (a `begin()` or query cancelled while the
    /// server was working; the reset then waits for that reply, within the
    /// pool's `validation_timeout`, after which the pool closes the
    /// connection). A clean return does no I/O.
    ///
    /// Not caught: a transaction opened by SQL text (`execute("BEGIN")`),
    /// and a cancelled `begin()` whose reply came back before the connection
    /// did (on MySQL, any cancelled `begin()` whose `BEGIN` left). Use
    /// [`Strict`](Self::Strict) if your code can do either.
    #[default]
    Tracked,
    /// Ask the server on every return.
    ///
    /// Every returned connection goes through the reset: one round trip (a
    /// `SELECT 1` on PostgreSQL, `DO 0` on MySQL, whose reply carries the
    /// server's transaction flag; about the cost of a ping, plus a
    /// `ROLLBACK` round trip when a transaction was open), or two
    /// in-process statements on SQLite (`BEGIN`, `ROLLBACK`). This catches
    /// a transaction however it was opened, including a raw `BEGIN` and an
    /// aborted transaction. The price, on every return: that round trip,
    /// and a task the pool spawns to run it, during which the connection is
    /// not yet available to waiters.
    Strict,
}

/// A waker that does nothing: the poll in [`settled`] only wants to know
/// whether the connection is ready now, never to be woken later.
struct NoWake;

impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

static NO_WAKE: LazyLock<Waker> = LazyLock::new(|| Waker::from(Arc::new(NoWake)));

/// Whether the connection has nothing queued to send and no reply to read,
/// found by polling sqlx's own flush once without blocking.
///
/// On a clean connection the poll returns at once without any system call.
/// A reply that already arrived is read (and its state taken in by sqlx);
/// one still on its way leaves the poll pending, and so does a write the
/// socket cannot take yet. Dropping the poll there is safe only for a driver
/// whose reads keep partial messages buffered
/// ([`Sealed::POLL_IN_FLIGHT`]).
fn settled<C: Connection>(conn: &mut C) -> bool {
    let mut cx = Context::from_waker(&NO_WAKE);
    let mut flush = conn.flush();
    matches!(flush.as_mut().poll(&mut cx), Poll::Ready(Ok(())))
}

/// The cheap check when a connection comes back; see [`ResetMode`].
pub(super) fn needs_reset<C: SqlxConnection>(mode: ResetMode, conn: &mut C) -> bool {
    mode == ResetMode::Strict
        || conn.is_in_transaction()
        || conn.should_flush()
        || (C::POLL_IN_FLIGHT && !settled(conn))
}

pub(super) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

type Tm<C> = <<C as Connection>::Database as Database>::TransactionManager;

/// Queues one rollback per transaction level sqlx tracks (PostgreSQL and
/// MySQL write it to the send buffer without I/O; the next statement sends it
/// in the same write).
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-mysql"))]
pub(super) fn queue_tracked_rollbacks<C: Connection>(conn: &mut C) {
    for _ in 0..Tm::<C>::get_transaction_depth(conn) {
        Tm::<C>::start_rollback(conn);
    }
}

/// Sends `probe` behind whatever is queued and reads the server's
/// transaction flag from its reply through `begin_with`, then rolls back if
/// the flag says a transaction is still open.
///
/// `probe` must neither open nor end a transaction. Used for the drivers
/// whose `begin_with` checks the flag without changing the transaction depth
/// when it fails (PostgreSQL and MySQL); the caller has queued the tracked
/// rollbacks, so the depth is zero here.
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-mysql"))]
pub(super) async fn roll_back_by_server_flag<C: Sealed>(
    conn: &mut C,
    probe: &'static str,
) -> Result<(), Error> {
    let failed_inside = match conn.begin_with(probe).await {
        // The flag was clear after the probe: nothing open.
        Err(Error::BeginFailed) => return Ok(()),
        // The flag was set, so a transaction sqlx did not know about is open;
        // `begin_with` now counts it, and its rollback ends it.
        Ok(tx) => return tx.rollback().await,
        // The probe (or a statement queued before it) failed on the server,
        // e.g. PostgreSQL refusing anything inside an aborted transaction.
        Err(Error::Database(e)) => e,
        Err(e) => return Err(e),
    };
    tracing::debug!(error = %failed_inside, "reset probe failed on the server; rolling back");
    // A plain `ROLLBACK` ends whatever is open (and is harmless if nothing
    // is); sqlx's depth is already zero.
    C::execute_raw(conn, "ROLLBACK").await
}

/// Rolls back every level sqlx tracks on a connection whose transaction
/// commands run one by one on a worker (SQLite), then makes sure by SQL that
/// nothing is open.
///
/// The depth is read after each awaited rollback, so a rollback the worker
/// still had queued (from a dropped `sqlx::Transaction`) is counted right; the
/// loop is bounded by the depth first seen plus one.
#[cfg(feature = "sqlx-sqlite")]
pub(super) async fn roll_back_one_by_one<C: Sealed>(conn: &mut C) -> Result<(), Error> {
    let bound = Tm::<C>::get_transaction_depth(conn) + 1;
    for _ in 0..bound {
        if Tm::<C>::get_transaction_depth(conn) == 0 {
            break;
        }
        Tm::<C>::rollback(conn).await?;
    }
    if Tm::<C>::get_transaction_depth(conn) != 0 {
        return Err(Error::Protocol(
            "transaction depth did not reach zero while rolling back".into(),
        ));
    }
    // A raw `BEGIN` fails inside a transaction; either way one `ROLLBACK`
    // leaves none open.
    match C::execute_raw(conn, "BEGIN").await {
        Ok(()) | Err(Error::Database(_)) => C::execute_raw(conn, "ROLLBACK").await,
        Err(e) => Err(e),
    }
}
