//! Failover in `PostgresManager`, against two clusters
//! the test owns: with both hosts listed and `target_session_attrs =
//! read-write`, a connect skips a read-only server, and when the primary
//! turns read-only under load (`default_transaction_read_only` flipped on it
//! and off on the other), the 25006 errors retire its connections and the
//! pool writes to the other server within a bounded time. Also: the
//! manager's TCP keepalive defaults and which setting wins.
#![cfg(feature = "tokio-postgres")]

use crate::support::faults;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::cluster::Cluster;
use pool_postgres::{
    PostgresManager, DEFAULT_KEEPALIVE_IDLE, DEFAULT_KEEPALIVE_INTERVAL, DEFAULT_KEEPALIVE_RETRIES,
};
use tokio_postgres::config::TargetSessionAttrs;
use tokio_postgres::NoTls;

const PASSWORD: &str = "failover-pw";

async fn two_clusters() -> (Cluster, Cluster) {
    let a = tokio::task::spawn_blocking(Cluster::start);
    let b = tokio::task::spawn_blocking(Cluster::start);
    let (a, b) = (a.await.expect("cluster a"), b.await.expect("cluster b"));
    for c in [&a, &b] {
        c.set_postgres_password(PASSWORD).await;
        c.admin()
            .await
            .batch_execute("CREATE TABLE t (x int)")
            .await
            .expect("create table");
    }
    (a, b)
}

/// Both hosts, `a` first, read-write wanted.
fn both(a: &Cluster, b: &Cluster, app: &str) -> tokio_postgres::Config {
    let mut pg = tokio_postgres::Config::new();
    pg.host("127.0.0.1")
        .port(a.port())
        .host("127.0.0.1")
        .port(b.port())
        .user("postgres")
        .dbname("postgres")
        .password(PASSWORD)
        .application_name(app)
        .connect_timeout(Duration::from_secs(2))
        .target_session_attrs(TargetSessionAttrs::ReadWrite);
    pg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_connect_skips_a_read_only_server() {
    let _serial = faults::serial().await;
    let (a, b) = two_clusters().await;
    a.set_read_only(true).await;
    let app = "failover_skip";
    let pool = faults::pool(both(&a, &b, app), 2, |c| c).await;
    let conn = pool.get().await.expect("a checkout");
    let port: i32 = conn
        .query_one("SELECT current_setting('port')::int", &[])
        .await
        .expect("port")
        .get(0);
    assert_eq!(
        port,
        i32::from(b.port()),
        "the read-only first host was skipped"
    );
    conn.execute("INSERT INTO t VALUES (1)", &[])
        .await
        .expect("a write on the read-write host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn writes_follow_the_primary_after_a_read_only_flip() {
    let _serial = faults::serial().await;
    let (a, b) = two_clusters().await;
    b.set_read_only(true).await;
    let app = "failover_flip";
    const MAX: u32 = 8;
    const TASKS: usize = 16;
    let pool = faults::pool(both(&a, &b, app), MAX, |c| c).await;

    // Writers: each write reports the port of the server that took it.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..TASKS)
        .map(|_| {
            let pool = pool.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut log: Vec<(Instant, Option<i32>)> = Vec::new();
                for _ in 0..50_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let port = match pool.get().await {
                        Ok(conn) => conn
                            .query_one(
                                "INSERT INTO t VALUES (1) RETURNING current_setting('port')::int",
                                &[],
                            )
                            .await
                            .ok()
                            .map(|row| row.get::<_, i32>(0)),
                        Err(_) => None,
                    };
                    log.push((Instant::now(), port));
                }
                log
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The failover: the standby becomes writable, then the primary read-only.
    b.set_read_only(false).await;
    let flip = Instant::now();
    a.set_read_only(true).await;

    // Within a bound, the pool's sessions on the old primary are gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    let watch_a = a.admin().await;
    while crate::support::pg::sessions(&watch_a, app).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the pool still holds sessions on the read-only server 10 s after the flip"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drained = flip.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let mut log = Vec::new();
    for w in writers {
        log.extend(
            tokio::time::timeout(Duration::from_secs(10), w)
                .await
                .expect("a writer is stuck")
                .expect("writer panicked"),
        );
    }
    log.sort_by_key(|(at, _)| *at);
    let (pa, pb) = (i32::from(a.port()), i32::from(b.port()));
    assert!(
        log.iter().any(|(at, p)| *at < flip && *p == Some(pa)),
        "writes went to the first host before the flip"
    );
    let errors = log
        .iter()
        .filter(|(at, p)| *at >= flip && p.is_none())
        .count();
    let first_b = log
        .iter()
        .find(|(at, p)| *at >= flip && *p == Some(pb))
        .map(|(at, _)| *at - flip);
    let last_a = log
        .iter()
        .filter(|(_, p)| *p == Some(pa))
        .map(|(at, _)| at.saturating_duration_since(flip))
        .max();
    println!(
        "FAULT FIGURES [read-only flip] write errors after the flip={errors} \
         first write on the new primary={first_b:?} last write on the old one={last_a:?} \
         old primary's sessions gone after {drained:?}"
    );
    let first_b = first_b.expect("writes reached the new primary");
    assert!(
        first_b < Duration::from_secs(5),
        "the first write on the new primary came {first_b:?} after the flip"
    );
    let tail = flip + drained;
    assert!(
        log.iter()
            .filter(|(at, _)| *at > tail + Duration::from_millis(100))
            .all(|(_, p)| *p == Some(pb)),
        "every write after the drain lands on the new primary"
    );
    let m = pool.metrics();
    assert!(m.total <= m.max_size);
}

#[test]
fn keepalive_defaults_and_which_setting_wins() {
    // The driver's defaults are replaced by the manager's.
    let m = PostgresManager::new(tokio_postgres::Config::new(), NoTls);
    let c = m.config();
    assert!(c.get_keepalives());
    assert_eq!(c.get_keepalives_idle(), DEFAULT_KEEPALIVE_IDLE);
    assert_eq!(
        c.get_keepalives_interval(),
        Some(DEFAULT_KEEPALIVE_INTERVAL)
    );
    assert_eq!(c.get_keepalives_retries(), Some(DEFAULT_KEEPALIVE_RETRIES));

    // A value set in the config wins over the manager's defaults.
    let pg: tokio_postgres::Config = "host=db keepalives_idle=77".parse().expect("config");
    let m = PostgresManager::new(pg, NoTls);
    assert_eq!(m.config().get_keepalives_idle(), Duration::from_secs(77));
    assert_eq!(m.config().get_keepalives_interval(), None);
    let pg: tokio_postgres::Config = "host=db keepalives=0".parse().expect("config");
    assert!(!PostgresManager::new(pg, NoTls).config().get_keepalives());

    // The setter wins over both.
    let pg: tokio_postgres::Config = "host=db keepalives=0".parse().expect("config");
    let m = PostgresManager::new(pg, NoTls).tcp_keepalive(
        Duration::from_secs(5),
        Duration::from_secs(2),
        4,
    );
    assert!(m.config().get_keepalives());
    assert_eq!(m.config().get_keepalives_idle(), Duration::from_secs(5));
    assert_eq!(m.config().get_keepalives_retries(), Some(4));
    let m = PostgresManager::new(tokio_postgres::Config::new(), NoTls).without_tcp_keepalive();
    assert!(!m.config().get_keepalives());
}
