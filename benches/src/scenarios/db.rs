//! S5, real PostgreSQL: `SELECT 1` through each pool for a fixed time, pool
//! 16, 16 and 256 tasks; queries per second and latency (get + query).
//! Two families, each compared within itself: tokio-postgres (ours,
//! deadpool-postgres, bb8-postgres) and sqlx (ours, `PgPool`).

use std::time::Duration;

use serde::Serialize;

use crate::contestant::Contestant;
use crate::pools::pg::{DbSpec, Select1};
use crate::runner::{multi_thread, run_load, LoadSpec, Query};
use crate::scenarios::spike::prewarm;
use crate::stats::{self, median, FAIR_ENOUGH};

/// The database contestants (without the `peers` feature: ours over
/// tokio-postgres only; ours over sqlx comes with sqlx, a peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DbKind {
    /// Ours over a minimal local tokio-postgres manager.
    OursTp,
    /// Ours over pool-core's own `PostgresManager`.
    OursPgManager,
    /// deadpool-postgres.
    #[cfg(feature = "peers")]
    DeadpoolPg,
    /// bb8-postgres.
    #[cfg(feature = "peers")]
    Bb8Pg,
    /// Ours over sqlx.
    #[cfg(feature = "peers")]
    OursSqlx,
    /// sqlx's `PgPool`.
    #[cfg(feature = "peers")]
    SqlxPool,
}

impl DbKind {
    /// All that this build has, tokio-postgres family first.
    pub const ALL: &'static [DbKind] = &[
        DbKind::OursTp,
        DbKind::OursPgManager,
        #[cfg(feature = "peers")]
        DbKind::DeadpoolPg,
        #[cfg(feature = "peers")]
        DbKind::Bb8Pg,
        #[cfg(feature = "peers")]
        DbKind::OursSqlx,
        #[cfg(feature = "peers")]
        DbKind::SqlxPool,
    ];

    /// Row label.
    pub fn label(self) -> &'static str {
        match self {
            DbKind::OursTp => "ours (tokio-postgres)",
            DbKind::OursPgManager => "ours (PostgresManager)",
            #[cfg(feature = "peers")]
            DbKind::DeadpoolPg => "deadpool-postgres",
            #[cfg(feature = "peers")]
            DbKind::Bb8Pg => "bb8-postgres",
            #[cfg(feature = "peers")]
            DbKind::OursSqlx => "ours (sqlx)",
            #[cfg(feature = "peers")]
            DbKind::SqlxPool => "sqlx PgPool",
        }
    }

    /// "tokio-postgres" or "sqlx".
    pub fn family(self) -> &'static str {
        match self {
            DbKind::OursTp | DbKind::OursPgManager => "tokio-postgres",
            #[cfg(feature = "peers")]
            DbKind::DeadpoolPg | DbKind::Bb8Pg => "tokio-postgres",
            #[cfg(feature = "peers")]
            DbKind::OursSqlx | DbKind::SqlxPool => "sqlx",
        }
    }

    /// Ours (not a peer)?
    pub fn is_ours(self) -> bool {
        match self {
            DbKind::OursTp | DbKind::OursPgManager => true,
            #[cfg(feature = "peers")]
            DbKind::OursSqlx => true,
            #[cfg(feature = "peers")]
            DbKind::DeadpoolPg | DbKind::Bb8Pg | DbKind::SqlxPool => false,
        }
    }

    /// From a short name: `ours-tp`, `ours-mgr`, `deadpool-pg`, `bb8-pg`,
    /// `ours-sqlx`, `sqlx`.
    ///
    /// # Errors
    ///
    /// Any other name, with the text naming the six; the last four in a
    /// build without the `peers` feature, with the text saying so.
    pub fn from_short(name: &str) -> Result<Self, String> {
        Ok(match name {
            "ours-tp" => DbKind::OursTp,
            "ours-mgr" => DbKind::OursPgManager,
            #[cfg(feature = "peers")]
            "deadpool-pg" => DbKind::DeadpoolPg,
            #[cfg(feature = "peers")]
            "bb8-pg" => DbKind::Bb8Pg,
            #[cfg(feature = "peers")]
            "ours-sqlx" => DbKind::OursSqlx,
            #[cfg(feature = "peers")]
            "sqlx" => DbKind::SqlxPool,
            #[cfg(not(feature = "peers"))]
            "deadpool-pg" | "bb8-pg" | "ours-sqlx" | "sqlx" => {
                return Err(format!(
                    "pool {name:?} needs the benches built with `--features peers`"
                ))
            }
            _ => {
                return Err(format!(
                "unknown pool {name:?}: ours-tp, ours-mgr, deadpool-pg, bb8-pg, ours-sqlx or sqlx"
            ))
            }
        })
    }
}

