//! One enum over the three pools, and the few driver calls the store makes,
//! written once and expanded for each sqlx driver by `on_driver!`.

use std::str::FromStr;

use pool_sqlx::{Pool, SqlxManager};

use pool_core::{PoolConfig, PoolMetrics, PooledConnection};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use sqlx::{Connection, MySqlConnection, PgConnection, SqliteConnection};

use super::sql::BackendKind;
use super::KvError;

/// A pool of connections to one of the three backends.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Sqlite(Pool<SqliteConnection>),
    Postgres(Pool<PgConnection>),
    MariaDb(Pool<MySqlConnection>),
}

impl Backend {
    /// Opens a pool for the backend the URL names; fails fast if the
    /// database cannot be reached.
    pub(crate) async fn open(url: &str, config: PoolConfig) -> Result<Self, KvError> {
        Ok(match BackendKind::from_url(url)? {
            BackendKind::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(KvError::InvalidUrl)?
                    // `sqlite:kv.db` makes the file when it is missing, and
                    // WAL lets readers run beside the one writer.
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal);
                Self::Sqlite(Pool::new(SqlxManager::new(options), config).await?)
            }
            BackendKind::Postgres => {
                let manager = SqlxManager::from_url(url).map_err(KvError::InvalidUrl)?;
                Self::Postgres(Pool::new(manager, config).await?)
            }
            BackendKind::MariaDb => {
                let manager = SqlxManager::from_url(url).map_err(KvError::InvalidUrl)?;
                Self::MariaDb(Pool::new(manager, config).await?)
            }
        })
    }

    pub(crate) fn kind(&self) -> BackendKind {
        match self {
            Self::Sqlite(_) => BackendKind::Sqlite,
            Self::Postgres(_) => BackendKind::Postgres,
            Self::MariaDb(_) => BackendKind::MariaDb,
        }
    }

    pub(crate) async fn get(&self) -> Result<Conn, KvError> {
        Ok(match self {
            Self::Sqlite(pool) => Conn::Sqlite(pool.get().await?),
            Self::Postgres(pool) => Conn::Postgres(pool.get().await?),
            Self::MariaDb(pool) => Conn::MariaDb(pool.get().await?),
        })
    }

    pub(crate) fn metrics(&self) -> PoolMetrics {
        match self {
            Self::Sqlite(pool) => pool.metrics(),
            Self::Postgres(pool) => pool.metrics(),
            Self::MariaDb(pool) => pool.metrics(),
        }
    }

    pub(crate) async fn close(&self) {
        match self {
            Self::Sqlite(pool) => pool.close().await,
            Self::Postgres(pool) => pool.close().await,
            Self::MariaDb(pool) => pool.close().await,
        }
    }
}

/// A connection checked out of a [`Backend`]; back to the pool on drop.
pub(crate) enum Conn {
    Sqlite(PooledConnection<SqlxManager<SqliteConnection>>),
    Postgres(PooledConnection<SqlxManager<PgConnection>>),
    MariaDb(PooledConnection<SqlxManager<MySqlConnection>>),
}

impl Conn {
    pub(crate) fn exec(&mut self) -> Exec<'_> {
        match self {
            Self::Sqlite(c) => Exec::Sqlite(c),
            Self::Postgres(c) => Exec::Postgres(c),
            Self::MariaDb(c) => Exec::MariaDb(c),
        }
    }

    /// Opens a transaction with `statement` (a `BEGIN` variant). Dropped
    /// without a commit, it is rolled back (the pool resets the connection
    /// before anyone else gets it).
    pub(crate) async fn begin(&mut self, statement: &'static str) -> Result<Tx<'_>, KvError> {
        Ok(match self {
            Self::Sqlite(c) => Tx::Sqlite(c.begin_with(statement).await?),
            Self::Postgres(c) => Tx::Postgres(c.begin_with(statement).await?),
            Self::MariaDb(c) => Tx::MariaDb(c.begin_with(statement).await?),
        })
    }
}

/// An open transaction on a [`Conn`].
pub(crate) enum Tx<'c> {
    Sqlite(sqlx::Transaction<'c, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'c, sqlx::Postgres>),
    MariaDb(sqlx::Transaction<'c, sqlx::MySql>),
}

impl Tx<'_> {
    pub(crate) fn exec(&mut self) -> Exec<'_> {
        match self {
            Self::Sqlite(t) => Exec::Sqlite(t),
            Self::Postgres(t) => Exec::Postgres(t),
            Self::MariaDb(t) => Exec::MariaDb(t),
        }
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(t) => t.commit().await,
            Self::Postgres(t) => t.commit().await,
            Self::MariaDb(t) => t.commit().await,
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(t) => t.rollback().await,
            Self::Postgres(t) => t.rollback().await,
            Self::MariaDb(t) => t.rollback().await,
        }
    }
}

