//! What a query through `&pool` fails with when the connect fails: the
//! error sqlx made, with its variant and SQLSTATE (a refused login, a
//! database that does not exist) or its I/O kind (a refused port), and its
//! text once, even when the failure reached other callers too; the pool's
//! own failures are sqlx's nearest variants.

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, SqlxManager};
use super::drivers::sqlx;
use super::drivers::sqlx::PgConnection;
use crate::support::cluster;
use crate::support::db::bounded;
use pool_core::{ManageConnection, PoolConfig, PoolError};

/// The error of `SELECT 1` through `&pool`, on a lazy pool for `url` (so
/// the failure is the connect of the query's own checkout, with fail fast).
async fn query_error(url: &str) -> sqlx::Error {
    let manager = SqlxManager::<PgConnection>::from_url(url).expect("url");
    let config = PoolConfig::builder()
        .max_size(2)
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    let pool = SqlxPool::new_lazy(manager, config);
    let err = bounded(sqlx::query("SELECT 1").fetch_one(&pool))
        .await
        .expect_err("the connect fails");
    pool.close().await;
    err
}

/// A `Database` error with `code`, whose text says `message` once and is
/// sqlx's own (no prefix of another variant).
fn assert_database(err: &sqlx::Error, code: &str, message: &str) {
    let sqlx::Error::Database(db) = err else {
        panic!("a Database error, as sqlx made it: {err:?}");
    };
    assert_eq!(db.code().as_deref(), Some(code), "{err:?}");
    assert!(db.message().contains(message), "{err:?}");
    let text = err.to_string();
    assert_eq!(text.matches(message).count(), 1, "{text}");
    assert!(text.starts_with("error returned from database: "), "{text}");
    assert!(!text.contains("communicating"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_wrong_password_stays_a_database_error() {
    let cluster = cluster::Cluster::spawn().await;
    let _admin = cluster.admin_with_login("app", "right-secret").await;
    let url = format!(
        "postgres://app:wrong-secret@127.0.0.1:{}/postgres",
        cluster.port()
    );
    let err = query_error(&url).await;
    assert_database(
        &err,
        "28P01",
        "password authentication failed for user \"app\"",
    );
}

#[tokio::test]
#[ignore = "needs DATABASE_URL"]
async fn a_missing_database_stays_a_database_error() {
    let err = query_error("postgres://postgres@127.0.0.1:5432/no_such_db_xyz").await;
    assert_database(&err, "3D000", "database \"no_such_db_xyz\" does not exist");
}

#[tokio::test]
async fn a_refused_port_is_one_io_error() {
    let port = cluster::free_port();
    let err = query_error(&format!("postgres://app@127.0.0.1:{port}/app")).await;
    let sqlx::Error::Io(io) = &err else {
        panic!("an Io error: {err:?}");
    };
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused, "{err:?}");
    let text = err.to_string();
    assert_eq!(
        text.matches("error communicating with database").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("Connection refused").count(), 1, "{text}");
}

#[tokio::test]
async fn a_closed_pool_is_pool_closed() {
    let manager =
        SqlxManager::<PgConnection>::from_url("postgres://app@127.0.0.1:1/app").expect("url");
    let pool = SqlxPool::new_lazy(manager, PoolConfig::default());
    pool.close().await;
    let err = bounded(sqlx::query("SELECT 1").fetch_one(&pool))
        .await
        .expect_err("closed");
    assert!(matches!(err, sqlx::Error::PoolClosed), "{err:?}");
}

/// What the manager's connect and `Pool::new` fail with for `url`, and the
/// query through `&pool`: each text names where the connect went and the
/// cause, with one prefix of sqlx's and no second one of the pool's. The
/// manager's error and the query's, in that order.
async fn assert_named(url: &str, host: &str, cause: &str) -> (sqlx::Error, sqlx::Error) {
    let manager = SqlxManager::<PgConnection>::from_url(url).expect("url");
    let own = bounded(manager.connect()).await.expect_err("connect fails");
    let config = PoolConfig::builder()
        .max_size(1)
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    let manager = SqlxManager::<PgConnection>::from_url(url).expect("url");
    let pool_err = bounded(SqlxPool::new(manager, config))
        .await
        .expect_err("Pool::new fails");
    assert!(matches!(pool_err, PoolError::Backend(_)), "{pool_err:?}");
    let query = query_error(url).await;
    let named = format!("connect to {host} failed: {cause}");
    for (what, text) in [
        ("SqlxManager", own.to_string()),
        ("Pool::new", pool_err.to_string()),
        ("&pool", query.to_string()),
    ] {
        // sqlx 0.9 adds the server's source line (` at line 334`) after
        // the message.
        assert!(text.contains(&format!(": {named}")), "{what}: {text}");
        assert_eq!(text.matches(": ").count(), 2, "{what}: one prefix: {text}");
    }
    (own, query)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs initdb: install the PostgreSQL server or set PG_BIN_DIR, and run with --ignored"]
async fn a_wrong_password_names_the_host() {
    let cluster = cluster::Cluster::spawn().await;
    let _admin = cluster.admin_with_login("app", "right-secret").await;
    let host = format!("127.0.0.1:{}", cluster.port());
    let url = format!("postgres://app:wrong-secret@{host}/postgres");
    let (own, query) = assert_named(
        &url,
        &host,
        "password authentication failed for user \"app\"",
    )
    .await;
    // Still the driver's own error underneath: a downcast finds it.
    let db = own.as_database_error().expect("a Database error");
    let pg = db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .expect("sqlx's PgDatabaseError");
    assert_eq!(pg.code(), "28P01");
    let db = query.as_database_error().expect("a Database error");
    assert_eq!(db.code().as_deref(), Some("28P01"), "{query:?}");
    assert!(!query.to_string().contains("secret"), "{query}");
}

#[tokio::test]
#[ignore = "needs DATABASE_URL"]
async fn a_missing_database_names_the_host() {
    let (_, err) = assert_named(
        "postgres://postgres@127.0.0.1:5432/no_such_db_xyz",
        "127.0.0.1:5432",
        "database \"no_such_db_xyz\" does not exist",
    )
    .await;
    let db = err.as_database_error().expect("a Database error");
    assert_eq!(db.code().as_deref(), Some("3D000"), "{err:?}");
}

#[tokio::test]
async fn a_refused_port_names_the_host() {
    let port = cluster::free_port();
    let host = format!("127.0.0.1:{port}");
    let (_, err) = assert_named(
        &format!("postgres://app@{host}/app"),
        &host,
        "Connection refused (os error 111)",
    )
    .await;
    assert!(matches!(err, sqlx::Error::Io(_)), "{err:?}");
}
