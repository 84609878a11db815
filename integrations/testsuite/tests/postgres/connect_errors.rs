//! A failed connect says why and where: `Display` of the manager's error
//! (and of the pool's error around it, and the pool's WARN log) names the
//! host and port and the server's or the system's own message, for a
//! refused login, a database that does not exist and a port nothing
//! listens on; the driver's error stays reachable (`as_db`, `source()`).
#![cfg(feature = "tokio-postgres")]

use std::error::Error as _;
use std::time::Duration;

use pool_core::{ManageConnection, Pool, PoolConfig, PoolError};
use pool_postgres::PostgresManager;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use crate::support::cluster;
use crate::support::db::bounded;

/// A pool config whose first connect failing fails `Pool::new`.
fn config() -> PoolConfig {
    PoolConfig::builder()
        .max_size(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("config")
}

/// What the manager's connect, `Pool::new` and (with the `bb8` and
/// `deadpool` features) the adapters over `bb8-postgres` and
/// `deadpool-postgres`, told where they connect, fail with for `pg`: their
/// `Display`, each with what printed it.
async fn failures(
    pg: &tokio_postgres::Config,
    code: Option<&SqlState>,
) -> Vec<(&'static str, String)> {
    let manager = PostgresManager::new(pg.clone(), NoTls);
    let err = manager.connect().await.expect_err("connect fails");
    // The driver's error is still there, by accessor and by `source()`.
    let db = err.as_db().expect("the driver's error");
    assert_eq!(db.code(), code, "{err:?}");
    let source = err.source().expect("a source");
    assert!(
        source.is::<tokio_postgres::Error>(),
        "the source is the driver's error: {source:?}"
    );
    let mut shown = vec![("PostgresManager", err.to_string())];

    let err = Pool::new(PostgresManager::new(pg.clone(), NoTls), config())
        .await
        .expect_err("Pool::new fails");
    assert!(matches!(err, PoolError::Backend(_)), "{err:?}");
    shown.push(("Pool::new", err.to_string()));

    #[cfg(feature = "bb8")]
    {
        use pool_core::compat::bb8::Bb8Manager;
        let bb8 = Bb8Manager::new(bb8_postgres::PostgresConnectionManager::new(
            pg.clone(),
            NoTls,
        ))
        .with_target(target_of(pg));
        let err = bb8.connect().await.expect_err("bb8 connect fails");
        assert_eq!(err.get_ref().code(), code, "{err:?}");
        shown.push(("Bb8Manager", err.to_string()));
        let err = Pool::new(bb8, config()).await.expect_err("Pool::new fails");
        shown.push(("Pool::new over bb8", err.to_string()));
    }

    #[cfg(feature = "deadpool")]
    {
        use pool_core::compat::deadpool::{DeadpoolError, DeadpoolManager};
        let deadpool = DeadpoolManager::new(deadpool_postgres::Manager::new(pg.clone(), NoTls))
            .with_target(target_of(pg));
        let err = deadpool
            .connect()
            .await
            .expect_err("deadpool connect fails");
        let DeadpoolError::Connect { error, .. } = &err else {
            panic!("a connect error: {err:?}");
        };
        assert_eq!(error.code(), code, "{err:?}");
        shown.push(("DeadpoolManager", err.to_string()));
        let err = Pool::new(deadpool, config())
            .await
            .expect_err("Pool::new fails");
        shown.push(("Pool::new over deadpool", err.to_string()));
    }
    shown
}

/// `host:port` of a one-host TCP config, as the adapters are told it.
#[cfg(any(feature = "bb8", feature = "deadpool"))]
fn target_of(pg: &tokio_postgres::Config) -> String {
    let tokio_postgres::config::Host::Tcp(host) = &pg.get_hosts()[0] else {
        panic!("a TCP host");
    };
    format!("{host}:{}", pg.get_ports()[0])
}

/// Each text is `connect to <host> failed: <cause>`: one prefix, the host,
/// the server's or the system's own message and nothing else.
fn assert_names(shown: &[(&str, String)], host: &str, cause: &str) {
    let expected = format!("connect to {host} failed: {cause}");
    for (what, text) in shown {
        assert_eq!(text, &expected, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_wrong_password_is_named_with_the_host() {
    let cluster = cluster::Cluster::spawn().await;
    let _admin = cluster.admin_with_login("app", "right-secret").await;
    let mut pg = cluster.tcp_config("app", "postgres");
    pg.password("wrong-secret");
    let shown = bounded(failures(&pg, Some(&SqlState::INVALID_PASSWORD))).await;
    assert_names(
        &shown,
        &format!("127.0.0.1:{}", cluster.port()),
        "password authentication failed for user \"app\"",
    );
    for (_, text) in &shown {
        assert!(!text.contains("secret"), "{text}");
    }
}

#[tokio::test]
#[ignore = "needs DATABASE_URL"]
async fn a_missing_database_is_named_with_the_host() {
    let pg: tokio_postgres::Config = "postgres://postgres@127.0.0.1:5432/no_such_db_xyz"
        .parse()
        .expect("url");
    let shown = bounded(failures(&pg, Some(&SqlState::INVALID_CATALOG_NAME))).await;
    assert_names(
        &shown,
        "127.0.0.1:5432",
        "database \"no_such_db_xyz\" does not exist",
    );
}

#[tokio::test]
async fn a_refused_port_is_named_with_the_host() {
    let port = cluster::free_port();
    let pg = cluster::tcp_config_at(port, "app", "app");
    let shown = bounded(failures(&pg, None)).await;
    assert_names(
        &shown,
        &format!("127.0.0.1:{port}"),
        "Connection refused (os error 111)",
    );
}

#[tokio::test]
async fn the_connect_warning_names_the_cause_and_the_host() {
    let port = cluster::free_port();
    let (logs, _guard) = crate::support::logs::capture();
    let pool = Pool::new_lazy(
        PostgresManager::new(cluster::tcp_config_at(port, "app", "app"), NoTls),
        PoolConfig::builder()
            .max_size(1)
            .acquire_timeout(Duration::from_millis(500))
            .build()
            .expect("config"),
    );
    let _ = bounded(pool.get()).await.expect_err("nothing listens");
    let warned = logs.records_with("connect failed");
    assert!(!warned.is_empty(), "{}", logs.text());
    for record in warned {
        assert!(
            record.contains(&format!(
                "connect to 127.0.0.1:{port} failed: Connection refused (os error 111)"
            )),
            "{record}"
        );
        assert_eq!(record.matches("Connection refused").count(), 1, "{record}");
        assert!(!record.contains("error connecting to server"), "{record}");
    }
    pool.close().await;
}
