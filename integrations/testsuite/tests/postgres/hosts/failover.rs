//! A failover under a mixed load: writers and readers run through one host
//! pool over a primary and its standby; the primary stops, the standby is
//! promoted. A plain single-host pool pointed at the old primary runs the
//! same load beside it, as the baseline. Prints the figures (time to the
//! first write on the new primary, errors per side).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pool_core::{Pool, PoolConfig, PoolError};
use pool_postgres::hosts::{HostBackend, HostConnection, HostPool};
use pool_postgres::hosts::{HostEvent, HostPoolError};
use pool_postgres::PostgresManager;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use super::{host_pool, hosts, primary_and_standby, SERIAL};

pub(super) const WRITERS: usize = 4;
pub(super) const READERS: usize = 4;
/// Per-task pause between operations.
const PAUSE: Duration = Duration::from_millis(5);
/// The most operations one task runs, whatever happens.
const MAX_OPS: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Write,
    Read,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Served by the server on this port.
    Ok(i32),
    /// No host of the role wanted (fail fast).
    NoHost,
    /// A checkout waited out its time limit.
    Timeout,
    /// The checkout failed otherwise (a connect error, fail fast).
    CheckoutFailed,
    /// The query failed with this SQLSTATE (or none: a closed connection).
    Query(Option<SqlState>),
}

#[derive(Debug, Clone)]
pub(super) struct Op {
    pub(super) side: Side,
    pub(super) at: Instant,
    pub(super) outcome: Outcome,
}

pub(super) type Log = Arc<Mutex<Vec<Op>>>;

pub(super) const WRITE_SQL: &str = "INSERT INTO t (port) SELECT inet_server_port() RETURNING port";
pub(super) const READ_SQL: &str = "SELECT inet_server_port()";

fn query_outcome(r: Result<tokio_postgres::Row, impl Into<pool_postgres::PgError>>) -> Outcome {
    match r.map_err(Into::into) {
        Ok(row) => Outcome::Ok(row.get(0)),
        Err(e) => Outcome::Query(e.code().cloned()),
    }
}

/// A tokio-postgres host connection's outcome for `sql`.
async fn tokio_query(conn: HostConnection<PostgresManager<NoTls>>, sql: &'static str) -> Outcome {
    query_outcome(conn.query_one(sql, &[]).await)
}

pub(super) fn pool_outcome<E>(e: &PoolError<E>) -> Outcome {
    if e.is_timeout() {
        Outcome::Timeout
    } else {
        Outcome::CheckoutFailed
    }
}

/// Runs `query` (given the side's SQL) on the connection of `side` that
/// `pool` hands out, in a loop until `stop`, logging each outcome.
pub(super) fn spawn_host_loop<M, Q, Fut>(
    pool: &HostPool<M>,
    side: Side,
    query: Q,
    log: &Log,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()>
where
    M: HostBackend,
    Q: Fn(HostConnection<M>, &'static str) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    let pool = pool.clone();
    spawn_loop(side, log, stop, move || {
        let pool = pool.clone();
        async move {
            let (checkout, sql) = match side {
                Side::Write => (pool.write().await, WRITE_SQL),
                Side::Read => (pool.read().await, READ_SQL),
            };
            match checkout {
                Ok(conn) => query(conn, sql).await,
                Err(HostPoolError::NoHost { .. }) => Outcome::NoHost,
                Err(HostPoolError::Pool { error, .. }) => pool_outcome(&error),
                Err(e) => panic!("{side:?} checkout: {e}"),
            }
        }
    })
}

/// Runs the side's SQL on a connection of the plain pool `pool`, in a loop
/// until `stop`, logging each outcome.
fn spawn_plain_loop(
    pool: &Pool<PostgresManager<NoTls>>,
    side: Side,
    log: &Log,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let pool = pool.clone();
    let sql = match side {
        Side::Write => WRITE_SQL,
        Side::Read => READ_SQL,
    };
    spawn_loop(side, log, stop, move || {
        let pool = pool.clone();
        async move {
            match pool.get().await {
                Ok(conn) => query_outcome(conn.query_one(sql, &[]).await),
                Err(e) => pool_outcome(&e),
            }
        }
    })
}

/// Waits (30 s at most) for the first write `log` has from the server on
/// `port`, and returns when it was served; `what` names the writes.
///
/// # Panics
///
/// When none came within 30 s.
pub(super) async fn first_write_on(log: &Log, port: i32, what: &str) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let at = log
            .lock()
            .unwrap()
            .iter()
            .find(|o| o.side == Side::Write && o.outcome == Outcome::Ok(port))
            .map(|o| o.at);
        if let Some(at) = at {
            return at;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} reached the promoted standby within 30 s: {}",
            summary(&log.lock().unwrap(), Side::Write)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Lets the load run half a second more, then stops it and waits for
/// every task.
pub(super) async fn finish_load(stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<()>>) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a load task panicked");
    }
}

