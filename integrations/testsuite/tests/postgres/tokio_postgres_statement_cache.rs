//! The tokio-postgres statement cache as a bounded LRU, checked on the
//! server: eviction order, counts, and queries past capacity.
#![cfg(feature = "tokio-postgres")]

use pool_core::ManageConnection;
use pool_postgres::{PgClient, PostgresManager};
use tokio_postgres::NoTls;

/// A manager on `DATABASE_URL` whose statement cache holds `capacity`.
fn manager(capacity: usize) -> PostgresManager<NoTls> {
    let url = crate::support::db::url("DATABASE_URL");
    PostgresManager::new(url.parse().expect("DATABASE_URL"), NoTls)
        .statement_cache_capacity(capacity)
}

/// The statements prepared on the server for this connection, by text.
async fn on_server(conn: &PgClient) -> Vec<String> {
    let rows = conn
        .query(
            "SELECT statement FROM pg_prepared_statements ORDER BY statement",
            &[],
        )
        .await
        .expect("pg_prepared_statements");
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn evicts_the_least_recently_used_and_closes_it_on_the_server() {
    let m = manager(2);
    let conn = m.connect().await.expect("connect");

    conn.prepare_cached("SELECT 1").await.expect("prepare");
    conn.prepare_cached("SELECT 2").await.expect("prepare");
    // Touch "SELECT 1": "SELECT 2" becomes the least recently used.
    conn.prepare_cached("SELECT 1").await.expect("hit");
    conn.prepare_cached("SELECT 3").await.expect("prepare");

    let stats = conn.statement_cache_stats();
    assert_eq!(
        (
            stats.hits,
            stats.misses,
            stats.evictions,
            stats.len,
            stats.capacity
        ),
        (1, 3, 1, 2, 2),
        "{stats:?}"
    );
    // The close of the evicted statement is queued before this query.
    let server = on_server(&conn).await;
    assert!(
        server.iter().any(|s| s == "SELECT 1") && server.iter().any(|s| s == "SELECT 3"),
        "{server:?}"
    );
    assert!(
        !server.iter().any(|s| s == "SELECT 2"),
        "evicted one still prepared: {server:?}"
    );
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn queries_past_capacity_stay_correct_and_the_cache_stays_bounded() {
    let m = manager(8);
    let conn = m.connect().await.expect("connect");

    // 40 distinct statements, cycled three times: far past the capacity.
    for round in 0..3 {
        for i in 0..40_i32 {
            let sql = format!("SELECT $1::int + {i}");
            let statement = conn.prepare_cached(&sql).await.expect("prepare");
            let got: i32 = conn
                .query_one(&statement, &[&round])
                .await
                .expect("query")
                .get(0);
            assert_eq!(got, round + i, "{sql} with {round}");
        }
    }
    let stats = conn.statement_cache_stats();
    assert_eq!(stats.len, 8);
    assert_eq!(
        stats.misses, 120,
        "a cyclic scan past capacity always misses"
    );
    assert_eq!(stats.evictions, 112);
    // Drop our handle of the last statement so only the cache holds any.
    let server = on_server(&conn).await;
    assert!(
        server.len() <= 9,
        "evicted statements were closed: {server:?}"
    );

    // A hot statement stays cached among cold ones.
    let before = conn.statement_cache_stats();
    for i in 0..20_i32 {
        conn.prepare_cached("SELECT $1::int").await.expect("hot");
        conn.prepare_cached(&format!("SELECT $1::int * {i}"))
            .await
            .expect("cold");
    }
    let after = conn.statement_cache_stats();
    assert_eq!(
        after.hits - before.hits,
        19,
        "the hot one hit on every call but the first"
    );
}
