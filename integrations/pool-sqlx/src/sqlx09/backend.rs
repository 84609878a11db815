//! What differs between the sqlx drivers, as a sealed trait each driver's
//! file implements (`postgres.rs`, `mysql.rs`, `sqlite.rs`).

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::driver::{Connection, Error};
use pool_postgres::fleet::OpenControl;
use pool_postgres::pooler::TransactionPoolerError;

/// A boxed future, sent across threads.
pub(super) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Any error, boxed: what a password provider fails with.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The stored provider: called once per connect.
pub(super) type Provider =
    Arc<dyn Fn() -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync>;

/// A sqlx connection type that [`SqlxManager`](super::SqlxManager) can pool.
///
/// Implemented for `PgConnection`, `MySqlConnection` and `SqliteConnection`,
/// each behind its cargo feature. The trait is sealed: how each driver's
/// transaction state is read and cleared depends on its internals.
pub trait SqlxConnection: Connection + fmt::Debug + private::Sealed + 'static {}

/// A sqlx connection type that logs in with a password (PostgreSQL and
/// MySQL), so [`SqlxManager::with_password_provider`](super::SqlxManager::with_password_provider)
/// applies to it. Sealed.
pub trait SqlxPasswordConnection: SqlxConnection + private::SealedPassword {}

pub(crate) mod private {
    use super::*;

    /// The per-driver parts of the manager; not nameable outside the crate,
    /// which seals [`SqlxConnection`].
    pub trait Sealed: Connection {
        /// Whether sqlx's flush may be polled once and dropped to see a
        /// reply in flight: only where sqlx keeps a partial message buffered
        /// across a cancelled read.
        const POLL_IN_FLIGHT: bool;

        /// Whether a connection whose `Pool::begin` was cancelled half-way
        /// must be closed rather than returned: where a `BEGIN` that reached
        /// the server can leave a transaction no cheap check sees.
        const CLOSE_ON_CANCELLED_BEGIN: bool;

        /// Adds where the options point to a `Debug` struct, without the
        /// password or anything else secret.
        fn describe(options: &Self::Options, out: &mut fmt::DebugStruct<'_, '_>);

        /// Where `options` connect, for the pool's messages
        /// (`ManageConnection::target`): `host:port` or a socket path;
        /// `None` where there is nothing to name.
        fn target(_options: &Self::Options) -> Option<String> {
            None
        }

        /// The options one connect uses, from the manager's options and
        /// whether statements go to the server `unnamed` (through the
        /// statement relay); `None`: the options as they are.
        fn for_pooler(options: &Self::Options, unnamed: bool) -> Option<Self::Options>;

        /// Settings of `options` that cannot work with `unnamed` statements;
        /// checked when the pool is built and before every connect.
        fn check_pooler(
            _options: &Self::Options,
            _unnamed: bool,
        ) -> Result<(), TransactionPoolerError> {
            Ok(())
        }

        /// Opens a connection with `options` (already adjusted by
        /// [`for_pooler`](Self::for_pooler)), through the statement relay
        /// when `unnamed`.
        fn connect_pooled(
            options: &Self::Options,
            _unnamed: bool,
        ) -> BoxFuture<'_, Result<Self, Error>>
        where
            Self: Sized + 'static,
        {
            Box::pin(Self::connect_with(options))
        }

        /// `options` with `password` in place of the one they had (for
        /// SQLite, which has none, `options` as they are).
        fn with_password(options: Self::Options, password: &str) -> Self::Options;

        /// Leaves no transaction open: rolls back what sqlx tracks, then
        /// what the server says is still open.
        fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>>;

        /// Runs one statement as plain SQL text, outside sqlx's statement
        /// cache.
        fn execute_raw<'a>(
            conn: &'a mut Self,
            sql: &'static str,
        ) -> BoxFuture<'a, Result<(), Error>>;

        /// Runs SQL text built at run time (from integers only) as plain
        /// SQL, outside sqlx's statement cache.
        fn execute_built<'a>(conn: &'a mut Self, sql: &'a str) -> BoxFuture<'a, Result<(), Error>>;

        /// Takes one fleet budget ticket on a fresh connection with `sql`
        /// (a claim query, parameters written in), in one round trip:
        /// `Ok(true)` when taken, `Ok(false)` when every ticket is held. Only PostgreSQL's manager can be given a budget; for the
        /// other drivers this refuses.
        fn claim_ticket<'a>(
            _conn: &'a mut Self,
            _sql: &'a str,
        ) -> BoxFuture<'a, Result<bool, Error>> {
            Box::pin(async { Err(Error::Configuration("fleet budgets need PostgreSQL".into())) })
        }

        /// Opens fleet fair share control sessions with `options` (already
        /// adjusted for the pooler mode) and the password from `password`
        /// if set. Only PostgreSQL's manager can be given a budget; for the
        /// other drivers every open fails.
        fn control_opener(_options: Self::Options, _password: Option<Provider>) -> OpenControl {
            Box::new(|| Box::pin(async { Err("fleet budgets need PostgreSQL".into()) }))
        }
    }

    /// Marks the drivers that log in with a password; seals
    /// [`SqlxPasswordConnection`].
    pub trait SealedPassword: Sealed {}
}
