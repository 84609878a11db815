//! Telling a dirty connection from a clean one, and cleaning it.
//!
//! The checks here read only what sqlx keeps in memory, plus (for a driver
//! whose reads are cancel-safe) one non-blocking poll of the socket. The
//! cleaning reads the server's own transaction flag, so it also catches what
//! sqlx lost track of.
//!
//! sqlx (0.8 and 0.9 alike) makes public, but hides from its docs, the items
//! this relies on:
//! `Connection::should_flush` and `Connection::flush` (what sqlx's own pool
//! uses to send a queued rollback) and the `TransactionManager` of each
//! driver (`get_transaction_depth`, `start_rollback`, `rollback`). The
//! behaviour they give is pinned by the tests in `pool-core/tests/sqlx_*.rs`
//! against real servers, so a sqlx update that changes it fails there.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Wake, Waker};

use super::driver::{Connection, Database};

use super::backend::SqlxConnection;

/// How much work the manager does to make sure a returned connection is not
/// inside a transaction.
///
/// # Example
///
/// ```no_run
/// # #[cfg(feature = "sqlx-sqlite")]
/// # fn demo() -> Result<(), sqlx::Error> {
/// use pool_sqlx::{ResetMode, SqlxManager};
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
    /// and a `Connection::begin()` cancelled after its reply came back but
    /// before it was read (on MySQL, any cancelled `begin()` whose `BEGIN`
    /// left): sqlx reads the server's transaction status from every reply
    /// but keeps it private. Use [`Strict`](Self::Strict) if your code can
    /// do either. `Pool::begin` needs neither: cancelled with its `BEGIN` in
    /// flight, it closes the connection on PostgreSQL and MySQL.
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
/// (`POLL_IN_FLIGHT` of the driver's sealed trait).
fn settled<C: Connection>(conn: &mut C) -> bool {
    let mut cx = Context::from_waker(&NO_WAKE);
    let flush = pin!(conn.flush());
    matches!(flush.poll(&mut cx), Poll::Ready(Ok(())))
}

/// The cheap check when a connection comes back; see [`ResetMode`].
pub(super) fn needs_reset<C: SqlxConnection>(mode: ResetMode, conn: &mut C) -> bool {
    mode == ResetMode::Strict
        || conn.is_in_transaction()
        || conn.should_flush()
        || (C::POLL_IN_FLIGHT && !settled(conn))
}

/// The driver's transaction manager.
pub(super) type Tm<C> = <<C as Connection>::Database as Database>::TransactionManager;
