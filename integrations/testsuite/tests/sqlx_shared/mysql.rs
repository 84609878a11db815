//! `SqlxManager<MySqlConnection>` against a real MariaDB/MySQL (`MYSQL_URL`):
//! a connection returned inside a transaction is rolled back before reuse.

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, ResetMode, SqlxManager};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, Executor, MySqlConnection};
use super::probes::server_in_transaction;
use crate::support::db::{bounded, sql, unique, Table};
use futures::FutureExt;
use pool_core::ManageConnection;

/// The test's own table (its guard, dropping it on every path, comes
/// first: bound as `let (table, manager)`, it goes after the connections)
/// and a manager in `mode`.
async fn manager(mode: ResetMode) -> (Table, SqlxManager<MySqlConnection>) {
    let table = Table::mysql("pool_core_sqlx_mysql_reset");
    let url = crate::support::db::url("MYSQL_URL");
    let manager = SqlxManager::<MySqlConnection>::from_url(&url)
        .expect("MYSQL_URL parses")
        .reset_mode(mode);
    let mut conn = manager.connect().await.expect("MariaDB is reachable");
    conn.execute(sql(format!(
        "CREATE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(128) NOT NULL)"
    )))
    .await
    .unwrap();
    (table, manager)
}

async fn insert(conn: &mut MySqlConnection, table: &str, tag: &str) {
    sqlx::query(sql(format!("INSERT INTO {table} (tag) VALUES (?)")))
        .bind(tag)
        .execute(conn)
        .await
        .unwrap();
}

/// Rows with `tag`, as another session sees them (committed ones only).
async fn committed_rows(monitor: &mut MySqlConnection, table: &str, tag: &str) -> i64 {
    sqlx::query_scalar(sql(format!("SELECT COUNT(*) FROM {table} WHERE tag = ?")))
        .bind(tag)
        .fetch_one(monitor)
        .await
        .unwrap()
}

async fn give_back(manager: &SqlxManager<MySqlConnection>, conn: &mut MySqlConnection) -> bool {
    let dirty = manager.needs_reset(conn);
    if dirty {
        manager.reset(conn).await.expect("reset succeeds");
    }
    dirty
}

