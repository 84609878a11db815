//! Ambient transactions ([`pool_ambient`]) on tokio-postgres clients:
//! `BEGIN`, `COMMIT` and savepoints sent as text on the pooled client,
//! which is marked as holding a transaction from before its `BEGIN` leaves
//! until its `COMMIT` or `ROLLBACK` is answered, so the pool's reset rolls
//! back whatever a dropped scope left open.
//!
//! Queries from several tasks on the one transaction share the client:
//! tokio-postgres pipelines them on its connection, in the order sent.

use tokio_postgres::error::SqlState;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;

use super::{PgClient, PgError, PostgresManager};
use pool_ambient::driver::{Backend, BoxFuture, Committed, Step};
use pool_ambient::{TxError, TxOptions};

/// A statement on the savepoint with `id` (unique in its transaction).
fn savepoint_sql(verb: &str, id: u64) -> String {
    format!("{verb} pool_ambient_{id}")
}

/// `COMMIT`, behind a statement that PostgreSQL refuses (`25P02`) in an
/// aborted transaction, whose `COMMIT` would otherwise be a silent
/// rollback (the command tag says `ROLLBACK`, which tokio-postgres does not
/// show). One simple query: the `COMMIT` runs only if the first statement
/// did, in the same round trip.
const COMMIT_SQL: &str = "SELECT 1; COMMIT";

impl<Tls> Backend for PostgresManager<Tls>
where
    Tls: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    Tls::Stream: Send,
    Tls::TlsConnect: Send,
    <Tls::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    // `Client`'s queries take `&self` and are pipelined.
    const SHARED_QUERIES: bool = true;

    fn begin(
        conn: &mut PgClient,
        options: TxOptions,
    ) -> BoxFuture<'_, Result<(), TxError<PgError>>> {
        Box::pin(async move {
            conn.set_transaction_open(true);
            conn.client()
                .batch_execute(options.postgres_begin())
                .await
                .map_err(|e| TxError::Begin(e.into()))
        })
    }

    fn commit(conn: &mut PgClient) -> BoxFuture<'_, Result<Committed, PgError>> {
        Box::pin(async move {
            match conn.client().batch_execute(COMMIT_SQL).await {
                Ok(()) => {
                    conn.set_transaction_open(false);
                    Ok(Committed::Yes)
                }
                Err(e) if e.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION) => {
                    // Aborted: end it now (the server would roll it back at
                    // `COMMIT` just the same).
                    conn.client().batch_execute("ROLLBACK").await?;
                    conn.set_transaction_open(false);
                    Ok(Committed::RolledBack)
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    fn step(conn: &mut PgClient, step: Step) -> BoxFuture<'_, Result<(), PgError>> {
        Box::pin(async move {
            match step {
                Step::Rollback => {
                    conn.client().batch_execute("ROLLBACK").await?;
                    conn.set_transaction_open(false);
                }
                Step::Savepoint(id) => {
                    let sql = savepoint_sql("SAVEPOINT", id);
                    conn.client().batch_execute(&sql).await?;
                }
                Step::Release(id) => {
                    let sql = savepoint_sql("RELEASE SAVEPOINT", id);
                    conn.client().batch_execute(&sql).await?;
                }
                Step::RollbackTo(id) => {
                    let sql = format!(
                        "{}; {}",
                        savepoint_sql("ROLLBACK TO SAVEPOINT", id),
                        savepoint_sql("RELEASE SAVEPOINT", id)
                    );
                    conn.client().batch_execute(&sql).await?;
                }
            }
            Ok(())
        })
    }

    fn discard_abandoned(&self, _beginning: bool) -> bool {
        // The mark makes every other mode roll back on return.
        self.leaves_transactions_open()
    }
}
