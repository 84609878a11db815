//! Ambient transactions ([`crate::ambient`]) on sqlx connections: `BEGIN`
//! with the scope's settings, `COMMIT` and `ROLLBACK` through sqlx's own
//! transaction manager, so sqlx's transaction depth (what the pool's reset
//! reads) counts the transaction; savepoints as plain SQL, each named by
//! its own id.
//!
//! Savepoints do not go through sqlx's manager: its savepoint `begin`,
//! dropped with the `SAVEPOINT` in flight, queues a rollback of the level
//! below, which at the first level is a `ROLLBACK` of the whole
//! transaction, so the statements after it would run, and commit, on their
//! own. A plain statement dropped in flight is only a reply sqlx reads
//! later; the scope that was cut marks the transaction rollback-only.

use super::backend::BoxFuture;
use super::backend::SqlxConnection;
use super::driver::{Database, Error};
use super::driver_core::transaction::TransactionManager;
use super::reset::Tm;
use super::{static_sql, SqlxManager};
use pool_ambient::driver::{Backend, Committed, Exclusive, Step};
use pool_ambient::{Isolation, TxError, TxOptions};

impl<C: SqlxConnection + Sync> Backend for SqlxManager<C> {
    // sqlx's queries take `&mut` of the connection.
    const SHARED_QUERIES: bool = false;

    fn begin(conn: &mut C, options: TxOptions) -> BoxFuture<'_, Result<(), TxError<Error>>> {
        Box::pin(async move {
            let statement = match <C::Database as Database>::NAME {
                "PostgreSQL" => (options != TxOptions::default()).then(|| options.postgres_begin()),
                "MySQL" => {
                    if let Some(level) = options.isolation {
                        C::execute_raw(conn, level.mysql_set())
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

    fn commit(conn: &mut C) -> BoxFuture<'_, Result<Committed, Error>> {
        Box::pin(async move {
            if <C::Database as Database>::NAME == "PostgreSQL" {
                // PostgreSQL answers the `COMMIT` of an aborted transaction
                // with a rollback, and sqlx keeps the server's transaction
                // status to itself: a statement the server refuses there
                // (`25P02`) tells. One more round trip per commit.
                match C::execute_raw(conn, "SELECT 1").await {
                    Ok(()) => {}
                    Err(Error::Database(e))
                        if e.code().as_deref() == Some(IN_FAILED_TRANSACTION) =>
                    {
                        roll_back_every_level(conn).await?;
                        return Ok(Committed::RolledBack);
                    }
                    Err(e) => return Err(e),
                }
            }
            Tm::<C>::commit(conn).await.map(|()| Committed::Yes)
        })
    }

    fn step(conn: &mut C, step: Step) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            match step {
                Step::Rollback => roll_back_every_level(conn).await,
                Step::Savepoint(id) => {
                    C::execute_built(conn, &format!("SAVEPOINT pool_ambient_{id}")).await
                }
                Step::Release(id) => {
                    C::execute_built(conn, &format!("RELEASE SAVEPOINT pool_ambient_{id}")).await
                }
                Step::RollbackTo(id) => {
                    C::execute_built(conn, &format!("ROLLBACK TO SAVEPOINT pool_ambient_{id}"))
                        .await?;
                    C::execute_built(conn, &format!("RELEASE SAVEPOINT pool_ambient_{id}")).await
                }
            }
        })
    }

    fn discard_abandoned(&self, beginning: bool) -> bool {
        // An open transaction is counted by sqlx, so the reset rolls it
        // back; a `BEGIN` in flight may not be (as for `Pool::begin`).
        beginning && C::CLOSE_ON_CANCELLED_BEGIN
    }
}

/// PostgreSQL's SQLSTATE for a statement sent inside an aborted transaction.
const IN_FAILED_TRANSACTION: &str = "25P02";

/// Rolls back every level sqlx counts (one normally; more when code below
/// left a `sqlx::Transaction` of its own open, e.g. with `mem::forget`),
/// so the transaction itself ends, not only the innermost of them.
async fn roll_back_every_level<C: SqlxConnection>(conn: &mut C) -> Result<(), Error> {
    let depth = Tm::<C>::get_transaction_depth(conn);
    for _ in 0..depth {
        Tm::<C>::rollback(conn).await?;
    }
    Ok(())
}

/// `&mut *conn` is a sqlx executor (and an `Acquire` through `&mut C`):
/// sqlx's connections are locked exclusively.
impl<C: SqlxConnection + Sync> Exclusive for SqlxManager<C> {}
