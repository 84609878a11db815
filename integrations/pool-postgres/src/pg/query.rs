//! The pooled client's query forwarders: the driver's query methods, run
//! as unnamed statements behind a transaction-mode pooler and watched for
//! errors that retire the server.

use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, SimpleQueryMessage, Statement};

use super::client::PgClient;
use super::error::PgError;
use super::statement::{refuse, PgStatement};
use crate::pooler::SessionStatement;
use crate::session::{session_state, TxChange};
use crate::PoolerMode;

impl PgClient {
    /// Runs a query and returns its rows, like [`Client::query`](tokio_postgres::Client::query).
    ///
    /// This is `Client::query`, except with unnamed statements behind a
    /// transaction-mode pooler ([`PoolerMode::Transaction`] with
    /// [`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed), see
    /// [`PostgresManager::pooler_statements`](super::PostgresManager::pooler_statements)):
    /// then a query given as text runs as a typed unnamed statement in one
    /// round trip, and a [`Statement`] you prepared yourself is run as it is.
    ///
    /// Behind a transaction-mode pooler ([`PoolerMode::Transaction`], with
    /// statements passed through or not), text that sets session state is
    /// refused before anything is sent (see
    /// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode)).
    ///
    /// # Errors
    ///
    /// [`PgError::SessionStateBehindPooler`]: behind a pooler, the text
    /// sets session state. Else the driver's error ([`PgError::Db`]).
    ///
    /// # Cancel safety
    ///
    /// As `Client::query`; behind a pooler, a call dropped during the
    /// describe of a new query text leaves a transaction open, which the
    /// [`Rollback`](super::ResetMode::Rollback) reset ends on return.
    pub async fn query<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, PgError>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement)? {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                Ok(self.observe(self.client().query_typed(sql, &typed).await)?)
            }
            None => Ok(self.observe(self.client().query(statement, params).await)?),
        }
    }

    /// Runs a query that returns exactly one row, like
    /// [`Client::query_one`](tokio_postgres::Client::query_one); behind a pooler, as [`query`](Self::query).
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query); the driver's error also when the query
    /// returns no row or more than one.
    ///
    /// # Cancel safety
    ///
    /// As [`query`](Self::query).
    pub async fn query_one<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, PgError>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement)? {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                Ok(self.observe(self.client().query_typed_one(sql, &typed).await)?)
            }
            None => Ok(self.observe(self.client().query_one(statement, params).await)?),
        }
    }

    /// Runs a query that returns at most one row, like
    /// [`Client::query_opt`](tokio_postgres::Client::query_opt); behind a pooler, as [`query`](Self::query).
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query); the driver's error also when the query
    /// returns more than one row.
    ///
    /// # Cancel safety
    ///
    /// As [`query`](Self::query).
    pub async fn query_opt<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, PgError>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement)? {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                Ok(self.observe(self.client().query_typed_opt(sql, &typed).await)?)
            }
            None => Ok(self.observe(self.client().query_opt(statement, params).await)?),
        }
    }

    /// Runs a statement and returns the number of rows it changed, like
    /// [`Client::execute`](tokio_postgres::Client::execute); behind a pooler, as [`query`](Self::query).
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As [`query`](Self::query).
    pub async fn execute<T>(
        &self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, PgError>
    where
        T: ?Sized + PgStatement,
    {
        match self.pooled_text(statement)? {
            Some(sql) => {
                let typed = self.observe(self.typed(sql, params).await)?;
                Ok(self.observe(self.client().execute_typed(sql, &typed).await)?)
            }
            None => Ok(self.observe(self.client().execute(statement, params).await)?),
        }
    }

    /// Runs statements separated by `;` with the simple protocol, like
    /// [`Client::batch_execute`](tokio_postgres::Client::batch_execute). Behind a pooler, text that sets
    /// session state is refused before anything is sent (see
    /// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode)).
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As `Client::batch_execute`.
    pub async fn batch_execute(&self, query: &str) -> Result<(), PgError> {
        self.inspect(query)?;
        Ok(self.observe(self.client().batch_execute(query).await)?)
    }

    /// Runs statements with the simple protocol and returns their text
    /// rows, like [`Client::simple_query`](tokio_postgres::Client::simple_query); behind a pooler, looked at as
    /// [`batch_execute`](Self::batch_execute).
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As `Client::simple_query`.
    pub async fn simple_query(&self, query: &str) -> Result<Vec<SimpleQueryMessage>, PgError> {
        self.inspect(query)?;
        Ok(self.observe(self.client().simple_query(query).await)?)
    }

    /// Prepares a statement, like
    /// [`Client::prepare`](tokio_postgres::Client::prepare); behind a
    /// pooler, its text is looked at as [`batch_execute`](Self::batch_execute)'s.
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As `Client::prepare`.
    pub async fn prepare(&self, query: &str) -> Result<Statement, PgError> {
        if self.pooler_mode() == PoolerMode::Transaction {
            refuse(query)?;
        }
        Ok(self.observe(self.client().prepare(query).await)?)
    }

    /// Behind a transaction-mode pooler, looks at what a query given as text
    /// does to the session; with unnamed statements, its text. `None`: run
    /// it as the driver does.
    ///
    /// # Errors
    ///
    /// [`PgError::SessionStateBehindPooler`]: the text sets session state.
    pub(super) fn pooled_text<'q, T: ?Sized + PgStatement>(
        &self,
        statement: &'q T,
    ) -> Result<Option<&'q str>, PgError> {
        if self.pooler_mode() != PoolerMode::Transaction {
            return Ok(None);
        }
        let Some(sql) = statement.text() else {
            return Ok(None);
        };
        self.inspect(sql)?;
        Ok(self.statements().is_unnamed().then_some(sql))
    }

    /// Behind a pooler: refuses session state (see
    /// [`SessionStatement`]), follows `BEGIN`/`COMMIT` sent as text.
    ///
    /// # Errors
    ///
    /// [`PgError::SessionStateBehindPooler`]: the text sets session state;
    /// nothing is followed then, as nothing is sent.
    pub(super) fn inspect(&self, sql: &str) -> Result<(), PgError> {
        if self.pooler_mode() != PoolerMode::Transaction {
            return Ok(());
        }
        let found = session_state(sql);
        if let Some(refused) = SessionStatement::judge(found.session_state) {
            return Err(PgError::SessionStateBehindPooler(refused));
        }
        match found.tx {
            Some(TxChange::Begin) => self.tx().set_raw(true),
            Some(TxChange::End) => self.tx().set_raw(false),
            None => {}
        }
        Ok(())
    }
}