/// Asserts that what was written in the abandoned transaction is gone and
/// that the next user's writes commit on their own (no transaction open).
async fn assert_clean(
    monitor: &mut MySqlConnection,
    conn: &mut MySqlConnection,
    table: &str,
    tag: &str,
) {
    assert!(!server_in_transaction(conn).await);
    assert_eq!(
        committed_rows(monitor, table, tag).await,
        0,
        "abandoned write was rolled back"
    );
    let next = format!("{tag}-next");
    insert(conn, table, &next).await;
    assert_eq!(
        committed_rows(monitor, table, &next).await,
        1,
        "next write commits by itself"
    );
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn clean_returns_need_no_reset() {
    let (table, manager) = manager(ResetMode::Tracked).await;
    let table = table.name();
    bounded(async {
        let mut conn = manager.connect().await.unwrap();
        manager.is_valid(&mut conn).await.unwrap();
        assert!(!manager.needs_reset(&mut conn));
        let mut tx = conn.begin().await.unwrap();
        insert(&mut tx, table, &unique("mysql-clean")).await;
        tx.commit().await.unwrap();
        assert!(!manager.needs_reset(&mut conn));
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn dropped_transaction_is_rolled_back() {
    let (table, manager) = manager(ResetMode::Tracked).await;
    let table = table.name();
    bounded(async {
        let mut monitor = manager.connect().await.unwrap();
        let mut conn = manager.connect().await.unwrap();
        let tag = unique("mysql-dropped");

        let mut tx = conn.begin().await.unwrap();
        insert(&mut tx, table, &tag).await;
        drop(tx);

        assert!(give_back(&manager, &mut conn).await);
        assert_clean(&mut monitor, &mut conn, table, &tag).await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn forgotten_nested_transactions_are_rolled_back() {
    let (table, manager) = manager(ResetMode::Tracked).await;
    let table = table.name();
    bounded(async {
        let mut monitor = manager.connect().await.unwrap();
        let mut conn = manager.connect().await.unwrap();
        let tag = unique("mysql-forgotten");

        let mut tx = conn.begin().await.unwrap();
        insert(&mut tx, table, &tag).await;
        let inner = tx.begin().await.unwrap();
        std::mem::forget(inner);
        std::mem::forget(tx);

        assert!(give_back(&manager, &mut conn).await);
        assert_clean(&mut monitor, &mut conn, table, &tag).await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn raw_begin_is_caught_in_strict_mode() {
    let (table, manager) = manager(ResetMode::Strict).await;
    let table = table.name();
    bounded(async {
        let mut monitor = manager.connect().await.unwrap();
        let mut conn = manager.connect().await.unwrap();
        let tag = unique("mysql-raw");

        conn.execute("BEGIN").await.unwrap();
        insert(&mut conn, table, &tag).await;
        assert!(!conn.is_in_transaction(), "sqlx does not see a raw BEGIN");

        assert!(give_back(&manager, &mut conn).await);
        assert_clean(&mut monitor, &mut conn, table, &tag).await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn cancelled_begins_are_caught_in_strict_mode() {
    let (table, manager) = manager(ResetMode::Strict).await;
    let table = table.name();
    bounded(async {
        let mut monitor = manager.connect().await.unwrap();
        let mut conn = manager.connect().await.unwrap();
        for round in 0..30u64 {
            if round % 2 == 0 {
                let _ = conn.begin().now_or_never();
            } else {
                let limit = Duration::from_micros(25 * round);
                let _ = tokio::time::timeout(limit, conn.begin()).await;
            }
            assert!(give_back(&manager, &mut conn).await);
            let tag = unique("mysql-cancelled");
            assert_clean(&mut monitor, &mut conn, table, &tag).await;
        }
    })
    .await;
}

/// A pool of one connection, so every checkout gets the same session.
async fn single(manager: SqlxManager<MySqlConnection>) -> SqlxPool<MySqlConnection> {
    let config = crate::support::db::named_config("mysql-reset", 1, Duration::from_secs(10));
    SqlxPool::new(manager, config)
        .await
        .expect("MariaDB is reachable")
}

async fn session_id(conn: &mut MySqlConnection) -> u64 {
    sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(conn)
        .await
        .unwrap()
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_runs_concurrent_queries_within_max_size() {
    let (table, manager) = manager(ResetMode::Tracked).await;
    let table = table.name();
    bounded(async {
        let config =
            crate::support::db::named_config("mysql-concurrency", 3, Duration::from_secs(30));
        let pool = SqlxPool::new(manager, config).await.unwrap();
        let tag = unique("mysql-concurrent");
        let tasks: Vec<_> = (0..24)
            .map(|_| {
                let (pool, tag) = (pool.clone(), tag.clone());
                tokio::spawn(async move {
                    for _ in 0..5 {
                        let mut conn = pool.get().await.unwrap();
                        let m = pool.metrics();
                        assert!(m.total <= m.max_size, "{m:?}");
                        insert(&mut conn, table, &tag).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let mut conn = pool.get().await.unwrap();
        assert_eq!(committed_rows(&mut conn, table, &tag).await, 24 * 5);
        drop(conn);
        let m = pool.metrics();
        assert!(m.total <= 3 && m.in_use == 0, "{m:?}");
        pool.close().await;
    })
    .await;
}

#[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
#[tokio::test]
async fn pool_rolls_back_dropped_and_raw_transactions() {
    let (table, manager) = manager(ResetMode::Strict).await;
    let table = table.name();
    bounded(async {
        let mut monitor = manager.connect().await.unwrap();
        let pool = single(manager).await;
        let id = session_id(&mut pool.get().await.unwrap()).await;
        for round in 0..6 {
            let tag = unique("mysql-pool-reset");
            {
                let mut conn = pool.get().await.unwrap();
                if round % 2 == 0 {
                    let mut tx = conn.begin().await.unwrap();
                    insert(&mut tx, table, &tag).await;
                    drop(tx);
                } else {
                    conn.execute("BEGIN").await.unwrap();
                    insert(&mut conn, table, &tag).await;
                }
            }
            let mut conn = pool.get().await.unwrap();
            assert_eq!(session_id(&mut conn).await, id, "same session reused");
            assert_clean(&mut monitor, &mut conn, table, &tag).await;
        }
    })
    .await;
}

/// The text of what the manager's connect and `Pool::new` fail with for
/// `url`: each names where the connect went (`connect to <host> failed: `,
/// once) and `cause`, behind sqlx's own prefix only.
async fn assert_connect_named(url: &str, host: &str, cause: &str) -> sqlx::Error {
    let manager = SqlxManager::<MySqlConnection>::from_url(url).expect("url");
    let own = bounded(manager.connect()).await.expect_err("connect fails");
    let config = pool_core::PoolConfig::builder()
        .max_size(1)
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .expect("config");
    let manager = SqlxManager::<MySqlConnection>::from_url(url).expect("url");
    let pool_err = bounded(SqlxPool::new(manager, config))
        .await
        .expect_err("Pool::new fails");
    for (what, text) in [
        ("SqlxManager", own.to_string()),
        ("Pool::new", pool_err.to_string()),
    ] {
        let named = format!(": connect to {host} failed: ");
        assert!(text.contains(&named), "{what}: {text}");
        assert!(text.contains(cause), "{what}: {text}");
        assert_eq!(text.matches("connect").count(), 1, "{what}: {text}");
        assert_eq!(text.matches("database: ").count(), 1, "{what}: {text}");
    }
    own
}

/// `MYSQL_URL`'s host and port, and the URL with `user_info` and
/// `database` in place of its own.
fn mysql_at(user_info: &str, database: &str) -> (String, String) {
    let url = crate::support::db::url("MYSQL_URL");
    let rest = url.split_once("://").expect("a URL").1;
    let host = rest.split_once('@').map_or(rest, |(_, h)| h);
    let host = host.split(['/', '?']).next().expect("a host").to_owned();
    let host = if host.contains(':') {
        host
    } else {
        format!("{host}:3306")
    };
    (
        host.clone(),
        format!("mysql://{user_info}@{host}/{database}"),
    )
}

#[tokio::test]
#[ignore = "needs MYSQL_URL"]
async fn a_refused_login_names_the_host() {
    let (host, url) = mysql_at("pool_core_no_such_user:wrong-secret", "test");
    let err = assert_connect_named(
        &url,
        &host,
        "Access denied for user 'pool_core_no_such_user'",
    )
    .await;
    assert!(matches!(err, sqlx::Error::Database(_)), "{err:?}");
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[tokio::test]
#[ignore = "needs MYSQL_URL"]
async fn a_missing_database_names_the_host() {
    let url = crate::support::db::url("MYSQL_URL");
    let user = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .map_or("root", |(user, _)| user)
        .to_owned();
    let (host, url) = mysql_at(&user, "pool_core_no_such_db");
    let err = assert_connect_named(&url, &host, "Unknown database 'pool_core_no_such_db'").await;
    let db = err.as_database_error().expect("a Database error");
    assert_eq!(db.code().as_deref(), Some("42000"), "{err:?}");
}

#[tokio::test]
async fn a_refused_port_names_the_host() {
    let port = crate::support::cluster::free_port();
    let host = format!("127.0.0.1:{port}");
    let err = assert_connect_named(
        &format!("mysql://root@{host}/test"),
        &host,
        "Connection refused (os error 111)",
    )
    .await;
    assert!(matches!(err, sqlx::Error::Io(_)), "{err:?}");
}
