//! The pool with sqlx's vocabulary: [`Pool<C>`] wraps pool-core's pool of
//! [`SqlxManager<C>`] (it derefs to it, so `get()`, `metrics()`, `close()`
//! and the rest are there) and adds what sqlx's pool has: `&pool` as a
//! sqlx executor, `begin()`, `acquire()` with sqlx's error, `size()`,
//! `num_idle()`, and `sqlx::Acquire` on a connection from `acquire()` and
//! on a [`Transaction`].

use std::fmt;
use std::ops::{Deref, DerefMut};

use pool_api::{Hooks, PoolConfig, PoolError};

use super::backend::SqlxConnection;
use super::driver::{Acquire, Database, Error};
use super::transaction::{into_sqlx_error, Transaction};
use super::SqlxManager;
use pool_core::PooledConnection;

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A pool of sqlx connections `C` (`PgConnection`, `MySqlConnection`,
/// `SqliteConnection`): pool-core's [`Pool`](pool_core::Pool) of
/// [`SqlxManager<C>`], which it derefs to, with sqlx's pool vocabulary on
/// top. `&pool` is a sqlx executor (`query(..).fetch_one(&pool)` checks a
/// connection out for that one query).
///
/// Cloning is cheap and every clone is the same pool.
pub struct Pool<C: SqlxConnection>(pool_core::Pool<SqlxManager<C>>);

impl<C: SqlxConnection> Pool<C> {
    /// Builds the pool and opens its first connections, as
    /// [`pool_core::Pool::new`].
    ///
    /// # Errors
    ///
    /// As [`pool_core::Pool::new`].
    pub async fn new(
        manager: SqlxManager<C>,
        config: PoolConfig,
    ) -> Result<Self, PoolError<Error>> {
        pool_core::Pool::new(manager, config).await.map(Self)
    }

    /// [`new`](Self::new) with hooks, as [`pool_core::Pool::new_with_hooks`].
    ///
    /// # Errors
    ///
    /// As [`pool_core::Pool::new_with_hooks`].
    pub async fn new_with_hooks(
        manager: SqlxManager<C>,
        config: PoolConfig,
        hooks: impl Hooks<SqlxManager<C>>,
    ) -> Result<Self, PoolError<Error>> {
        pool_core::Pool::new_with_hooks(manager, config, hooks)
            .await
            .map(Self)
    }

    /// Builds the pool without opening a connection, as sqlx's
    /// `connect_lazy_with` and [`pool_core::Pool::new_lazy`].
    pub fn new_lazy(manager: SqlxManager<C>, config: PoolConfig) -> Self {
        Self(pool_core::Pool::new_lazy(manager, config))
    }

    /// [`new_lazy`](Self::new_lazy) with hooks.
    pub fn new_lazy_with_hooks(
        manager: SqlxManager<C>,
        config: PoolConfig,
        hooks: impl Hooks<SqlxManager<C>>,
    ) -> Self {
        Self(pool_core::Pool::new_lazy_with_hooks(manager, config, hooks))
    }

    /// pool-core's pool inside, for code written against it.
    pub fn into_inner(self) -> pool_core::Pool<SqlxManager<C>> {
        self.0
    }
}

impl<C: SqlxConnection> From<pool_core::Pool<SqlxManager<C>>> for Pool<C> {
    fn from(pool: pool_core::Pool<SqlxManager<C>>) -> Self {
        Self(pool)
    }
}

impl<C: SqlxConnection> Deref for Pool<C> {
    type Target = pool_core::Pool<SqlxManager<C>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<C: SqlxConnection> Clone for Pool<C> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<C: SqlxConnection> fmt::Debug for Pool<C>
where
    SqlxManager<C>: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A connection from [`Pool::acquire`], as sqlx's `PoolConnection`: it
/// derefs to `C` (`&mut *conn` is a sqlx executor), `&mut conn` is a
/// `sqlx::Acquire`, and it goes back to the pool when dropped.
#[must_use = "dropping the connection gives it back to the pool at once"]
pub struct PoolConnection<C: SqlxConnection>(PooledConnection<SqlxManager<C>>);

impl<C: SqlxConnection> PoolConnection<C> {
    /// pool-core's guard inside (for `PooledConnection::detach` and
    /// `discard`).
    pub fn into_inner(this: Self) -> PooledConnection<SqlxManager<C>> {
        this.0
    }
}

impl<C: SqlxConnection> Deref for PoolConnection<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0
    }
}

