//! The rest of sqlx's pool vocabulary on `Pool<SqlxManager<C>>`:
//! `acquire()` with sqlx's error, `size()`, `num_idle()`, and
//! `sqlx::Acquire` on a checked-out connection and on a [`Transaction`].

use super::backend::SqlxConnection;
use super::driver::{Acquire, Database, Error};
use super::transaction::{into_sqlx_error, Transaction};
use super::SqlxManager;
use crate::{Pool, PooledConnection};

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

impl<C: SqlxConnection> Pool<SqlxManager<C>> {
    /// Checks out a connection, as sqlx's `Pool::acquire` does: this is
    /// [`get`](crate::Pool::get) with the error turned into `sqlx::Error`
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
    /// As [`get`](crate::Pool::get): dropping the future loses no
    /// connection.
    ///
    /// `#[track_caller]`: the checkout is recorded at the caller's line
    /// (`Pool::holders`, leak reports), not this one.
    #[track_caller]
    pub fn acquire(
        &self,
    ) -> impl std::future::Future<Output = Result<PooledConnection<SqlxManager<C>>, Error>> + Send + '_
    {
        let checkout = self.get();
        async move { checkout.await.map_err(into_sqlx_error) }
    }

    /// The connections open now, idle or not, as sqlx's `Pool::size`:
    /// idle, in use, being opened and being closed
    /// ([`PoolState::total`](crate::PoolState)).
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
impl<'c, C> Acquire<'c> for &'c mut PooledConnection<SqlxManager<C>>
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
