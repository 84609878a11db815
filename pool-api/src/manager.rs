//! The trait a backend implements so the pool can open, check and clean its
//! connections.

/// What a failed [`connect`](ManageConnection::connect) means, as
/// [`ManageConnection::classify_error`] says: whether the pool retries it
/// at once, fails its waiting callers fast, or keeps them waiting.
///
/// A pool that shares a connection budget with other processes, or sits
/// behind a pooler with a client limit, tells "no room now" apart from
/// "the database is down"; a refused login is told apart from a dropped
/// packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// A failure that trying again may cure: a refused or reset
    /// connection, a server restarting its listener. The pool retries
    /// the first one in a row at once, before any caller sees it; from
    /// the second on, with nothing open that could come back, the
    /// waiting callers fail fast with it (see
    /// [`PoolConfigBuilder::fail_fast`](crate::PoolConfigBuilder::fail_fast)).
    Transient,
    /// A failure that will not go away by trying again soon: a refused
    /// login (wrong password, unknown role), an unknown database, a
    /// setting the server rejects. Not retried at once: it fails the
    /// waiting callers fast at once (see
    /// [`PoolConfigBuilder::fail_fast`](crate::PoolConfigBuilder::fail_fast)),
    /// and `Pool::new` returns it.
    Permanent,
    /// "No capacity for another connection now" rather than "the database
    /// is unreachable": a shared budget of connections with no free
    /// ticket, say. Never fails waiting callers fast: they keep waiting,
    /// within their timeout, for a connection to come back or for a later
    /// connect, retried with back-off.
    CapacityRefusal,
}

impl ErrorClass {
    /// Whether a SQLSTATE from a refused connect says that trying again at
    /// once will not help: class 28 (invalid authorization: wrong password,
    /// unknown role), `3D000` (unknown database), `42501` (no privilege to
    /// connect), and MySQL's `42000` (access denied to, or no such,
    /// database). For SQL drivers' managers.
    pub fn is_permanent_sqlstate(code: &str) -> bool {
        code.starts_with("28") || matches!(code, "3D000" | "42501" | "42000")
    }
}

