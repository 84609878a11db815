//! What runs: which pools ([`Kind`]), each behind one operation
//! ([`AnyPool`]), and the faults done to the server ([`Fault`]).

use super::*;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Ours,
    #[cfg(feature = "sqlx-manager")]
    OursSqlx,
    Deadpool,
    Bb8,
    Sqlx,
}

impl Kind {
    pub(crate) const ALL: &'static [Kind] = &[
        Kind::Ours,
        #[cfg(feature = "sqlx-manager")]
        Kind::OursSqlx,
        Kind::Deadpool,
        Kind::Bb8,
        Kind::Sqlx,
    ];

    /// The name `--pools` takes.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            #[cfg(feature = "sqlx-manager")]
            Kind::OursSqlx => "ours-sqlx",
            Kind::Deadpool => "deadpool",
            Kind::Bb8 => "bb8",
            Kind::Sqlx => "sqlx",
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Ours => "pool-core",
            #[cfg(feature = "sqlx-manager")]
            Kind::OursSqlx => "pool-core (sqlx)",
            Kind::Deadpool => "deadpool-postgres",
            Kind::Bb8 => "bb8-postgres",
            Kind::Sqlx => "sqlx PgPool",
        }
    }
}

/// One of the four pools, behind one `op`.
#[derive(Clone)]
pub(crate) enum AnyPool {
    Ours(pool_core::Pool<PostgresManager<NoTls>>),
    #[cfg(feature = "sqlx-manager")]
    OursSqlx(pool_sqlx::Pool<sqlx::PgConnection>),
    Deadpool(deadpool_postgres::Pool),
    Bb8(bb8::Pool<bb8_postgres::PostgresConnectionManager<NoTls>>),
    Sqlx(sqlx::PgPool),
}

/// What the command line sets for every run: our pool's connect bounds,
/// the delaying proxy in front of every pool, and how the sqlx
/// contestants send their query.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) connects: Option<u32>,
    pub(crate) reconnects: Option<u32>,
    pub(crate) connect_delay: Option<Duration>,
    /// `--sqlx-simple`: the sqlx contestants send `SELECT 1` as a simple
    /// query (`sqlx::raw_sql`), as the tokio-postgres ones do, instead of
    /// a prepared statement.
    pub(crate) sqlx_simple: bool,
}

