//! What the PostgreSQL tests ask the server about one of its connections.

use super::drivers::sqlx;
use super::drivers::sqlx::{Executor, PgConnection};

/// The server process behind `conn`.
pub async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Whether work done now on `conn` would land in a transaction left open
/// earlier: `txid_current()` gives the current transaction an id, as a
/// write would, and outside a transaction block that transaction ends with
/// the statement, so the next statement sees no id.
pub async fn server_in_transaction(conn: &mut PgConnection) -> bool {
    conn.execute("SELECT txid_current()").await.unwrap();
    let xid: Option<i64> = sqlx::query_scalar("SELECT txid_current_if_assigned()")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    xid.is_some()
}

/// The backend's state as the server reports it to another session.
pub async fn server_state(monitor: &mut PgConnection, pid: i32) -> String {
    sqlx::query_scalar("SELECT state FROM pg_stat_activity WHERE pid = $1")
        .bind(pid)
        .fetch_one(monitor)
        .await
        .unwrap()
}