impl<C: SqlxConnection> DerefMut for PoolConnection<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.0
    }
}

impl<C: SqlxConnection> fmt::Debug for PoolConnection<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl<C: SqlxConnection> Pool<C> {
    /// Checks out a connection, as sqlx's `Pool::acquire` does: this is
    /// [`get`](pool_core::Pool::get) with the error turned into `sqlx::Error`
    /// (by [`into_sqlx_error`]), so `pool.acquire().await?` works in a
    /// function that returns `sqlx::Error`.
    ///
    /// The guard derefs to `C`: `&mut *conn` is a sqlx executor, and
    /// `&mut conn` is a `sqlx::Acquire` (for `Migrator::run` and functions
    /// generic over `Acquire`).
    ///
    /// # Errors
    ///
    /// `sqlx::Error::PoolTimedOut` after `acquire_timeout` (the timeout's
    /// details are logged at `debug` level; call `get()` to have them in
    /// the error), `sqlx::Error::PoolClosed` once the pool is closed, and
    /// the connect error itself when the pool fails fast.
    ///
    /// # Cancel safety
    ///
    /// As [`get`](pool_core::Pool::get): dropping the future loses no
    /// connection.
    ///
    /// `#[track_caller]`: the checkout is recorded at the caller's line
    /// (`Pool::holders`, leak reports), not this one.
    #[track_caller]
    pub fn acquire(
        &self,
    ) -> impl std::future::Future<Output = Result<PoolConnection<C>, Error>> + Send + '_ {
        let checkout = self.get_for(
            self.config().acquire_timeout(),
            std::panic::Location::caller(),
        );
        async move { checkout.await.map(PoolConnection).map_err(into_sqlx_error) }
    }

    /// The connections open now, idle or not, as sqlx's `Pool::size`:
    /// idle, in use, being opened and being closed
    /// ([`PoolState::total`](pool_api::PoolState)).
    pub fn size(&self) -> u32 {
        self.state().total
    }

    /// The idle connections now, as sqlx's `Pool::num_idle`.
    pub fn num_idle(&self) -> usize {
        // Widening: a pool's counts are `u32`.
        self.state().idle as usize
    }
}

/// `&mut conn` for a checked-out connection is a `sqlx::Acquire`, as
/// `&mut PoolConnection` is in sqlx: `acquire()` lends the connection
/// (no second checkout), `begin()` begins a sqlx transaction on it
/// (`sqlx::Transaction<'_, DB>`, borrowing the connection; dropped without
/// `commit()`, it is rolled back).
impl<'c, C> Acquire<'c> for &'c mut PoolConnection<C>
where
    C: SqlxConnection,
    C::Database: Database<Connection = C>,
{
    type Database = C::Database;
    type Connection = &'c mut C;

    fn acquire(self) -> BoxFuture<'c, Result<&'c mut C, Error>> {
        Box::pin(std::future::ready(Ok(&mut **self)))
    }

    fn begin(self) -> BoxFuture<'c, Result<super::driver::Transaction<'c, C::Database>, Error>> {
        let conn: &'c mut C = self;
        Box::pin(conn.begin())
    }
}

/// `&mut tx` for a [`Transaction`] is a `sqlx::Acquire`, as
/// `&mut sqlx::Transaction` is: `acquire()` lends the transaction's
/// connection, `begin()` opens a savepoint inside the transaction (a sqlx
/// `Transaction<'_, DB>` borrowing it, committed as `RELEASE SAVEPOINT`).
impl<'c, C> Acquire<'c> for &'c mut Transaction<C>
where
    C: SqlxConnection,
    C::Database: Database<Connection = C>,
{
    type Database = C::Database;
    type Connection = &'c mut C;

    fn acquire(self) -> BoxFuture<'c, Result<&'c mut C, Error>> {
        Box::pin(std::future::ready(Ok(&mut **self)))
    }

    fn begin(self) -> BoxFuture<'c, Result<super::driver::Transaction<'c, C::Database>, Error>> {
        let conn: &'c mut C = self;
        Box::pin(conn.begin())
    }
}