impl AnyPool {
    pub(crate) async fn build(
        kind: Kind,
        pg: tokio_postgres::Config,
        port: u16,
        app: &str,
        connects: Bounds,
    ) -> Result<Self, String> {
        // Our pool's settings, the same for both of its managers.
        let ours = || {
            let mut builder = pool_core::PoolConfig::builder()
                .max_size(MAX)
                .acquire_timeout(ACQUIRE)
                .connect_timeout(ACQUIRE);
            if let Some(n) = connects.connects {
                builder = builder.max_concurrent_connects(n);
            }
            if let Some(n) = connects.reconnects {
                builder = builder.max_concurrent_reconnects(n);
            }
            builder.build().map_err(|e| e.to_string())
        };
        let sqlx_options = || {
            sqlx::postgres::PgConnectOptions::new()
                .host("127.0.0.1")
                .port(port)
                .username("postgres")
                .password(PASSWORD)
                .database("postgres")
                .application_name(app)
        };
        Ok(match kind {
            Kind::Ours => AnyPool::Ours(
                pool_core::Pool::new(PostgresManager::new(pg, NoTls), ours()?)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            #[cfg(feature = "sqlx-manager")]
            Kind::OursSqlx => AnyPool::OursSqlx(
                pool_sqlx::Pool::new(
                    pool_sqlx::SqlxManager::<sqlx::PgConnection>::new(sqlx_options()),
                    ours()?,
                )
                .await
                .map_err(|e| e.to_string())?,
            ),
            Kind::Deadpool => {
                let manager = deadpool_postgres::Manager::from_config(
                    pg,
                    NoTls,
                    deadpool_postgres::ManagerConfig {
                        recycling_method: deadpool_postgres::RecyclingMethod::Fast,
                    },
                );
                AnyPool::Deadpool(
                    deadpool_postgres::Pool::builder(manager)
                        .max_size(MAX as usize)
                        .wait_timeout(Some(ACQUIRE))
                        .create_timeout(Some(ACQUIRE))
                        .runtime(deadpool_postgres::Runtime::Tokio1)
                        .build()
                        .map_err(|e| e.to_string())?,
                )
            }
            Kind::Bb8 => AnyPool::Bb8(
                bb8::Pool::builder()
                    .max_size(MAX)
                    .connection_timeout(ACQUIRE)
                    .build(bb8_postgres::PostgresConnectionManager::new(pg, NoTls))
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            Kind::Sqlx => AnyPool::Sqlx(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(MAX)
                    .acquire_timeout(ACQUIRE)
                    .connect_with(sqlx_options())
                    .await
                    .map_err(|e| e.to_string())?,
            ),
        })
    }

    /// One checkout and `SELECT 1`: the outcome and when the connection was
    /// handed out.
    pub(crate) async fn op(&self, sqlx_simple: bool) -> (Outcome, Option<Instant>) {
        match self {
            AnyPool::Ours(p) => match p.get().await {
                Err(e) if e.is_timeout() => (Outcome::GetTimeout, None),
                Err(_) => (Outcome::GetError, None),
                Ok(c) => {
                    let got = Instant::now();
                    (
                        query_outcome(c.simple_query("SELECT 1").await.is_ok()),
                        Some(got),
                    )
                }
            },
            #[cfg(feature = "sqlx-manager")]
            AnyPool::OursSqlx(p) => match p.get().await {
                Err(e) if e.is_timeout() => (Outcome::GetTimeout, None),
                Err(_) => (Outcome::GetError, None),
                Ok(mut c) => {
                    let got = Instant::now();
                    (sqlx_select1(&mut c, sqlx_simple).await, Some(got))
                }
            },
            AnyPool::Deadpool(p) => match p.get().await {
                Err(deadpool_postgres::PoolError::Timeout(_)) => (Outcome::GetTimeout, None),
                Err(_) => (Outcome::GetError, None),
                Ok(c) => {
                    let got = Instant::now();
                    (
                        query_outcome(c.simple_query("SELECT 1").await.is_ok()),
                        Some(got),
                    )
                }
            },
            AnyPool::Bb8(p) => match p.get().await {
                Err(bb8::RunError::TimedOut) => (Outcome::GetTimeout, None),
                Err(_) => (Outcome::GetError, None),
                Ok(c) => {
                    let got = Instant::now();
                    (
                        query_outcome(c.simple_query("SELECT 1").await.is_ok()),
                        Some(got),
                    )
                }
            },
            AnyPool::Sqlx(p) => match p.acquire().await {
                Err(sqlx::Error::PoolTimedOut) => (Outcome::GetTimeout, None),
                Err(_) => (Outcome::GetError, None),
                Ok(mut c) => {
                    let got = Instant::now();
                    (sqlx_select1(&mut c, sqlx_simple).await, Some(got))
                }
            },
        }
    }

    /// Our pool's counts; `None` for the peers.
    pub(crate) fn metrics(&self) -> Option<pool_core::PoolMetrics> {
        match self {
            AnyPool::Ours(p) => Some(p.metrics()),
            #[cfg(feature = "sqlx-manager")]
            AnyPool::OursSqlx(p) => Some(p.metrics()),
            _ => None,
        }
    }

    pub(crate) async fn close(self) {
        match self {
            AnyPool::Ours(p) => p.close().await,
            #[cfg(feature = "sqlx-manager")]
            AnyPool::OursSqlx(p) => p.close().await,
            AnyPool::Deadpool(p) => p.close(),
            AnyPool::Bb8(p) => drop(p),
            AnyPool::Sqlx(p) => p.close().await,
        }
    }
}

pub(crate) fn query_outcome(ok: bool) -> Outcome {
    if ok {
        Outcome::Ok
    } else {
        Outcome::QueryError
    }
}

/// `SELECT 1` on a sqlx connection: prepared (sqlx's default), or as a
/// simple query.
pub(crate) async fn sqlx_select1(conn: &mut sqlx::PgConnection, simple: bool) -> Outcome {
    let ok = if simple {
        sqlx::raw_sql("SELECT 1").execute(&mut *conn).await.is_ok()
    } else {
        sqlx::query("SELECT 1").execute(&mut *conn).await.is_ok()
    };
    query_outcome(ok)
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    TerminateOnce,
    Stop(Duration),
    Kill9,
    /// No fault: the load runs on through the same pause as a stop, and
    /// "up" is its end. The control for the recovery figures: how often
    /// the rate after "up" is under the bar with nothing done to the
    /// server, from the run's own drift alone.
    Control(Duration),
}

impl Fault {
    /// The name `--faults` takes.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Fault::TerminateOnce => "terminate",
            Fault::Stop(_) => "stop",
            Fault::Kill9 => "kill9",
            Fault::Control(_) => "none",
        }
    }

    pub(crate) fn name(self) -> String {
        match self {
            Fault::TerminateOnce => "terminate all".to_owned(),
            Fault::Stop(d) => format!("stop {} s", d.as_secs()),
            Fault::Kill9 => "kill -9".to_owned(),
            Fault::Control(d) => format!("no fault, {} s", d.as_secs()),
        }
    }
}
