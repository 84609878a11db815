//! PostgreSQL over sqlx: ours with a small local manager against sqlx's own
//! `PgPool`.

use std::str::FromStr;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, Postgres};
use sqlx::Connection;

use crate::contestant::Contestant;
use crate::pools::pg::{DbSpec, Select1};

impl Select1 for PgConnection {
    async fn select1(&mut self) -> Result<(), String> {
        sqlx::query("SELECT 1")
            .execute(&mut *self)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// An sqlx manager for `pool_core`, local to the benches: connect, ping.
#[derive(Debug, Clone)]
pub struct SqlxManager {
    options: PgConnectOptions,
}

impl SqlxManager {
    /// From a `postgres://` URL.
    pub fn new(url: &str) -> Result<Self, sqlx::Error> {
        Ok(Self {
            options: PgConnectOptions::from_str(url)?,
        })
    }
}

#[pool_core::async_trait]
impl pool_core::ManageConnection for SqlxManager {
    type Connection = PgConnection;
    type Error = sqlx::Error;

    async fn connect(&self) -> Result<PgConnection, sqlx::Error> {
        PgConnection::connect_with(&self.options).await
    }

    async fn is_valid(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        conn.ping().await
    }
}

/// `pool_core::Pool` over [`SqlxManager`].
#[derive(Debug, Clone)]
pub struct OursSqlx(pub pool_core::Pool<SqlxManager>);

impl OursSqlx {
    /// Connects one connection first, like every `Pool::new`.
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        let manager = SqlxManager::new(&spec.url).map_err(|e| e.to_string())?;
        let mode = if spec.validate {
            pool_core::ValidationMode::IsValid
        } else {
            pool_core::ValidationMode::None
        };
        let config = pool_core::PoolConfig::builder()
            .name("bench-sqlx")
            .max_size(spec.max_size)
            .acquire_timeout(spec.acquire_timeout)
            .validation_mode(mode)
            .build()
            .map_err(|e| e.to_string())?;
        let pool = pool_core::Pool::new(manager, config)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self(pool))
    }
}

impl Contestant for OursSqlx {
    type Conn = PgConnection;
    type Guard<'a> = pool_core::PooledConnection<SqlxManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut PgConnection {
        guard
    }

    async fn shutdown(self) {
        self.0.close().await;
    }
}

/// sqlx's `PgPool`, `test_before_acquire` as its validation switch.
#[derive(Debug, Clone)]
pub struct SqlxPool(pub PgPool);

impl SqlxPool {
    /// `connect_with` opens one connection (min 0).
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        let options = PgConnectOptions::from_str(&spec.url).map_err(|e| e.to_string())?;
        let pool = PgPoolOptions::new()
            .max_connections(spec.max_size)
            .min_connections(0)
            .acquire_timeout(spec.acquire_timeout)
            .test_before_acquire(spec.validate)
            .connect_with(options)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self(pool))
    }
}

impl Contestant for SqlxPool {
    type Conn = PgConnection;
    type Guard<'a> = PoolConnection<Postgres>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.acquire().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut PgConnection {
        guard
    }

    async fn shutdown(self) {
        self.0.close().await;
    }
}

/// `pool_core::Pool` over pool-core's own sqlx manager
/// (`SqlxManager<PgConnection>`), the pooler setting picked by
/// `OURS_PG_POOLER` as for `OursPgManager`: `session` (the direct
/// connection), `transaction` (named statements passed through) or
/// `unnamed` (the statement relay task, a local socket hop per message).
#[cfg(feature = "sqlx-manager")]
#[derive(Debug, Clone)]
pub struct OursSqlxManager(pub pool_core::Pool<pool_sqlx::SqlxManager<PgConnection>>);

#[cfg(feature = "sqlx-manager")]
impl OursSqlxManager {
    /// Connects one connection first, like every `Pool::new`.
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        use pool_postgres::pooler::{PoolerMode, PoolerStatements};
        use pool_sqlx::SqlxManager;
        let manager =
            SqlxManager::<PgConnection>::from_url(&spec.url).map_err(|e| e.to_string())?;
        let manager = match std::env::var("OURS_PG_POOLER").as_deref() {
            Err(_) | Ok("" | "session") => manager,
            Ok("transaction") => manager.pooler_mode(PoolerMode::Transaction),
            Ok("unnamed") => manager
                .pooler_mode(PoolerMode::Transaction)
                .pooler_statements(PoolerStatements::Unnamed),
            Ok(other) => {
                return Err(format!(
                    "OURS_PG_POOLER={other:?}: session, transaction or unnamed"
                ))
            }
        };
        let mode = if spec.validate {
            pool_core::ValidationMode::IsValid
        } else {
            pool_core::ValidationMode::None
        };
        let config = pool_core::PoolConfig::builder()
            .name("bench-sqlx-manager")
            .max_size(spec.max_size)
            .acquire_timeout(spec.acquire_timeout)
            .validation_mode(mode)
            .build()
            .map_err(|e| e.to_string())?;
        let pool = pool_core::Pool::new(manager, config)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self(pool))
    }
}

#[cfg(feature = "sqlx-manager")]
impl Contestant for OursSqlxManager {
    type Conn = PgConnection;
    type Guard<'a> = pool_core::PooledConnection<pool_sqlx::SqlxManager<PgConnection>>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut PgConnection {
        guard
    }

    async fn shutdown(self) {
        self.0.close().await;
    }
}