/// A borrowed connection of any driver, in or out of a transaction: what the
/// store's statements run on.
pub(crate) enum Exec<'a> {
    Sqlite(&'a mut SqliteConnection),
    Postgres(&'a mut PgConnection),
    MariaDb(&'a mut MySqlConnection),
}

/// Runs `$body` with `$c` bound to the concrete connection (`&mut &mut C`)
/// and `$db` naming its `sqlx::Database`: the body is written once and
/// compiled for each driver.
macro_rules! on_driver {
    ($exec:expr, $c:ident, $db:ident => $body:expr) => {
        match $exec {
            Exec::Sqlite($c) => {
                type $db = sqlx::Sqlite;
                $body
            }
            Exec::Postgres($c) => {
                type $db = sqlx::Postgres;
                $body
            }
            Exec::MariaDb($c) => {
                type $db = sqlx::MySql;
                $body
            }
        }
    };
}

/// A stored row: the key and its JSON text.
pub(crate) type Row = (String, String);

// The SQL passed in is built once per store in `sql.rs` from a validated
// table name (`AssertSqlSafe` marks it so for sqlx 0.9); values are bound.
impl Exec<'_> {
    /// Runs a statement with text parameters; returns the rows it changed.
    pub(crate) async fn execute(&mut self, sql: &str, binds: &[&str]) -> Result<u64, sqlx::Error> {
        on_driver!(self, c, Db => {
            let mut query = sqlx::query::<Db>(sqlx::AssertSqlSafe(sql));
            for value in binds {
                query = query.bind(*value);
            }
            Ok(query.execute(&mut **c).await?.rows_affected())
        })
    }

    /// The first column of the first row, if any.
    pub(crate) async fn fetch_text(
        &mut self,
        sql: &str,
        binds: &[&str],
    ) -> Result<Option<String>, sqlx::Error> {
        on_driver!(self, c, Db => {
            let mut query = sqlx::query_scalar::<Db, String>(sqlx::AssertSqlSafe(sql));
            for value in binds {
                query = query.bind(*value);
            }
            query.fetch_optional(&mut **c).await
        })
    }

    /// The first column of every row.
    pub(crate) async fn fetch_texts(&mut self, sql: &str) -> Result<Vec<String>, sqlx::Error> {
        on_driver!(self, c, Db => sqlx::query_scalar::<Db, String>(sqlx::AssertSqlSafe(sql)).fetch_all(&mut **c).await)
    }

    /// Every (key, value) row.
    pub(crate) async fn fetch_rows(
        &mut self,
        sql: &str,
        binds: &[&str],
    ) -> Result<Vec<Row>, sqlx::Error> {
        on_driver!(self, c, Db => {
            let mut query = sqlx::query_as::<Db, Row>(sqlx::AssertSqlSafe(sql));
            for value in binds {
                query = query.bind(*value);
            }
            query.fetch_all(&mut **c).await
        })
    }

    /// A `COUNT(*)`.
    pub(crate) async fn fetch_count(&mut self, sql: &str) -> Result<i64, sqlx::Error> {
        on_driver!(self, c, Db => sqlx::query_scalar::<Db, i64>(sqlx::AssertSqlSafe(sql)).fetch_one(&mut **c).await)
    }

    /// One multi-row upsert: `head VALUES (k, v), (k, v), ... tail`.
    pub(crate) async fn upsert_rows(
        &mut self,
        head: &str,
        tail: &str,
        rows: &[Row],
    ) -> Result<u64, sqlx::Error> {
        on_driver!(self, c, Db => {
            let mut query = sqlx::QueryBuilder::<Db>::new(head);
            query.push_values(rows, |mut row, (key, value)| {
                row.push_bind(key.as_str()).push_bind(value.as_str());
            });
            query.push(tail);
            Ok(query.build().execute(&mut **c).await?.rows_affected())
        })
    }

    /// The rows whose keys are listed: `head k, k, ... )`.
    pub(crate) async fn fetch_rows_in(
        &mut self,
        head: &str,
        keys: &[Row],
    ) -> Result<Vec<Row>, sqlx::Error> {
        on_driver!(self, c, Db => {
            let mut query = sqlx::QueryBuilder::<Db>::new(head);
            let mut list = query.separated(", ");
            for (key, _) in keys {
                list.push_bind(key.as_str());
            }
            query.push(")");
            query.build_query_as::<Row>().fetch_all(&mut **c).await
        })
    }
}
