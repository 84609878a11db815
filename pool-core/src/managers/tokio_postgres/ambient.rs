//! Ambient transactions ([`crate::ambient`]) on tokio-postgres clients:
//! `BEGIN`, `COMMIT` and savepoints sent as text on the pooled client,
//! which is marked as holding a transaction from before its `BEGIN` leaves
//! until its `COMMIT` or `ROLLBACK` is answered, so the pool's reset rolls
//! back whatever a dropped scope left open.
//!
//! Queries from several tasks on the one transaction share the client:
//! tokio-postgres pipelines them on its connection, in the order sent.

use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;

use super::{PgClient, PgError, PostgresManager};
use crate::ambient::sealed::{Backend, BoxFuture, Step};
use crate::ambient::{TxError, TxOptions};

/// The name of the savepoint of `depth`.
fn savepoint_sql(verb: &str, depth: u32) -> String {
    format!("{verb} pool_ambient_{depth}")
}

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

    fn step(conn: &mut PgClient, step: Step) -> BoxFuture<'_, Result<(), PgError>> {
        Box::pin(async move {
            match step {
                Step::Commit | Step::Rollback => {
                    let sql = if step == Step::Commit {
                        "COMMIT"
                    } else {
                        "ROLLBACK"
                    };
                    conn.client().batch_execute(sql).await?;
                    conn.set_transaction_open(false);
                }
                Step::Savepoint(depth) => {
                    let sql = savepoint_sql("SAVEPOINT", depth);
                    conn.client().batch_execute(&sql).await?;
                }
                Step::Release(depth) => {
                    let sql = savepoint_sql("RELEASE SAVEPOINT", depth);
                    conn.client().batch_execute(&sql).await?;
                }
                Step::RollbackTo(depth) => {
                    let sql = format!(
                        "{}; {}",
                        savepoint_sql("ROLLBACK TO SAVEPOINT", depth),
                        savepoint_sql("RELEASE SAVEPOINT", depth)
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
