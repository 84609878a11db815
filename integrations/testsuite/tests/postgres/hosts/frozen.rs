//! Hosts that stop answering without closing anything, behind a proxy the
//! test freezes and thaws (see `proxy`): a frozen host is marked down
//! within its check's limit and holds up no check of another host; it is
//! seen up again within two recheck intervals of answering, however often
//! it flaps; a listed host that never answers delays neither the build nor
//! the writes after a promotion; and the checks start again on a second
//! runtime.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::PoolConfig;
use pool_postgres::hosts::{HostBackend, HostConnection, HostPool, HostStatus, ServerRole};
use pool_postgres::PostgresManager;
use tokio_postgres::NoTls;

use super::failover::{finish_load, first_write_on, spawn_host_loop, summary, Log, Outcome, Side};
use super::proxy::Proxy;
use super::{primary_and_standby, SERIAL};
use crate::support::cluster::Cluster;

/// A config listing these ports of 127.0.0.1, in that order.
fn ports(ports: &[u16], app: &str) -> tokio_postgres::Config {
    let mut pg = tokio_postgres::Config::new();
    for port in ports {
        pg.host("127.0.0.1").port(*port);
    }
    pg.user("postgres")
        .dbname("postgres")
        .application_name(app)
        .connect_timeout(Duration::from_secs(2));
    pg
}

/// A host pool over `pg`: 4 connections per host, each check (connect and
/// query) bounded by `connect_timeout`, checks every `interval`.
async fn pool_over(
    mut pg: tokio_postgres::Config,
    name: &str,
    connect_timeout: Duration,
    interval: Duration,
) -> HostPool<PostgresManager<NoTls>> {
    pg.connect_timeout(connect_timeout);
    HostPool::builder(pg, NoTls)
        .pool_config(
            PoolConfig::builder()
                .name(name)
                .max_size(4)
                .acquire_timeout(Duration::from_secs(10))
                .connect_timeout(connect_timeout)
                .build()
                .expect("pool config"),
        )
        .recheck_interval(interval)
        .recheck_gap(Duration::from_millis(50))
        .build()
        .await
        .expect("build the host pool")
}

