//! `SqlxManager<PgConnection>` against a real PostgreSQL (`DATABASE_URL`):
//! a connection that comes back inside a transaction, however it got there,
//! is not left in it, and a clean one is left alone.

use std::time::Duration;

use super::drivers::pool_sqlx::{ResetMode, SqlxManager};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, Executor, PgConnection};
use super::probes::{backend_pid, server_in_transaction, server_state};
use crate::support::db::bounded;
use futures::FutureExt;
use pool_core::ManageConnection;

fn manager(mode: ResetMode) -> SqlxManager<PgConnection> {
    let url = crate::support::db::url("DATABASE_URL");
    SqlxManager::<PgConnection>::from_url(&url)
        .expect("DATABASE_URL parses")
        .reset_mode(mode)
}

/// Returns `conn` as the pool would: reset it if the manager says so, and
/// report whether it did.
async fn give_back(manager: &SqlxManager<PgConnection>, conn: &mut PgConnection) -> bool {
    let dirty = manager.needs_reset(conn);
    if dirty {
        manager.reset(conn).await.expect("reset succeeds");
    }
    dirty
}

/// Asserts the server holds no transaction for `pid` and that the next user
/// of `conn` does not run inside one.
async fn assert_clean(monitor: &mut PgConnection, conn: &mut PgConnection, pid: i32) {
    assert_eq!(server_state(monitor, pid).await, "idle");
    assert!(!server_in_transaction(conn).await);
    assert!(!conn.is_in_transaction());
}

/// A connection to leave dirty, with its manager, a second session that
/// watches it from the server's side, and its backend's pid.
struct Watched {
    manager: SqlxManager<PgConnection>,
    monitor: PgConnection,
    conn: PgConnection,
    pid: i32,
}

async fn watched(mode: ResetMode) -> Watched {
    let manager = manager(mode);
    let monitor = manager.connect().await.unwrap();
    let mut conn = manager.connect().await.unwrap();
    let pid = backend_pid(&mut conn).await;
    Watched {
        manager,
        monitor,
        conn,
        pid,
    }
}

