//! Shared machinery of the fault suite (`fault_*.rs`): a bounded load of
//! `SELECT 1` loops through a `Pool<PostgresManager>`, a sampler of the
//! pool's server-side sessions, the fault figures, the invariants every
//! scenario asserts, and the fault targets as named checks.
//!
//! The outcome targets (no dead connection handed out, errors
//! within the queries in flight, no caller waiting out its timeout while
//! the server is down) are asserted (`Enforce::Yes`). Its timing targets
//! (first success within 10 ms, 90 % throughput within 100 ms) are
//! reported, never asserted (`Enforce::No`): the machines are shared and
//! noisy, and BENCH.md ("Faults") carries the figures.

// By path, so that the module resolves the same when this file is included
// on its own (the faults bench does).
#[path = "faults/figures.rs"]
pub mod figures;
#[path = "faults/proxy.rs"]
pub mod proxy;

pub use figures::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::{Pool, PoolConfig};
use pool_postgres::PostgresManager;
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

/// The pool under test.
pub type PgPool = Pool<PostgresManager<NoTls>>;

/// One fault test at a time in a binary: the figures are timings, and
/// several clusters at once on two cores would blur them.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Holds the suite's lock for the life of a test.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// How one checkout-and-query ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The query answered.
    Ok,
    /// `get()` handed a connection out and the query on it failed.
    QueryError,
    /// `get()` ran out of its acquire timeout.
    GetTimeout,
    /// `get()` failed otherwise (a connect error passed on).
    GetError,
    /// The whole operation ran past its bound (recorded, not waited on).
    OverBound,
}

/// One checkout and query.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    pub start: Instant,
    /// When `get()` returned a connection.
    pub got: Option<Instant>,
    pub end: Instant,
    pub outcome: Outcome,
}

/// The shape of a load.
#[derive(Debug, Clone, Copy)]
pub struct LoadSpec {
    pub tasks: usize,
    /// Bound on each task's operations.
    pub max_ops_per_task: usize,
    /// Bound on one operation (checkout and query).
    pub op_bound: Duration,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            tasks: 48,
            max_ops_per_task: 50_000,
            op_bound: Duration::from_secs(15),
        }
    }
}

/// A running load.
pub struct Load {
    stop: Arc<AtomicBool>,
    started: Instant,
    handles: Vec<JoinHandle<Vec<Op>>>,
}

/// Starts `spec.tasks` tasks, each looping `get()` + `SELECT 1` until
/// stopped or out of operations.
pub fn start_load(pool: &PgPool, spec: LoadSpec) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let handles = (0..spec.tasks)
        .map(|_| {
            let pool = pool.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut ops = Vec::new();
                for _ in 0..spec.max_ops_per_task {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    ops.push(one_op(&pool, spec.op_bound).await);
                }
                ops
            })
        })
        .collect();
    Load {
        stop,
        started: Instant::now(),
        handles,
    }
}

async fn one_op(pool: &PgPool, bound: Duration) -> Op {
    let start = Instant::now();
    let mut got = None;
    let run = async {
        match pool.get().await {
            Err(e) if e.is_timeout() => Outcome::GetTimeout,
            Err(_) => Outcome::GetError,
            Ok(conn) => {
                got = Some(Instant::now());
                match conn.simple_query("SELECT 1").await {
                    Ok(_) => Outcome::Ok,
                    Err(_) => Outcome::QueryError,
                }
            }
        }
    };
    let outcome = tokio::time::timeout(bound, run)
        .await
        .unwrap_or(Outcome::OverBound);
    Op {
        start,
        got,
        end: Instant::now(),
        outcome,
    }
}

impl Load {
    /// Stops the load and collects every task's operations.
    ///
    /// # Panics
    ///
    /// When a task does not finish within `bound` of the stop: a stuck task.
    pub async fn finish(self, bound: Duration) -> Vec<Op> {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + bound;
        let mut all = Vec::new();
        for (i, handle) in self.handles.into_iter().enumerate() {
            match tokio::time::timeout_at(deadline, handle).await {
                Ok(ops) => all.extend(ops.expect("load task panicked")),
                Err(_) => panic!("load task {i} is stuck: not finished {bound:?} after the stop"),
            }
        }
        all.sort_by_key(|op| op.start);
        all
    }

    /// When the load started.
    pub fn started(&self) -> Instant {
        self.started
    }
}

