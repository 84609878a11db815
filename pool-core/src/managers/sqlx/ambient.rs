//! Ambient transactions ([`crate::ambient`]) on sqlx connections: `BEGIN`
//! with the scope's settings, and savepoints, through sqlx's own
//! transaction manager, so sqlx's transaction depth (what the pool's reset
//! reads) always counts them.

use std::ops::DerefMut;

use super::backend::SqlxConnection;
use super::driver::{Database, Error};
use super::driver_core::transaction::TransactionManager;
use super::reset::{BoxFuture, Tm};
use super::{static_sql, SqlxManager};
use crate::ambient::sealed::{Backend, Step};
use crate::ambient::{Isolation, TxConn, TxError, TxOptions};

/// The statement that sets the isolation level of MySQL's next
/// transaction.
fn mysql_isolation(level: Isolation) -> &'static str {
    match level {
        Isolation::ReadUncommitted => "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
        Isolation::ReadCommitted => "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        Isolation::RepeatableRead => "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        Isolation::Serializable => "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    }
}

impl<C: SqlxConnection + Sync> Backend for SqlxManager<C> {
    // sqlx's queries take `&mut` of the connection.
    const SHARED_QUERIES: bool = false;

    fn begin(conn: &mut C, options: TxOptions) -> BoxFuture<'_, Result<(), TxError<Error>>> {
        Box::pin(async move {
            let statement = match <C::Database as Database>::NAME {
                "PostgreSQL" => (options != TxOptions::default()).then(|| options.postgres_begin()),
                "MySQL" => {
                    if let Some(level) = options.isolation {
                        C::execute_raw(conn, mysql_isolation(level))
                            .await
                            .map_err(TxError::Begin)?;
                    }
                    options.read_only.then_some("START TRANSACTION READ ONLY")
                }
                _ => {
                    if options.read_only {
                        return Err(TxError::Unsupported("read-only transactions"));
                    }
                    if options
                        .isolation
                        .is_some_and(|l| l != Isolation::Serializable)
                    {
                        return Err(TxError::Unsupported(
                            "isolation levels other than serializable",
                        ));
                    }
                    None
                }
            };
            Tm::<C>::begin(conn, statement.map(static_sql))
                .await
                .map_err(TxError::Begin)
        })
    }

    fn step(conn: &mut C, step: Step) -> BoxFuture<'_, Result<(), Error>> {
        // sqlx keeps the depth: at depth 1 these are `COMMIT`, `ROLLBACK`
        // and `BEGIN`; deeper, `RELEASE SAVEPOINT`, `ROLLBACK TO SAVEPOINT`
        // and `SAVEPOINT` of its own numbered savepoints.
        Box::pin(async move {
            match step {
                Step::Commit | Step::Release(_) => Tm::<C>::commit(conn).await,
                Step::Rollback | Step::RollbackTo(_) => Tm::<C>::rollback(conn).await,
                Step::Savepoint(_) => Tm::<C>::begin(conn, None).await,
            }
        })
    }

    fn discard_abandoned(&self, beginning: bool) -> bool {
        // An open transaction is counted by sqlx, so the reset rolls it
        // back; a `BEGIN` in flight may not be (as for `Pool::begin`).
        beginning && C::CLOSE_ON_CANCELLED_BEGIN
    }
}

/// `&mut *conn` is a sqlx executor (and an `Acquire` through `&mut C`).
impl<C: SqlxConnection + Sync> DerefMut for TxConn<SqlxManager<C>> {
    fn deref_mut(&mut self) -> &mut C {
        match self.conn_mut() {
            Some(conn) => conn,
            None => unreachable!("sqlx connections are locked exclusively"),
        }
    }
}
