//! `&Pool<SqlxManager<C>>` as a sqlx `Executor`: one checkout per query, as
//! with sqlx's own pool.

use std::future::Future;
use std::pin::Pin;

use futures_core::Stream;
use futures_util::TryStreamExt;

use super::backend::SqlxConnection;
use super::driver::{Database, Either, Error, Execute, Executor};
use super::driver_core::ext::async_stream::TryAsyncStream;
use super::transaction::into_sqlx_error;
use super::Pool;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
type BoxStream<'a, T> = Pin<Box<dyn Stream<Item = T> + Send + 'a>>;
type Db<C> = <C as super::driver::Connection>::Database;

/// Each query checks a connection out for as long as it runs, and gives it
/// back when its future or stream is done or dropped. A failed checkout is
/// `sqlx::Error::PoolTimedOut` or `PoolClosed` (see
/// [`into_sqlx_error`]).
///
/// Statements prepared through it (`prepare`) belong to the connection that
/// happened to run them, as with sqlx's pool.
///
/// In [`PoolerMode::Transaction`](pool_postgres::pooler::PoolerMode::Transaction) a query
/// runs as it would on the connection: the connection's relay keeps every
/// statement unnamed on the server (see
/// `SqlxManager::<PgConnection>::pooler_mode`).
impl<'p, C> Executor<'p> for &'_ Pool<C>
where
    C: SqlxConnection,
    for<'c> &'c mut C: Executor<'c, Database = Db<C>>,
{
    type Database = Db<C>;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<
        'e,
        Result<Either<<Db<C> as Database>::QueryResult, <Db<C> as Database>::Row>, Error>,
    >
    where
        'p: 'e,
        E: 'q + Execute<'q, Db<C>>,
    {
        let pool = self.clone();
        Box::pin(TryAsyncStream::new(move |yielder| async move {
            let mut conn = pool.get().await.map_err(into_sqlx_error)?;
            let mut rows = (&mut *conn).fetch_many(query);
            while let Some(row) = rows.try_next().await? {
                yielder.r#yield(row).await;
            }
            Ok(())
        }))
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<<Db<C> as Database>::Row>, Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Db<C>>,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.get().await.map_err(into_sqlx_error)?;
            (&mut *conn).fetch_optional(query).await
        })
    }

    prepare_and_describe!();
}