/// The database of the benches' binaries: `DATABASE_URL`, else the local
/// server's `postgres://postgres@127.0.0.1:5432/test`.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Runs `$body` with `$pool` bound to a database pool of `$kind`, or
/// evaluates to `Err(text)` when it could not be built.
#[macro_export]
macro_rules! with_db_pool {
    ($kind:expr, $spec:expr, |$pool:ident| $body:expr) => {{
        use $crate::pools::pg;
        use $crate::scenarios::db::DbKind;
        match $kind {
            DbKind::OursTp => match pg::OursTp::build($spec).await {
                Ok($pool) => Ok($body),
                Err(e) => Err(e),
            },
            DbKind::OursPgManager => match pg::OursPgManager::build($spec).await {
                Ok($pool) => Ok($body),
                Err(e) => Err(e),
            },
            #[cfg(feature = "peers")]
            DbKind::DeadpoolPg => match $crate::pools::peers::DeadpoolPg::build($spec).await {
                Ok($pool) => Ok($body),
                Err(e) => Err(e),
            },
            #[cfg(feature = "peers")]
            DbKind::Bb8Pg => match $crate::pools::peers::Bb8Pg::build($spec).await {
                Ok($pool) => Ok($body),
                Err(e) => Err(e),
            },
            #[cfg(feature = "peers")]
            DbKind::OursSqlx => match $crate::pools::sqlx::OursSqlx::build($spec).await {
                Ok($pool) => Ok($body),
                Err(e) => Err(e),
            },
            #[cfg(feature = "peers")]
            DbKind::SqlxPool => match $crate::pools::sqlx::SqlxPool::build($spec).await {
                Ok($pool) => Ok($body),
                Err(e) => Err(e),
            },
        }
    }};
}

/// Counts and bounds of S5.
#[derive(Debug, Clone)]
pub struct DbSettings {
    /// `postgres://…`.
    pub url: String,
    /// Pool size.
    pub pool_size: u32,
    /// Task counts.
    pub tasks: Vec<usize>,
    /// Validation off, on, or both.
    pub validate: Vec<bool>,
    /// Length of one run.
    pub duration: Duration,
    /// Watchdog after the stop.
    pub grace: Duration,
    /// Repeats of every point (medians reported).
    pub repeats: usize,
    /// A target rate for all tasks together, queries per second (each
    /// task paced at `tasks / rate`), to compare latencies at equal
    /// throughput; `None` runs every task back to back (S5).
    pub rate: Option<f64>,
}

/// One database contestant at one point.
#[derive(Debug, Clone, Serialize)]
pub struct DbRow {
    /// Driver family.
    pub family: String,
    /// Contestant.
    pub pool: String,
    /// Tasks.
    pub tasks: usize,
    /// Each pool's test-on-checkout on?
    pub validate: bool,
    /// Queries per second.
    pub qps: f64,
    /// Latency of get + query, p50 / p99 / max in µs (medians of the
    /// repeats).
    pub latency_us: [f64; 3],
    /// Jain's index of per-task counts.
    pub jain: f64,
    /// Errors (a task stops at its first), or the build error.
    pub errors: u64,
    /// The first error.
    pub first_error: Option<String>,
    /// Not stuck, no errors, fair.
    pub valid: bool,
}

/// What one database run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Queries per second.
    pub qps: f64,
    /// Latency p50 / p99 / max, µs.
    pub latency_us: [f64; 3],
    /// Latency p99.9, µs.
    pub p999_us: f64,
    /// Jain's index.
    pub jain: f64,
    /// Errors.
    pub errors: u64,
    /// The first error.
    pub first_error: Option<String>,
    /// Tasks stuck past the watchdog.
    pub stuck: bool,
}

