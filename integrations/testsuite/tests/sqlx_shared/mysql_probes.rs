//! What the MariaDB/MySQL tests ask the server about one of its
//! connections.

use super::drivers::sqlx;
use super::drivers::sqlx::MySqlConnection;

/// The server's id for `conn`.
pub async fn connection_id(conn: &mut MySqlConnection) -> u64 {
    sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Whether the server has a transaction open on `conn`.
pub async fn server_in_transaction(conn: &mut MySqlConnection) -> bool {
    let flag: u64 = sqlx::query_scalar("SELECT @@in_transaction")
        .fetch_one(conn)
        .await
        .unwrap();
    flag != 0
}
