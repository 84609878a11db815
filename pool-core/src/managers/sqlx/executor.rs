//! `&Pool<SqlxManager<C>>` as a sqlx `Executor`: one checkout per query, as
//! with sqlx's own pool.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use futures_core::Stream;
use futures_util::TryStreamExt;

use super::backend::SqlxConnection;
use super::driver::error::BoxDynError;
use super::driver::{Database, Either, Error, Execute, Executor};
use super::driver_core::ext::async_stream::TryAsyncStream;
use super::driver_core::transaction::TransactionManager;
use super::reset::Tm;
use super::transaction::into_sqlx_error;
use super::SqlxManager;
use crate::{Pool, PoolerMode};

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
/// In [`PoolerMode::Transaction`] every query runs as an unnamed statement
/// (as with sqlx's `.persistent(false)`), so none is left on a server
/// connection the pooler hands to someone else, and a query with arguments
/// runs inside `BEGIN` ... `COMMIT`, so the pooler keeps one server
/// connection for its prepare and its execution (two round trips more). A
/// query that fails, or a stream dropped before its end, leaves the
/// transaction to the pool's reset, which rolls it back.
impl<'p, C> Executor<'p> for &'_ Pool<SqlxManager<C>>
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
        let mut query = Unnamed::new(query, keeps_statements(&pool));
        Box::pin(TryAsyncStream::new(move |yielder| async move {
            let mut conn = pool.get().await.map_err(into_sqlx_error)?;
            let in_transaction = query.needs_transaction();
            if in_transaction {
                Tm::<C>::begin(&mut conn, None).await?;
            }
            {
                let mut rows = (&mut *conn).fetch_many(query);
                while let Some(row) = rows.try_next().await? {
                    yielder.r#yield(row).await;
                }
            }
            if in_transaction {
                Tm::<C>::commit(&mut conn).await?;
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
        let mut query = Unnamed::new(query, keeps_statements(&pool));
        Box::pin(async move {
            let mut conn = pool.get().await.map_err(into_sqlx_error)?;
            if !query.needs_transaction() {
                return (&mut *conn).fetch_optional(query).await;
            }
            Tm::<C>::begin(&mut conn, None).await?;
            let row = (&mut *conn).fetch_optional(query).await?;
            Tm::<C>::commit(&mut conn).await?;
            Ok(row)
        })
    }

    prepare_and_describe!();
}

/// Whether queries may be kept as named statements: not behind a
/// transaction pooler.
fn keeps_statements<C: SqlxConnection>(pool: &Pool<SqlxManager<C>>) -> bool {
    pool.manager().pooler_mode != PoolerMode::Transaction
}

unnamed_query!();