/// Runs one contestant on the current runtime, after opening all
/// `pool_size` connections (so no pool is measured while still growing).
pub async fn measure<P>(pool: &P, tasks: usize, s: &DbSettings) -> Measured
where
    P: Contestant,
    P::Conn: Select1,
{
    if let Err(e) = prewarm(pool, s.pool_size).await {
        return Measured {
            qps: 0.0,
            latency_us: [0.0; 3],
            p999_us: 0.0,
            jain: 0.0,
            errors: 1,
            first_error: Some(format!("warm-up: {e}")),
            stuck: false,
        };
    }
    let spec = LoadSpec {
        tasks,
        duration: s.duration,
        max_cycles_per_task: 10_000_000,
        grace: s.grace,
        record: true,
        pace: s
            .rate
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| Duration::from_secs_f64(tasks as f64 / r)),
    };
    let mut out = run_load(pool, Query, &spec).await;
    // Sorts the samples, so the quantile after it reads them in order.
    let [p50, p99, max] = stats::summary(&mut out.cycles_ns);
    let p999 = stats::quantile(&out.cycles_ns, 0.999);
    let us = [p50 as f64 / 1e3, p99 as f64 / 1e3, max as f64 / 1e3];
    Measured {
        qps: out.rate(),
        latency_us: us,
        p999_us: p999 as f64 / 1e3,
        jain: out.jain(),
        errors: out.errors,
        first_error: out.first_error,
        stuck: out.stuck,
    }
}

/// Checks the server answers at all (a short connect), so S5/S7 can be
/// skipped cleanly without one.
pub fn reachable(url: &str) -> Result<(), String> {
    let rt = multi_thread(1);
    rt.block_on(async {
        let config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
        let connect = config.connect(tokio_postgres::NoTls);
        match tokio::time::timeout(Duration::from_secs(3), connect).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("connect timed out".to_owned()),
        }
    })
}

/// One run of one contestant on a fresh 2-worker runtime and pool.
pub fn run_once(kind: DbKind, spec: &DbSpec, tasks: usize, s: &DbSettings) -> Measured {
    let rt = multi_thread(2);
    let got = rt.block_on(async {
        with_db_pool!(kind, spec, |pool| {
            let m = measure(&pool, tasks, s).await;
            if !m.stuck {
                pool.shutdown().await;
            }
            m
        })
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    got.unwrap_or_else(|e| Measured {
        qps: 0.0,
        latency_us: [0.0; 3],
        p999_us: 0.0,
        jain: 0.0,
        errors: 1,
        first_error: Some(e),
        stuck: false,
    })
}

/// S5 for every contestant in `kinds`: each point `repeats` times,
/// interleaved across contestants; medians of qps and of each latency
/// figure, the worst Jain, errors summed.
pub fn run(kinds: &[DbKind], s: &DbSettings) -> Vec<DbRow> {
    let mut rows = Vec::new();
    for &validate in &s.validate {
        for &tasks in &s.tasks {
            let spec = DbSpec {
                url: s.url.clone(),
                max_size: s.pool_size,
                validate,
                acquire_timeout: Duration::from_secs(30),
            };
            let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); kinds.len()];
            for _ in 0..s.repeats.max(1) {
                for (i, &kind) in kinds.iter().enumerate() {
                    runs[i].push(run_once(kind, &spec, tasks, s));
                }
            }
            for (&kind, ms) in kinds.iter().zip(runs) {
                let pick =
                    |f: &dyn Fn(&Measured) -> f64| median(&ms.iter().map(f).collect::<Vec<_>>());
                let jain = ms.iter().map(|m| m.jain).fold(f64::INFINITY, f64::min);
                let errors = ms.iter().map(|m| m.errors).sum();
                let stuck = ms.iter().any(|m| m.stuck);
                rows.push(DbRow {
                    family: kind.family().to_owned(),
                    pool: kind.label().to_owned(),
                    tasks,
                    validate,
                    qps: pick(&|m| m.qps),
                    latency_us: [
                        pick(&|m| m.latency_us[0]),
                        pick(&|m| m.latency_us[1]),
                        pick(&|m| m.latency_us[2]),
                    ],
                    jain,
                    errors,
                    valid: !stuck && errors == 0 && jain >= FAIR_ENOUGH,
                    first_error: ms.iter().find_map(|m| m.first_error.clone()),
                });
            }
        }
    }
    rows
}