/// What the sampler saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sessions {
    /// The most sessions of the pool seen at once.
    pub max: i64,
    pub samples: u64,
    /// Samples above the pool's `max_size`.
    pub over: u64,
}

/// Counts the pool's sessions in `pg_stat_activity` (by
/// `application_name`) every 10 ms over the admin socket, reconnecting
/// while the server is down.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Sessions>,
}

/// Starts a sampler; `limit` is the most `max_size` allows.
pub fn start_sampler(admin: tokio_postgres::Config, app: &str, limit: u32) -> Sampler {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let app = app.to_owned();
    let handle = tokio::spawn(async move {
        let mut seen = Sessions::default();
        let mut client: Option<tokio_postgres::Client> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let deadline = Instant::now() + Duration::from_secs(300);
        let sql = format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'");
        while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
            tick.tick().await;
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                let mut config = admin.clone();
                config.connect_timeout(Duration::from_secs(1));
                client = match config.connect(NoTls).await {
                    Ok((c, conn)) => {
                        tokio::spawn(async move {
                            let _ = conn.await;
                        });
                        Some(c)
                    }
                    Err(_) => None,
                };
            }
            let Some(c) = &client else { continue };
            if let Ok(rows) = c.simple_query(&sql).await {
                let n = rows
                    .iter()
                    .find_map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0)?.parse().ok(),
                        _ => None,
                    })
                    .unwrap_or(0);
                seen.samples += 1;
                seen.max = seen.max.max(n);
                if n > i64::from(limit) {
                    seen.over += 1;
                }
            }
        }
        seen
    });
    Sampler { stop, handle }
}

impl Sampler {
    /// Stops sampling and returns what it saw.
    pub async fn finish(self) -> Sessions {
        self.stop.store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(5), self.handle)
            .await
            .expect("the sampler stops")
            .expect("the sampler did not panic")
    }
}

/// The pool: `max` connections, acquire timeout 2 s, connect timeout 2 s,
/// the default validation (`IsValid`, 500 ms bypass) unless `tune` changes
/// it.
pub async fn pool(
    pg: tokio_postgres::Config,
    max: u32,
    tune: impl FnOnce(pool_core::PoolConfigBuilder) -> pool_core::PoolConfigBuilder,
) -> PgPool {
    let builder = PoolConfig::builder()
        .max_size(max)
        .acquire_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2));
    let config = tune(builder).build().expect("pool config");
    Pool::new(PostgresManager::new(pg, NoTls), config)
        .await
        .expect("pool starts")
}

/// Terminates every backend whose `application_name` is `app`; returns how
/// many. The call sits in the select list so it runs only for rows that
/// passed the filter.
pub async fn terminate_all(admin: &tokio_postgres::Client, app: &str) -> usize {
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("pg_terminate_backend")
        .len()
}

/// The invariants every scenario keeps, asserted: no operation ran past its
/// bound (tasks are checked by [`Load::finish`]), the pool's sessions never
/// exceeded `max_size` at the server, and at quiescence no slot is lost and
/// a fresh `get()` works (the pool recovered by itself).
pub async fn assert_invariants(pool: &PgPool, f: &Figures) {
    assert_eq!(
        f.over_bound, 0,
        "[{}] operations ran past their bound",
        f.scenario
    );
    assert!(
        f.sessions.samples > 0,
        "[{}] the session sampler never read pg_stat_activity",
        f.scenario
    );
    assert!(
        f.sessions.max <= i64::from(f.max_size),
        "[{}] the server saw {} sessions of a pool of {} ({} of {} samples over)",
        f.scenario,
        f.sessions.max,
        f.max_size,
        f.sessions.over,
        f.sessions.samples
    );
    // A fresh checkout works, within a bounded recovery.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = async {
            let conn = pool.get().await.map_err(|e| e.to_string())?;
            conn.simple_query("SELECT 1")
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        };
        match attempt.await {
            Ok(()) => break,
            Err(e) => assert!(
                Instant::now() < deadline,
                "[{}] the pool did not recover within 10 s: {e}",
                f.scenario
            ),
        }
    }
    // Quiescence: every connection came back, none is counted twice.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = pool.metrics();
        assert!(
            m.total <= m.max_size,
            "[{}] total {} above max_size {}",
            f.scenario,
            m.total,
            m.max_size
        );
        if m.in_use == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "[{}] {} connections still in use at quiescence: {m:?}",
            f.scenario,
            m.in_use
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