/// Opens, checks and cleans connections of one kind for the pool.
///
/// The pool calls [`connect`](Self::connect) to open a connection,
/// [`is_valid`](Self::is_valid) at checkout when validation is on,
/// [`classify_error`](Self::classify_error) when a connect fails,
/// and, each time a connection comes back, the two cheap synchronous checks
/// [`has_broken`](Self::has_broken) and [`needs_reset`](Self::needs_reset);
/// [`reset`](Self::reset) runs only when `needs_reset` said so.
/// `has_broken` also runs whenever an idle connection is checked out,
/// whatever the validation mode (not on a connection opened for the caller
/// waiting for it, which nobody has used yet).
/// A connection the pool is done with goes to [`close`](Self::close).
///
/// # Example
///
/// ```
/// use pool_api::{async_trait, ManageConnection};
///
/// #[derive(Debug)]
/// struct Counter;
///
/// #[async_trait]
/// impl ManageConnection for Counter {
///     type Connection = u64;
///     type Error = std::io::Error;
///
///     async fn connect(&self) -> Result<u64, std::io::Error> {
///         Ok(0)
///     }
///     async fn is_valid(&self, _conn: &mut u64) -> Result<(), std::io::Error> {
///         Ok(())
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ManageConnection: Send + Sync + 'static {
    /// The connection the pool holds.
    type Connection: Send + 'static;
    /// What opening or checking a connection can fail with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Checks the manager's own settings before the pool opens anything:
    /// the pool's `Pool::new` returns its error as
    /// `PoolError::Backend` at once, so settings that cannot work together
    /// are reported once, when the pool is built. No I/O. A lazy pool does
    /// not call it; a manager whose settings can fail should check them at
    /// the start of [`connect`](Self::connect) too. Defaults to `Ok(())`.
    ///
    /// # Errors
    ///
    /// The manager's error saying which settings clash.
    fn check(&self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Where this manager's connections go, for the pool's messages: a
    /// host and port (`db1:5432`, several comma-separated), a socket path,
    /// a file; never a password. A connect that runs out of time is
    /// reported with it (`connect to db1:5432 did not finish within 5s`),
    /// since only the manager knows where it was connecting. Called only
    /// when such a message is made. Defaults to `None` (nothing to say).
    fn target(&self) -> Option<String> {
        None
    }

    /// Opens one new connection.
    ///
    /// The pool bounds each call by `connect_timeout` (`Pool::new` by
    /// less when its `acquire_timeout` has less left) and never runs more
    /// than `max_concurrent_connects` of them at once (the larger of it
    /// and `max_concurrent_reconnects` while it reopens after an outage).
    async fn connect(&self) -> Result<Self::Connection, Self::Error>;

    /// Liveness check used by [`ValidationMode::IsValid`](crate::ValidationMode::IsValid)
    /// at checkout: a ping or `SELECT 1`.
    ///
    /// An error closes the connection and the caller is given another one.
    async fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error>;

    /// Cheap synchronous check when a connection comes back and before an
    /// idle one is handed out, in every validation mode: is it unusable (socket
    /// closed, protocol desynchronised)? A `true` closes it, and counts as
    /// a sign the server may be failing: every connection not checked since
    /// is validated at its next checkout (with
    /// [`ValidationMode::IsValid`](crate::ValidationMode::IsValid)), even
    /// inside the validation bypass window. It runs on the checkout's fast
    /// path: no I/O, no lock, a flag read.
    ///
    /// # Panics
    ///
    /// Should not panic. If it does (or [`needs_reset`](Self::needs_reset)
    /// does), the pool closes the connection and frees its slot, then lets
    /// the panic continue into the code that dropped the connection, unless
    /// that code is already unwinding, where it is only logged.
    fn has_broken(&self, _conn: &mut Self::Connection) -> bool {
        false
    }

    /// Cheap synchronous check when a connection comes back: is it dirty (an
    /// open transaction, a queued rollback, changed session state)? A `true`
    /// runs [`reset`](Self::reset) before anyone else can get it.
    fn needs_reset(&self, _conn: &mut Self::Connection) -> bool {
        false
    }

    /// What a [`connect`](Self::connect) error means for the pool's next
    /// step; see [`ErrorClass`] for what each answer does. Defaults to
    /// [`ErrorClass::Transient`] (every connect error is a failure that
    /// trying again may cure).
    fn classify_error(&self, _error: &Self::Error) -> ErrorClass {
        ErrorClass::Transient
    }

    /// Brings a dirty connection back to a clean state (rollback, defaults).
    ///
    /// An error closes the connection.
    async fn reset(&self, _conn: &mut Self::Connection) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Closes a connection the pool is done with (broken, expired, idle
    /// too long, evicted, or the pool closing), telling the server where
    /// the protocol has a way to: PostgreSQL's `Terminate`, say.
    ///
    /// Called only when [`awaits_close`](Self::awaits_close) says so; the
    /// pool then keeps the connection's slot taken until this returns (or
    /// `validation_timeout` passes), so that the server never sees more of
    /// the pool's sessions than `max_size`, and a replacement is opened only
    /// once the old session is gone. The default drops the connection.
    ///
    /// # Cancel safety
    ///
    /// The pool drops this future at `validation_timeout` (or when its
    /// runtime shuts down); the connection must then still be closed, as
    /// dropping it does.
    async fn close(&self, conn: Self::Connection) {
        drop(conn);
    }

    /// Whether the pool should await [`close`](Self::close) in a task of its
    /// own before freeing the slot (`true`), or simply drop the connection
    /// and free the slot at once (`false`, the default: no task, no wait).
    /// Managers that implement `close` return `true`.
    fn awaits_close(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod sqlstate_tests {
    use super::ErrorClass;

    #[test]
    fn refused_logins_and_unknown_databases_are_permanent() {
        for code in ["28000", "28P01", "3D000", "42501", "42000"] {
            assert!(ErrorClass::is_permanent_sqlstate(code), "{code}");
        }
        for code in ["57P03", "53300", "08006", "57P01", "40001"] {
            assert!(!ErrorClass::is_permanent_sqlstate(code), "{code}");
        }
    }
}
