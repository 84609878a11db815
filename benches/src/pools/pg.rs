//! PostgreSQL over tokio-postgres: ours with a small local manager and with
//! pool-core's own `PostgresManager`, `NoTls` on loopback. The peers they
//! are compared with (deadpool-postgres, bb8-postgres) are in
//! `pools::peers` (feature `peers`).

use std::future::Future;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use crate::contestant::Contestant;

/// The query every database scenario runs, over whichever driver.
pub trait Select1: Send {
    /// Runs `SELECT 1` in one round trip.
    fn select1(&mut self) -> impl Future<Output = Result<(), String>> + Send;
}

impl Select1 for Client {
    async fn select1(&mut self) -> Result<(), String> {
        self.simple_query("SELECT 1")
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// How a database pool is set up in a run.
#[derive(Debug, Clone)]
pub struct DbSpec {
    /// `postgres://…` URL.
    pub url: String,
    /// Max connections.
    pub max_size: u32,
    /// Each pool's test-on-checkout (ours: `ValidationMode::IsValid` with its
    /// default 500 ms bypass window).
    pub validate: bool,
    /// Acquire timeout, the same for every pool.
    pub acquire_timeout: Duration,
}

/// A tokio-postgres manager for `pool_core`, local to the benches: connect,
/// drive the connection on its own task, ping with an empty simple query.
#[derive(Debug, Clone)]
pub struct TpManager {
    config: tokio_postgres::Config,
}

impl TpManager {
    /// From a `postgres://` URL.
    pub fn new(url: &str) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            config: url.parse()?,
        })
    }
}

#[pool_core::async_trait]
impl pool_core::ManageConnection for TpManager {
    type Connection = Client;
    type Error = tokio_postgres::Error;

    async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("tokio-postgres connection ended: {e}");
            }
        });
        Ok(client)
    }

    async fn is_valid(&self, conn: &mut Client) -> Result<(), tokio_postgres::Error> {
        conn.simple_query("").await.map(drop)
    }

    fn has_broken(&self, conn: &mut Client) -> bool {
        conn.is_closed()
    }
}

fn our_config(spec: &DbSpec) -> pool_core::PoolConfig {
    let mode = if spec.validate {
        pool_core::ValidationMode::IsValid
    } else {
        pool_core::ValidationMode::None
    };
    pool_core::PoolConfig::builder()
        .name("bench-pg")
        .max_size(spec.max_size)
        .acquire_timeout(spec.acquire_timeout)
        .validation_mode(mode)
        .build()
        .expect("valid config")
}

/// `pool_core::Pool` over [`TpManager`].
#[derive(Debug, Clone)]
pub struct OursTp(pub pool_core::Pool<TpManager>);

impl OursTp {
    /// Connects one connection first, like every `Pool::new`.
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        let manager = TpManager::new(&spec.url).map_err(|e| e.to_string())?;
        let pool = pool_core::Pool::new(manager, our_config(spec))
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self(pool))
    }
}

impl Contestant for OursTp {
    type Conn = Client;
    type Guard<'a> = pool_core::PooledConnection<TpManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut Client {
        guard
    }

    async fn shutdown(self) {
        self.0.close().await;
    }
}

/// `pool_core::Pool` over pool-core's own [`PostgresManager`] with its
/// defaults (reset mode `Rollback`, statement cache 256, TCP keepalive),
/// the query sent through the pooled client's `simple_query`.
///
/// [`PostgresManager`]: pool_postgres::PostgresManager
#[derive(Debug, Clone)]
pub struct OursPgManager(pub pool_core::Pool<PgManager>);

/// pool-core's tokio-postgres manager over `NoTls`.
pub type PgManager = pool_postgres::PostgresManager<NoTls>;

impl Select1 for pool_postgres::PgClient {
    async fn select1(&mut self) -> Result<(), String> {
        if prepared_query() {
            let statement = self
                .prepare_cached("SELECT 1")
                .await
                .map_err(|e| e.to_string())?;
            return self
                .query(&statement, &[])
                .await
                .map(drop)
                .map_err(|e| e.to_string());
        }
        self.simple_query("SELECT 1")
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// `OURS_PG_QUERY=prepared`: ours over [`PostgresManager`] runs `SELECT 1`
/// as a statement from the connection's cache (`prepare_cached`, then
/// `query` with it: a bind and an execute, no parse) rather than by
/// `simple_query`, to count the prepared path too; unset or `simple`, the
/// default. Read once per process.
///
/// [`PostgresManager`]: pool_postgres::PostgresManager
fn prepared_query() -> bool {
    static PREPARED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PREPARED.get_or_init(|| match std::env::var("OURS_PG_QUERY").as_deref() {
        Err(_) | Ok("" | "simple") => false,
        Ok("prepared") => true,
        Ok(other) => {
            eprintln!("OURS_PG_QUERY={other:?}: simple or prepared");
            std::process::exit(2)
        }
    })
}

impl OursPgManager {
    /// Connects one connection first, like every `Pool::new`.
    pub async fn build(spec: &DbSpec) -> Result<Self, String> {
        let config: tokio_postgres::Config = spec.url.parse().map_err(|e| format!("{e}"))?;
        let manager = with_pooler_from_env(PgManager::new(config, NoTls))?;
        let pool = pool_core::Pool::new(manager, our_config(spec))
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self(pool))
    }
}

/// `OURS_PG_POOLER`, to count what each pooler setting costs against a
/// direct connection: `transaction` is `PoolerMode::Transaction` with named
/// statements passed through, `unnamed` adds `PoolerStatements::Unnamed`
/// (the statement relay); unset or `session`, the default.
fn with_pooler_from_env(manager: PgManager) -> Result<PgManager, String> {
    use pool_postgres::pooler::{PoolerMode, PoolerStatements};
    match std::env::var("OURS_PG_POOLER").as_deref() {
        Err(_) | Ok("" | "session") => Ok(manager),
        Ok("transaction") => Ok(manager.pooler_mode(PoolerMode::Transaction)),
        Ok("unnamed") => Ok(manager
            .pooler_mode(PoolerMode::Transaction)
            .pooler_statements(PoolerStatements::Unnamed)),
        Ok(other) => Err(format!(
            "OURS_PG_POOLER={other:?}: session, transaction or unnamed"
        )),
    }
}

impl Contestant for OursPgManager {
    type Conn = pool_postgres::PgClient;
    type Guard<'a> = pool_core::PooledConnection<PgManager>;

    async fn get(&self) -> Result<Self::Guard<'_>, String> {
        self.0.get().await.map_err(|e| e.to_string())
    }

    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut Self::Conn {
        guard
    }

    async fn shutdown(self) {
        self.0.close().await;
    }
}