/// Waits (`bound` at most, polling every 10 ms) until host `i`'s status
/// is `want`; how long that took, or the status it was left in.
async fn wait_status<M: HostBackend>(
    pool: &HostPool<M>,
    i: usize,
    want: HostStatus,
    bound: Duration,
) -> Result<Duration, HostStatus> {
    let start = Instant::now();
    loop {
        let now = pool.hosts()[i].status;
        if now == want {
            return Ok(start.elapsed());
        }
        if start.elapsed() > bound {
            return Err(now);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The recheck interval of the frozen-host tests.
const INTERVAL: Duration = Duration::from_millis(500);
/// Their connect timeout: shorter than the interval, so that the connects
/// a check started to a frozen host are over before the next check.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(400);
/// Bound on a frozen host being marked down: one interval to the next
/// check, its limit (one interval at most), and room for a loaded machine.
const DOWN_BOUND: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_frozen_host_stops_no_check_and_is_up_within_two_intervals_of_answering() {
    let _serial = SERIAL.lock().await;
    let (primary, standby) = primary_and_standby().await;
    let p = Proxy::start(primary.port()).await;
    let s = Proxy::start(standby.port()).await;
    let pool = pool_over(
        ports(&[p.port(), s.port()], "hosts_frozen"),
        "hosts-frozen",
        CONNECT_TIMEOUT,
        INTERVAL,
    )
    .await;
    frozen_and_flapping(&pool, &primary, &s).await;
}

#[cfg(feature = "sqlx-postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_frozen_sqlx_host_stops_no_check_and_is_up_within_two_intervals_of_answering() {
    let _serial = SERIAL.lock().await;
    let (primary, standby) = primary_and_standby().await;
    let p = Proxy::start(primary.port()).await;
    let s = Proxy::start(standby.port()).await;
    let options = sqlx::postgres::PgConnectOptions::new()
        .username("postgres")
        .database("postgres");
    let pool =
        pool_sqlx::hosts::builder(options, [("127.0.0.1", p.port()), ("127.0.0.1", s.port())])
            .pool_config(
                PoolConfig::builder()
                    .name("hosts-frozen-sqlx")
                    .max_size(4)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_timeout(CONNECT_TIMEOUT)
                    .build()
                    .expect("pool config"),
            )
            .recheck_interval(INTERVAL)
            .recheck_gap(Duration::from_millis(50))
            .build()
            .await
            .expect("the sqlx host pool");
    frozen_and_flapping(&pool, &primary, &s).await;
}

/// `pool` lists the primary and then the standby behind `s`: the standby
/// freezes, the primary is still checked, and the standby flaps.
async fn frozen_and_flapping<M: HostBackend>(pool: &HostPool<M>, primary: &Cluster, s: &Proxy) {
    const STANDBY: HostStatus = HostStatus::Up(ServerRole::Standby);
    const PRIMARY: HostStatus = HostStatus::Up(ServerRole::Primary);
    wait_status(pool, 1, STANDBY, DOWN_BOUND)
        .await
        .expect("the standby is seen up");
    // The standby's pool holds idle connections, which the freeze leaves
    // open and silent.
    idle_on_standby(pool).await;

    s.freeze();
    let down = wait_status(pool, 1, HostStatus::Down, DOWN_BOUND).await;
    assert!(
        down.is_ok(),
        "the frozen standby is still {down:?} {DOWN_BOUND:?} after the freeze: its check waits \
         for an answer that never comes"
    );

    // The other host is still checked, in the background alone: the
    // primary turns read-only and back.
    primary.set_read_only(true).await;
    let ro = wait_status(
        pool,
        0,
        HostStatus::Up(ServerRole::ReadOnlyPrimary),
        DOWN_BOUND,
    )
    .await;
    assert!(
        ro.is_ok(),
        "while the standby is frozen, the primary turned read-only is still {ro:?}"
    );
    primary.set_read_only(false).await;
    wait_status(pool, 0, PRIMARY, DOWN_BOUND)
        .await
        .expect("the primary is seen writable again");
    let r = pool.read().await.expect("reads fall back to the primary");
    assert_eq!(HostConnection::role(&r), ServerRole::Primary);
    drop(r);

    // The standby answers again, and flaps: each time it is up within two
    // intervals of answering, and down again within the bound of a freeze.
    // From the second round on it answers again as soon as it is seen down,
    // with idle connections left from before the freeze: none may be
    // tried again (each would take a check's whole limit).
    let mut back = Vec::new();
    for round in 0..3 {
        s.thaw();
        let up = wait_status(pool, 1, STANDBY, 2 * INTERVAL).await;
        assert!(
            up.is_ok(),
            "round {round}: the standby answers again, and is still {up:?} two recheck \
             intervals ({:?}) later",
            2 * INTERVAL
        );
        back.push(up.unwrap_or_default());
        idle_on_standby(pool).await;
        s.freeze();
        let down = wait_status(pool, 1, HostStatus::Down, DOWN_BOUND).await;
        assert!(down.is_ok(), "round {round}: frozen again, still {down:?}");
    }
    eprintln!("frozen standby: up again after {back:?} (recheck interval {INTERVAL:?})");
    pool.close().await;
}

/// Leaves three idle connections in the standby's pool (the host pool's
/// second host): three reads held at once, then returned.
async fn idle_on_standby<M: HostBackend>(pool: &HostPool<M>) {
    let mut held = Vec::new();
    for _ in 0..3 {
        let r = pool.read().await.expect("a read");
        assert_eq!(HostConnection::role(&r), ServerRole::Standby);
        held.push(r);
    }
    drop(held);
    for _ in 0..200 {
        if pool.hosts()[1].state.idle >= 3 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the reads did not come back idle: {:?}", pool.hosts()[1]);
}

/// A write's outcome on the connection handed out.
async fn write_outcome(conn: HostConnection<PostgresManager<NoTls>>, sql: &'static str) -> Outcome {
    match conn.query_one(sql, &[]).await {
        Ok(row) => Outcome::Ok(row.get(0)),
        Err(e) => Outcome::Query(e.code().cloned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_host_that_never_answers_delays_neither_the_build_nor_writes_after_a_promotion() {
    let _serial = SERIAL.lock().await;
    let (primary, standby) = primary_and_standby().await;
    // Listed first, accepts connections, never answers.
    let silent = Proxy::start(standby.port()).await;
    silent.freeze();
    const CONNECT: Duration = Duration::from_secs(6);
    let started = Instant::now();
    let pool = pool_over(
        ports(
            &[silent.port(), primary.port(), standby.port()],
            "hosts_silent",
        ),
        "hosts-silent",
        CONNECT,
        Duration::from_secs(10),
    )
    .await;
    let build = started.elapsed();
    let mut failures = Vec::new();
    if build > Duration::from_secs(1) {
        failures.push(format!(
            "build took {build:?}: it waited for the host that never answers (connect timeout \
             {CONNECT:?}), though the primary answered at once"
        ));
    }
    // The silent host's check goes on in the background, and ends down.
    let down = wait_status(&pool, 0, HostStatus::Down, CONNECT + DOWN_BOUND).await;
    assert!(down.is_ok(), "the silent host is {down:?}");

    // A write load; the primary stops, the standby is promoted.
    let log: Log = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..2)
        .map(|_| spawn_host_loop(&pool, Side::Write, write_outcome, &log, &stop))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| primary.stop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let promote_from = Instant::now();
    tokio::task::block_in_place(|| standby.promote());
    let promoted = Instant::now();
    let first = first_write_on(&log, i32::from(standby.port()), "write").await;
    finish_load(&stop, tasks).await;
    let after = first.saturating_duration_since(promoted);
    let ops = log.lock().unwrap().clone();
    eprintln!(
        "silent host: build {build:?}; first write on the promoted standby {after:?} after \
         `pg_ctl promote` returned ({:?} after it began); writes: {}",
        first.saturating_duration_since(promote_from),
        summary(&ops, Side::Write)
    );
    if after > Duration::from_secs(2) {
        failures.push(format!(
            "the first write on the promoted standby came {after:?} after the promotion: the \
             checks waited for the host that never answers ({CONNECT:?})"
        ));
    }
    if ops.iter().any(|o| o.outcome == Outcome::Timeout) {
        failures.push("a write checkout waited out its timeout".to_owned());
    }
    pool.close().await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
#[ignore = "needs DATABASE_URL"]
fn the_checks_start_again_on_a_second_runtime() {
    let url: tokio_postgres::Config = crate::support::db::url("DATABASE_URL")
        .parse()
        .expect("DATABASE_URL");
    let upstream = url.get_ports().first().copied().unwrap_or(5432);
    // The proxy lives on a runtime of its own, across the pool's two.
    let proxy_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("the proxy's runtime");
    let proxy = proxy_rt.block_on(Proxy::start(upstream));
    let mut pg = ports(&[proxy.port()], "hosts_two_runtimes");
    if let Some(user) = url.get_user() {
        pg.user(user);
    }
    if let Some(db) = url.get_dbname() {
        pg.dbname(db);
    }
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    };
    const INTERVAL: Duration = Duration::from_millis(300);
    let first = runtime();
    let pool = first.block_on(pool_over(
        pg,
        "hosts-two-runtimes",
        Duration::from_millis(250),
        INTERVAL,
    ));
    assert_eq!(pool.hosts()[0].status, HostStatus::Up(ServerRole::Primary));
    // The runtime the checks ran on ends.
    drop(first);

    let second = runtime();
    second.block_on(async {
        // A checkout on the new runtime starts the checks again.
        drop(pool.write().await.expect("a write on the second runtime"));
        proxy.freeze();
        let down = wait_status(&pool, 0, HostStatus::Down, DOWN_BOUND).await;
        assert!(
            down.is_ok(),
            "the frozen host is still {down:?}: no check ran on the second runtime"
        );
        proxy.thaw();
        let up = wait_status(&pool, 0, HostStatus::Up(ServerRole::Primary), 2 * INTERVAL).await;
        assert!(up.is_ok(), "the host answers again and is still {up:?}");
        pool.close().await;
    });
    drop(second);
    drop(proxy);
}
