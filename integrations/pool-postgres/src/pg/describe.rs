//! Behind a transaction-mode pooler: the parameter types of a query given
//! as text, described once per query text and connection. Through the
//! statement relay the prepare reaches the server as the unnamed statement
//! and needs nothing more; without it (TLS to the pooler), inside a
//! transaction of its own, so the pooler keeps one server connection for
//! the prepare and its close.

use std::sync::Arc;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Error;

use super::client::PgClient;

impl PgClient {
    /// The parameters paired with their types, describing the query on a
    /// cache miss.
    pub(super) async fn typed<'p>(
        &self,
        sql: &str,
        params: &[&'p (dyn ToSql + Sync)],
    ) -> Result<Vec<(&'p (dyn ToSql + Sync), Type)>, Error> {
        if params.is_empty() {
            return Ok(Vec::new());
        }
        let types = match self.statements().described(sql) {
            Some(types) => types,
            None => {
                let types = self.describe(sql).await?;
                drop(self.statements().describe_into(sql, Arc::clone(&types)));
                types
            }
        };
        // A count that does not match is sent as it is: the server refuses
        // the bind with its own message.
        Ok(params
            .iter()
            .copied()
            .zip(
                types
                    .iter()
                    .cloned()
                    .chain(std::iter::repeat(Type::UNKNOWN)),
            )
            .collect())
    }

    /// The parameter types of `sql`.
    ///
    /// Through the relay, from the driver's prepare, which the relay sends
    /// as the unnamed statement: its `Parse`, `Describe` and `Sync` reach one
    /// server connection, and its close can reach any. No transaction is
    /// opened, so a query the driver pipelines meanwhile (another task's on
    /// this connection) runs on its own, not inside the lookup's.
    ///
    /// Without the relay, from a named statement that lives only inside a
    /// transaction: the pooler keeps one server connection for the
    /// transaction, so the prepare and its close reach the same one.
    pub(super) async fn describe(&self, sql: &str) -> Result<Arc<[Type]>, Error> {
        if self.statements().is_relayed() {
            let statement = self.client().prepare(sql).await?;
            return Ok(statement.params().into());
        }
        let _one_at_a_time = self.describing().lock().await;
        if self.tx().raw_open() {
            // Inside a transaction begun as text: prepare and close there.
            let statement = self.client().prepare(sql).await?;
            return Ok(statement.params().into());
        }
        // Marked first, so a call dropped half-way is rolled back on return.
        self.tx().set_raw(true);
        self.client().batch_execute("BEGIN").await?;
        let described = self
            .client()
            .prepare(sql)
            .await
            .map(|statement| Arc::<[Type]>::from(statement.params()));
        // The statement was dropped above: its close is queued before this.
        let end = if described.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        self.client().batch_execute(end).await?;
        self.tx().set_raw(false);
        described
    }
}