/// Asserts no write reached a read-only server (none failed with 25006,
/// and the standby on `standby_port` served none before `promote_from`)
/// and no checkout waited out its timeout.
pub(super) fn assert_failover_clean(ops: &[Op], standby_port: i32, promote_from: Instant) {
    let read_only = ops
        .iter()
        .filter(|o| o.outcome == Outcome::Query(Some(SqlState::READ_ONLY_SQL_TRANSACTION)))
        .count();
    assert_eq!(read_only, 0, "writes sent to a read-only server");
    assert!(
        ops.iter()
            .filter(|o| o.side == Side::Write && o.outcome == Outcome::Ok(standby_port))
            .all(|o| o.at >= promote_from),
        "a write was served by the standby before the promotion"
    );
    assert!(
        ops.iter().all(|o| o.outcome != Outcome::Timeout),
        "a checkout waited out its timeout"
    );
}

/// The settings of the pools the failover load runs through, named `name`.
pub(super) fn load_config(name: &str) -> PoolConfig {
    PoolConfig::builder()
        .name(name)
        .max_size(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// Runs `op` in a loop until `stop`, logging each outcome.
pub(super) fn spawn_loop<F, Fut>(
    side: Side,
    log: &Log,
    stop: &Arc<AtomicBool>,
    op: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    let (log, stop) = (Arc::clone(log), Arc::clone(stop));
    tokio::spawn(async move {
        for _ in 0..MAX_OPS {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let outcome = op().await;
            log.lock().unwrap().push(Op {
                side,
                at: Instant::now(),
                outcome,
            });
            tokio::time::sleep(PAUSE).await;
        }
    })
}

/// Counts of each kind of outcome for one side.
pub(super) fn summary(ops: &[Op], side: Side) -> String {
    let of = |f: &dyn Fn(&Outcome) -> bool| {
        ops.iter()
            .filter(|o| o.side == side && f(&o.outcome))
            .count()
    };
    let mut codes: Vec<String> = ops
        .iter()
        .filter_map(|o| match &o.outcome {
            Outcome::Query(code) if o.side == side => Some(
                code.as_ref()
                    .map_or("no SQLSTATE".to_owned(), |c| c.code().to_owned()),
            ),
            _ => None,
        })
        .collect();
    codes.sort();
    codes.dedup();
    format!(
        "ok {}, no-host {}, timeout {}, checkout-failed {}, query-failed {} {codes:?}",
        of(&|o| matches!(o, Outcome::Ok(_))),
        of(&|o| *o == Outcome::NoHost),
        of(&|o| *o == Outcome::Timeout),
        of(&|o| *o == Outcome::CheckoutFailed),
        of(&|o| matches!(o, Outcome::Query(_))),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn promote_the_standby_under_load() {
    let _serial = SERIAL.lock().await;
    let (primary, standby) = primary_and_standby().await;
    let (p_port, s_port) = (i32::from(primary.port()), i32::from(standby.port()));
    let pool = host_pool(hosts(&[&primary, &standby], "hosts_failover"), NoTls, 8).await;
    let mut events = pool.subscribe();

    // The baseline: one plain pool on the old primary, as an application
    // with two pools (one per role) would have for its writes and reads.
    let mut plain_config = hosts(&[&primary], "hosts_failover_plain");
    plain_config.connect_timeout(Duration::from_secs(2));
    let plain = Pool::new(
        PostgresManager::new(plain_config, NoTls),
        load_config("plain"),
    )
    .await
    .expect("the plain pool");

    let log: Log = Arc::default();
    let plain_log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        tasks.push(spawn_host_loop(
            &pool,
            Side::Write,
            tokio_query,
            &log,
            &stop,
        ));
        tasks.push(spawn_plain_loop(&plain, Side::Write, &plain_log, &stop));
    }
    for _ in 0..READERS {
        tasks.push(spawn_host_loop(&pool, Side::Read, tokio_query, &log, &stop));
        tasks.push(spawn_plain_loop(&plain, Side::Read, &plain_log, &stop));
    }

    // Steady load, then the primary stops, then the standby is promoted.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped_at = Instant::now();
    tokio::task::block_in_place(|| primary.stop());
    let stop_done = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let promote_from = Instant::now();
    tokio::task::block_in_place(|| standby.promote());
    let promoted = Instant::now();

    // Until the first write on the new primary (bounded), then a little
    // more load.
    let first_new_write = first_write_on(&log, s_port, "write").await;
    finish_load(&stop, tasks).await;

    let ops = log.lock().unwrap().clone();
    let plain_ops = plain_log.lock().unwrap().clone();
    eprintln!(
        "failover figures: primary stop took {:?}, promote took {:?}; first write on the new \
         primary {:?} after `pg_ctl promote` began, {:?} after it returned ({:?} after the stop \
         began)",
        stop_done - stopped_at,
        promoted - promote_from,
        first_new_write.saturating_duration_since(promote_from),
        first_new_write.saturating_duration_since(promoted),
        first_new_write - stopped_at
    );
    eprintln!("host pool writes: {}", summary(&ops, Side::Write));
    eprintln!("host pool reads:  {}", summary(&ops, Side::Read));
    eprintln!("plain pool writes: {}", summary(&plain_ops, Side::Write));
    eprintln!("plain pool reads:  {}", summary(&plain_ops, Side::Read));
    let plain_after: usize = plain_ops
        .iter()
        .filter(|o| o.at > stop_done && matches!(o.outcome, Outcome::Ok(_)))
        .count();
    eprintln!("plain pool operations served after the stop: {plain_after}");

    // No write reached a read-only server: none failed with 25006, and no
    // write was served by the standby before its promotion returned (it
    // would have refused it). No caller waited out its timeout.
    assert_failover_clean(&ops, s_port, promote_from);
    // Reads were served throughout: every read of the host pool, and some
    // in each phase.
    let reads: Vec<&Op> = ops.iter().filter(|o| o.side == Side::Read).collect();
    let failed: Vec<_> = reads
        .iter()
        .filter(|o| !matches!(o.outcome, Outcome::Ok(_)))
        .collect();
    assert!(
        failed.is_empty(),
        "reads failed during the failover: {failed:?}"
    );
    for (from, to, phase) in [
        (None, Some(stopped_at), "before the stop"),
        (
            Some(stop_done),
            Some(promote_from),
            "between the stop and the promotion",
        ),
        (Some(promoted), None, "after the promotion"),
    ] {
        let served = reads
            .iter()
            .any(|o| from.is_none_or(|f| o.at > f) && to.is_none_or(|t| o.at < t));
        assert!(served, "no read served {phase}");
    }
    assert!(
        ops.iter().any(|o| o.side == Side::Write
            && o.outcome == Outcome::Ok(p_port)
            && o.at < stopped_at),
        "writes reached the primary before the stop"
    );

    // The events said what happened.
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        seen.iter().any(|e| matches!(e, HostEvent::HostDown { host, .. } if host.ends_with(&format!(":{p_port}")))),
        "the old primary was reported down: {seen:?}"
    );
    assert!(
        seen.iter().any(|e| e.is_promotion()),
        "the promotion was reported: {seen:?}"
    );
    pool.close().await;
    plain.close().await;
}
