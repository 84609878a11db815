//! PostgresManager's connect, validation, breakage detection, statement
//! cache and secrecy, called directly as the pool would.
#![cfg(feature = "tokio-postgres")]

use crate::support;
use std::time::Duration;

use pool_core::ManageConnection;
use pool_postgres::PostgresManager;
use tokio_postgres::NoTls;

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn connects_validates_and_sees_a_terminated_backend() {
    let (m, mut conn, admin) = support::pg::connected_manager().await;
    m.is_valid(&mut conn)
        .await
        .expect("fresh connection is valid");
    assert!(!m.has_broken(&mut conn));
    let pid = support::pg::backend_pid(&conn).await;

    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .expect("terminate");
    // The client learns of it when the connection task reads the socket.
    let noticed = support::db::eventually(Duration::from_secs(5), || {
        let closed = conn.is_closed();
        async move { closed }
    })
    .await;
    assert!(noticed, "the client saw its backend go away");
    assert!(m.has_broken(&mut conn));
    assert!(m.is_valid(&mut conn).await.is_err());
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn is_valid_fails_once_the_backend_is_gone_even_before_the_client_knows() {
    let (m, mut conn, admin) = support::pg::connected_manager().await;
    let pid = support::pg::backend_pid(&conn).await;
    support::pg::terminate(&admin, pid).await;
    assert!(m.is_valid(&mut conn).await.is_err());
    assert!(
        m.has_broken(&mut conn),
        "a failed query marks the client closed"
    );
}

/// Statements prepared on this connection, as the server counts them
/// (asked through the simple protocol, which prepares nothing itself).
async fn prepared_on_server(conn: &tokio_postgres::Client) -> usize {
    let messages = conn
        .simple_query("SELECT count(*) FROM pg_prepared_statements")
        .await
        .expect("pg_prepared_statements");
    messages
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .expect("a count")
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn prepare_cached_reuses_statements_per_connection() {
    let url = support::db::url("DATABASE_URL");
    let m = PostgresManager::new(support::pg::config(&url), NoTls);
    let conn = m.connect().await.expect("connect");
    let a = conn
        .prepare_cached("SELECT $1::int")
        .await
        .expect("prepare");
    let b = conn
        .prepare_cached("SELECT $1::int")
        .await
        .expect("prepare");
    assert_eq!(conn.statement_cache_len(), 1);
    assert_eq!(
        prepared_on_server(&conn).await,
        1,
        "second call hits the cache"
    );
    let n: i32 = conn.query_one(&b, &[&7i32]).await.expect("query").get(0);
    assert_eq!(n, 7);

    // Another connection has its own cache.
    let other = m.connect().await.expect("connect");
    assert_eq!(other.statement_cache_len(), 0);
    assert_eq!(prepared_on_server(&other).await, 0);

    conn.clear_statement_cache();
    assert_eq!(conn.statement_cache_len(), 0);
    // A statement dropped from the cache but still held stays usable.
    let n: i32 = conn.query_one(&a, &[&8i32]).await.expect("query").get(0);
    assert_eq!(n, 8);
    drop((a, b));
    assert_eq!(prepared_on_server(&conn).await, 0, "closed once unused");
    conn.prepare_cached("SELECT $1::int")
        .await
        .expect("prepare");
    assert_eq!(conn.statement_cache_len(), 1);
    assert_eq!(prepared_on_server(&conn).await, 1, "prepared afresh");
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn statement_cache_respects_its_capacity() {
    let url = support::db::url("DATABASE_URL");
    let off = PostgresManager::new(support::pg::config(&url), NoTls).statement_cache_capacity(0);
    let conn = off.connect().await.expect("connect");
    let _a = conn.prepare_cached("SELECT 1").await.expect("prepare");
    let _b = conn.prepare_cached("SELECT 1").await.expect("prepare");
    assert_eq!(conn.statement_cache_len(), 0);
    assert_eq!(prepared_on_server(&conn).await, 2, "each call prepared");

    let one = PostgresManager::new(support::pg::config(&url), NoTls).statement_cache_capacity(1);
    let conn = one.connect().await.expect("connect");
    conn.prepare_cached("SELECT 1").await.expect("prepare");
    conn.prepare_cached("SELECT 2").await.expect("prepare");
    assert_eq!(conn.statement_cache_len(), 1, "full cache takes no more");
    assert_eq!(
        prepared_on_server(&conn).await,
        1,
        "the uncached one was closed"
    );
}

#[tokio::test]
async fn no_password_in_debug_or_errors() {
    const SECRET: &str = "hunter2-do-not-print";
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(1) // nothing listens there
        .user("app")
        .password(SECRET)
        .dbname("shop")
        .connect_timeout(Duration::from_secs(2));
    let m = PostgresManager::new(config, NoTls);
    let debug = format!("{m:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(
        debug.contains("<redacted>"),
        "says a password is set: {debug}"
    );
    assert!(debug.contains("shop"), "{debug}");

    let err = m.connect().await.expect_err("nothing listens on port 1");
    assert_no_secret(&err, SECRET);
}

#[tokio::test]
async fn unreachable_server_times_out_with_the_cause_and_no_password() {
    const SECRET: &str = "pool-secret-do-not-print";
    let mut pg = tokio_postgres::Config::new();
    pg.host("127.0.0.1")
        .port(1) // nothing listens there
        .user("app")
        .password(SECRET)
        .connect_timeout(Duration::from_secs(2));
    let config = pool_core::PoolConfig::builder()
        .max_size(2)
        .acquire_timeout(Duration::from_millis(500))
        // The timeout with the cause inside; fail fast is `fail_fast.rs`.
        .fail_fast(false)
        .build()
        .expect("config");

    let err = pool_core::Pool::new(PostgresManager::new(pg.clone(), NoTls), config.clone())
        .await
        .expect_err("Pool::new fails fast");
    assert!(matches!(err, pool_core::PoolError::Backend(_)), "{err:?}");
    assert_no_secret(&err, SECRET);

    let pool = pool_core::Pool::new_lazy(PostgresManager::new(pg, NoTls), config);
    assert!(!format!("{pool:?}").contains(SECRET));
    let err = pool.get().await.expect_err("nothing to connect to");
    assert!(err.is_timeout(), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("; last error: connect to 127.0.0.1:1 failed: Connection refused"),
        "the connect error is in the message: {text}"
    );
    assert_no_secret(&err, SECRET);
}

fn assert_no_secret(err: &(dyn std::error::Error + 'static), secret: &str) {
    let mut texts = vec![err.to_string(), format!("{err:?}")];
    let mut source = err.source();
    while let Some(e) = source {
        texts.push(e.to_string());
        texts.push(format!("{e:?}"));
        source = e.source();
    }
    for text in texts {
        assert!(!text.contains(secret), "{text}");
    }
}
