//! PostgresManager's reset on return, checked on the server: a connection
//! that comes back inside a transaction is not handed on inside it.
#![cfg(feature = "tokio-postgres")]

use crate::support;
use futures::FutureExt;
use pool_core::ManageConnection;
use pool_postgres::{PgClient, PostgresManager, ResetMode};
use tokio_postgres::NoTls;

fn manager(url: &str, mode: ResetMode) -> PostgresManager<NoTls> {
    PostgresManager::new(support::pg::config(url), NoTls).reset_mode(mode)
}

/// What the pool does when a connection comes back: reset it if the manager
/// says it is dirty.
async fn give_back(m: &PostgresManager<NoTls>, conn: &mut PgClient) {
    assert!(!m.has_broken(conn), "connection broke");
    if m.needs_reset(conn) {
        m.reset(conn).await.expect("reset");
    }
}

async fn txid(conn: &PgClient) -> Option<i64> {
    conn.query_one("SELECT txid_current_if_assigned()", &[])
        .await
        .expect("txid_current_if_assigned()")
        .get(0)
}

/// Writes, so the current transaction (if any) gets a txid.
async fn write(conn: &PgClient, table: &str) {
    conn.batch_execute(&format!("INSERT INTO {table} VALUES (1)"))
        .await
        .expect("insert");
}

/// A table of the test's own, dropped when the guard goes (panics too).
async fn temp_table(conn: &PgClient) -> support::db::Table {
    let table = support::db::Table::postgres("reset_t");
    conn.batch_execute(&format!("CREATE TABLE {table} (x int)"))
        .await
        .expect("create table");
    table
}