/// Gives `conn` back as the pool would and asserts it was reset (it came
/// back dirty) and is clean now.
async fn assert_reset_clean(
    manager: &SqlxManager<PgConnection>,
    monitor: &mut PgConnection,
    conn: &mut PgConnection,
    pid: i32,
) {
    assert!(give_back(manager, conn).await);
    assert_clean(monitor, conn, pid).await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn clean_returns_need_no_reset() {
    let manager = manager(ResetMode::Tracked);
    bounded(async {
        let mut conn = manager.connect().await.unwrap();
        manager.is_valid(&mut conn).await.unwrap();
        assert!(!manager.needs_reset(&mut conn));

        conn.execute("SELECT 1").await.unwrap();
        assert!(!manager.needs_reset(&mut conn));

        let mut tx = conn.begin().await.unwrap();
        tx.execute("SELECT txid_current()").await.unwrap();
        tx.commit().await.unwrap();
        assert!(!manager.needs_reset(&mut conn));

        let tx = conn.begin().await.unwrap();
        tx.rollback().await.unwrap();
        assert!(!manager.needs_reset(&mut conn));
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn dropped_transaction_is_rolled_back() {
    bounded(async {
        let Watched {
            manager,
            mut monitor,
            mut conn,
            pid,
        } = watched(ResetMode::Tracked).await;

        let mut tx = conn.begin().await.unwrap();
        tx.execute("SELECT txid_current()").await.unwrap();
        drop(tx);
        // The queued ROLLBACK has not left yet: the server still holds the
        // transaction when the connection comes back.
        assert_eq!(server_state(&mut monitor, pid).await, "idle in transaction");

        assert_reset_clean(&manager, &mut monitor, &mut conn, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn forgotten_nested_transactions_are_rolled_back() {
    bounded(async {
        let Watched {
            manager,
            mut monitor,
            mut conn,
            pid,
        } = watched(ResetMode::Tracked).await;

        let mut tx = conn.begin().await.unwrap();
        tx.execute("SELECT txid_current()").await.unwrap();
        let inner = tx.begin().await.unwrap();
        // Leaked: no rollback is queued, sqlx still counts two levels.
        std::mem::forget(inner);
        std::mem::forget(tx);
        assert!(conn.is_in_transaction());

        assert_reset_clean(&manager, &mut monitor, &mut conn, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn begin_cancelled_while_server_is_busy_is_caught_without_strict_mode() {
    bounded(async {
        let Watched {
            manager,
            mut monitor,
            mut conn,
            pid,
        } = watched(ResetMode::Tracked).await;

        // A begin whose reply takes long (a slow server): polled once, so
        // the BEGIN is on the wire, then dropped. sqlx counts no transaction.
        let finished = conn
            .begin_with("BEGIN; SELECT pg_sleep(0.5)")
            .now_or_never()
            .is_some();
        assert!(!finished, "the begin cannot have finished in one poll");
        assert!(!conn.is_in_transaction());

        assert!(
            give_back(&manager, &mut conn).await,
            "the reply in flight marks it dirty"
        );
        assert_clean(&mut monitor, &mut conn, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn cancelled_begins_are_caught_in_strict_mode() {
    bounded(async {
        let Watched {
            manager,
            mut monitor,
            mut conn,
            pid,
        } = watched(ResetMode::Strict).await;

        for round in 0..40u64 {
            if round % 2 == 0 {
                // Dropped after exactly one poll: the BEGIN has been sent.
                let _ = conn.begin().now_or_never();
            } else {
                // Dropped by a timeout at some point of its round trip.
                let limit = Duration::from_micros(25 * round);
                let _ = tokio::time::timeout(limit, conn.begin()).await;
            }
            assert_reset_clean(&manager, &mut monitor, &mut conn, pid).await;
        }
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn raw_begin_is_caught_in_strict_mode() {
    bounded(async {
        let Watched {
            manager,
            mut monitor,
            mut conn,
            pid,
        } = watched(ResetMode::Strict).await;

        conn.execute("BEGIN").await.unwrap();
        conn.execute("SELECT txid_current()").await.unwrap();
        assert!(!conn.is_in_transaction(), "sqlx does not see a raw BEGIN");

        assert_reset_clean(&manager, &mut monitor, &mut conn, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn aborted_raw_transaction_is_rolled_back_in_strict_mode() {
    bounded(async {
        let Watched {
            manager,
            mut monitor,
            mut conn,
            pid,
        } = watched(ResetMode::Strict).await;

        conn.execute("BEGIN").await.unwrap();
        conn.execute("SELECT 1 / 0").await.unwrap_err();
        // The error arrives before the server's ReadyForQuery, and the
        // server publishes the new state just before sending it: read it.
        conn.ping().await.unwrap();
        assert_eq!(
            server_state(&mut monitor, pid).await,
            "idle in transaction (aborted)"
        );

        assert_reset_clean(&manager, &mut monitor, &mut conn, pid).await;
    })
    .await;
}

#[ignore = "needs DATABASE_URL: set it to a PostgreSQL server and run with --include-ignored"]
#[tokio::test]
async fn strict_mode_keeps_statement_cache() {
    let manager = manager(ResetMode::Strict);
    bounded(async {
        let mut conn = manager.connect().await.unwrap();
        let one: i32 = sqlx::query_scalar("SELECT $1::int4")
            .bind(1)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(one, 1);
        let cached = conn.cached_statements_size();
        assert!(cached >= 1);

        let tx = conn.begin().await.unwrap();
        drop(tx);
        assert!(give_back(&manager, &mut conn).await);
        assert_eq!(conn.cached_statements_size(), cached);
    })
    .await;
}

#[test]
fn malformed_url_is_a_typed_error_without_the_password() {
    for url in [
        "postgres://app:Pg-Secret-4711@127.0.0.1:notaport/test",
        "postgres://app:Pg-Secret-4711@127.0.0.1/test?sslmode=sometimes",
    ] {
        let err = SqlxManager::<PgConnection>::from_url(url).unwrap_err();
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(!shown.contains("Pg-Secret-4711"), "{url}: {shown}");
        }
    }
}
