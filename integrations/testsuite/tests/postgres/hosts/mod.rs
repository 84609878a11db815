//! The host pool (`HostPool`) against a primary and a streaming standby the
//! tests build themselves (`initdb`, `pg_basebackup -R`, each in a temp dir
//! on its own port): routing by role, per-host bounds, holders and events
//! (`routing`), and a failover under a mixed load (`failover`; over sqlx's
//! `PgConnection` in `sqlx_failover`, with the `sqlx-postgres` feature),
//! and hosts that stop answering, behind a proxy the tests freeze
//! (`frozen`, `proxy`).

mod failover;
mod frozen;
mod proxy;
mod routing;
#[cfg(feature = "sqlx-postgres")]
mod sqlx_failover;

use std::time::Duration;

use crate::support::cluster::Cluster;
use pool_core::PoolConfig;
use pool_postgres::hosts::{HostBackend, HostConnection, HostPool, HostTls, ServerRole};
use pool_postgres::PostgresManager;
use tokio::sync::Mutex;

/// One pair of servers at a time: each test starts its own.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// A primary with a table `t`, and a streaming standby of it, both
/// trusting TCP.
pub async fn primary_and_standby() -> (Cluster, Cluster) {
    let primary = tokio::task::spawn_blocking(Cluster::start)
        .await
        .expect("start the primary");
    primary.trust_tcp().await;
    primary
        .admin()
        .await
        .batch_execute("CREATE TABLE t (id bigserial PRIMARY KEY, port int NOT NULL)")
        .await
        .expect("create table");
    let standby = {
        // `standby_of` borrows the primary: run it on a blocking thread
        // through a scoped borrow.
        let p = &primary;
        tokio::task::block_in_place(|| Cluster::standby_of(p))
    };
    (primary, standby)
}

/// A config listing `clusters` in that order, over TCP.
pub fn hosts(clusters: &[&Cluster], app: &str) -> tokio_postgres::Config {
    let mut pg = tokio_postgres::Config::new();
    for c in clusters {
        pg.host("127.0.0.1").port(c.port());
    }
    pg.user("postgres")
        .dbname("postgres")
        .application_name(app)
        .connect_timeout(Duration::from_secs(2));
    pg
}

/// Asserts the write checkout `w` is on `primary` and the read checkout
/// `r` on `standby`, by host and role.
pub fn assert_split<M: HostBackend>(
    w: &HostConnection<M>,
    r: &HostConnection<M>,
    primary: &Cluster,
    standby: &Cluster,
) {
    assert_eq!(
        (HostConnection::host(w), HostConnection::role(w)),
        (&*addr(primary), ServerRole::Primary)
    );
    assert_eq!(
        (HostConnection::host(r), HostConnection::role(r)),
        (&*addr(standby), ServerRole::Standby)
    );
}

/// Checks a write and a read connection out of `pool` and asserts the
/// first went to `primary` and the second to `standby` (see
/// [`assert_split`]); both go back when it returns.
pub async fn assert_checkouts_split<M: HostBackend>(
    pool: &HostPool<M>,
    primary: &Cluster,
    standby: &Cluster,
) {
    let w = pool.write().await.expect("a write checkout");
    let r = pool.read().await.expect("a read checkout");
    assert_split(&w, &r, primary, standby);
}

/// `127.0.0.1:port`, as the host pool names a host.
pub fn addr(c: &Cluster) -> String {
    format!("127.0.0.1:{}", c.port())
}

/// A host pool over `config` with `max_size` per host, quick rechecks.
pub async fn host_pool<Tls: HostTls>(
    config: tokio_postgres::Config,
    tls: Tls,
    max_size: u32,
) -> HostPool<PostgresManager<Tls>> {
    HostPool::builder(config, tls)
        .pool_config(
            PoolConfig::builder()
                .name("hosts-test")
                .max_size(max_size)
                .acquire_timeout(Duration::from_secs(10))
                .connect_timeout(Duration::from_secs(2))
                .build()
                .expect("pool config"),
        )
        .recheck_interval(Duration::from_secs(1))
        .recheck_gap(Duration::from_millis(50))
        .build()
        .await
        .expect("build the host pool")
}