async fn drop_table(conn: &PgClient, table: &str) {
    conn.batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .expect("drop table");
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn dropped_transaction_is_rolled_back_and_not_idle_in_transaction() {
    let url = support::db::url("DATABASE_URL");
    let admin = support::pg::admin(&url).await;
    let m = manager(&url, ResetMode::Rollback);
    let mut conn = m.connect().await.expect("connect");
    let pid = support::pg::backend_pid(&conn).await;
    let table = temp_table(&conn).await;

    assert!(!m.needs_reset(&mut conn), "a fresh connection is clean");
    {
        let tx = conn.transaction().await.expect("begin");
        tx.batch_execute(&format!("INSERT INTO {table} VALUES (1)"))
            .await
            .expect("insert in tx");
        // dropped without commit
    }
    assert!(m.needs_reset(&mut conn), "a begun transaction is tracked");
    give_back(&m, &mut conn).await;
    assert!(!m.needs_reset(&mut conn), "reset clears the mark");

    // From the server's side, the connection is idle, not idle in transaction.
    assert_eq!(
        support::pg::backend_state(&admin, pid).await.as_deref(),
        Some("idle")
    );
    // And the next user is outside any transaction: a write gets no txid
    // that outlives its own statement.
    write(&conn, table.name()).await;
    assert_eq!(txid(&conn).await, None);
    let rows: i64 = conn
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 1, "the dropped transaction's insert was rolled back");
    drop_table(&conn, table.name()).await;
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn leaked_transaction_is_rolled_back_in_rollback_mode_only() {
    let url = support::db::url("DATABASE_URL");
    // With no reset, a transaction that is never dropped (so tokio-postgres
    // queues no ROLLBACK) is handed on to the next user: the hazard the
    // Rollback mode exists for.
    let m = manager(&url, ResetMode::None);
    let mut conn = m.connect().await.expect("connect");
    let table = temp_table(&conn).await;
    std::mem::forget(conn.transaction().await.expect("begin"));
    give_back(&m, &mut conn).await;
    write(&conn, table.name()).await;
    assert!(
        txid(&conn).await.is_some(),
        "without reset the next user is inside the leaked transaction"
    );
    conn.batch_execute("ROLLBACK").await.expect("rollback");

    let m = manager(&url, ResetMode::Rollback);
    let mut conn = m.connect().await.expect("connect");
    std::mem::forget(conn.transaction().await.expect("begin"));
    assert!(m.needs_reset(&mut conn));
    give_back(&m, &mut conn).await;
    write(&conn, table.name()).await;
    assert_eq!(txid(&conn).await, None, "reset left the transaction");
    drop_table(&conn, table.name()).await;
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn only_unfinished_transactions_need_a_reset() {
    let url = support::db::url("DATABASE_URL");
    let m = manager(&url, ResetMode::Rollback);
    let mut conn = m.connect().await.expect("connect");
    let table = temp_table(&conn).await;

    let tx = conn.transaction().await.expect("begin");
    tx.batch_execute(&format!("INSERT INTO {table} VALUES (1)"))
        .await
        .expect("insert");
    tx.commit().await.expect("commit");
    assert!(
        !m.needs_reset(&mut conn),
        "a committed transaction is clean"
    );

    let tx = conn
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::Serializable)
        .read_only(true)
        .start()
        .await
        .expect("begin");
    tx.rollback().await.expect("rollback");
    assert!(
        !m.needs_reset(&mut conn),
        "a rolled back transaction is clean"
    );

    // A begin cancelled after START TRANSACTION went out.
    assert!(
        conn.transaction().now_or_never().is_none(),
        "begin in flight"
    );
    assert!(m.needs_reset(&mut conn), "a cancelled begin is dirty");
    give_back(&m, &mut conn).await;
    write(&conn, table.name()).await;
    assert_eq!(txid(&conn).await, None);

    // A savepoint inside keeps the outer transaction tracked.
    {
        let mut tx = conn.transaction().await.expect("begin");
        let sp = tx.transaction().await.expect("savepoint");
        sp.commit().await.expect("release savepoint");
    }
    assert!(
        m.needs_reset(&mut conn),
        "the outer transaction was dropped"
    );
    give_back(&m, &mut conn).await;
    drop_table(&conn, table.name()).await;
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn raw_begin_needs_a_mode_that_checks_every_return() {
    let url = support::db::url("DATABASE_URL");
    // Rollback mode cannot see a BEGIN sent as SQL, and says so.
    let m = manager(&url, ResetMode::Rollback);
    let mut conn = m.connect().await.expect("connect");
    conn.batch_execute("BEGIN").await.expect("begin");
    assert!(!m.needs_reset(&mut conn));
    conn.batch_execute("ROLLBACK").await.expect("rollback");

    for mode in [ResetMode::RollbackAlways, ResetMode::Clean] {
        let admin = support::pg::admin(&url).await;
        let m = manager(&url, mode);
        let mut conn = m.connect().await.expect("connect");
        let pid = support::pg::backend_pid(&conn).await;
        let table = temp_table(&conn).await;
        conn.batch_execute("BEGIN").await.expect("begin");
        write(&conn, table.name()).await;
        assert!(txid(&conn).await.is_some());
        assert_eq!(
            support::pg::backend_state(&admin, pid).await.as_deref(),
            Some("idle in transaction")
        );
        assert!(m.needs_reset(&mut conn), "{mode:?} resets every return");
        give_back(&m, &mut conn).await;
        assert_eq!(
            support::pg::backend_state(&admin, pid).await.as_deref(),
            Some("idle"),
            "{mode:?}"
        );
        write(&conn, table.name()).await;
        assert_eq!(txid(&conn).await, None, "{mode:?}");
        drop_table(&conn, table.name()).await;
    }
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn failed_transaction_is_recovered() {
    let url = support::db::url("DATABASE_URL");
    for mode in [
        ResetMode::Rollback,
        ResetMode::RollbackAlways,
        ResetMode::Clean,
    ] {
        let m = manager(&url, mode);
        let mut conn = m.connect().await.expect("connect");
        {
            let tx = conn.transaction().await.expect("begin");
            assert!(tx.batch_execute("SELECT 1/0").await.is_err());
            std::mem::forget(tx); // no ROLLBACK queued: only the reset helps
        }
        give_back(&m, &mut conn).await;
        let one: i32 = conn
            .query_one("SELECT 1", &[])
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: connection still in the failed transaction: {e}"))
            .get(0);
        assert_eq!(one, 1);
    }
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn clean_mode_restores_the_session() {
    let url = support::db::url("DATABASE_URL");
    let admin = support::pg::admin(&url).await;
    let m = manager(&url, ResetMode::Clean);
    let mut conn = m.connect().await.expect("connect");
    let pid = support::pg::backend_pid(&conn).await;
    let stmt = conn
        .prepare_cached("SELECT $1::int + 1")
        .await
        .expect("prepare");

    conn.batch_execute(
        "SET statement_timeout = '1234ms'; \
         CREATE TEMP TABLE scratch (x int); \
         CREATE TEMP SEQUENCE scratch_seq; \
         LISTEN some_channel; \
         SELECT pg_advisory_lock(424242); \
         BEGIN; DECLARE c CURSOR WITH HOLD FOR SELECT 1; COMMIT",
    )
    .await
    .expect("dirty the session");
    give_back(&m, &mut conn).await;

    let row = conn
        .query_one(
            "SELECT current_setting('statement_timeout'), \
                    to_regclass('pg_temp.scratch') IS NULL, \
                    (SELECT count(*) FROM pg_listening_channels()), \
                    (SELECT count(*) FROM pg_cursors WHERE name = 'c')",
            &[],
        )
        .await
        .expect("inspect session");
    assert_eq!(row.get::<_, String>(0), "0", "settings reset");
    assert!(row.get::<_, bool>(1), "temp table discarded");
    assert_eq!(row.get::<_, i64>(2), 0, "unlistened");
    assert_eq!(row.get::<_, i64>(3), 0, "cursors closed");
    let locks: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1",
            &[&pid],
        )
        .await
        .expect("pg_locks")
        .get(0);
    assert_eq!(locks, 0, "advisory locks released");

    // Prepared statements survive Clean, so the cache stays valid.
    let two: i32 = conn
        .query_one(&stmt, &[&1i32])
        .await
        .expect("cached statement still prepared")
        .get(0);
    assert_eq!(two, 2);
}

#[tokio::test]
#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
async fn none_mode_never_asks_for_a_reset() {
    let url = support::db::url("DATABASE_URL");
    let m = manager(&url, ResetMode::None);
    let mut conn = m.connect().await.expect("connect");
    drop(conn.transaction().await.expect("begin"));
    assert!(!m.needs_reset(&mut conn));
    conn.batch_execute("BEGIN").await.expect("begin");
    assert!(!m.needs_reset(&mut conn));
}
