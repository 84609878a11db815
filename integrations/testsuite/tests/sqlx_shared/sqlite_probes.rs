//! What the SQLite tests ask the database about one of its connections.

use super::drivers::sqlx;
use super::drivers::sqlx::{Executor, SqliteConnection};

/// Whether `conn` is inside a transaction: SQLite refuses a `BEGIN` there.
pub async fn server_in_transaction(conn: &mut SqliteConnection) -> bool {
    match conn.execute(sqlx::raw_sql("BEGIN")).await {
        Ok(_) => {
            conn.execute(sqlx::raw_sql("ROLLBACK")).await.unwrap();
            false
        }
        Err(_) => true,
    }
}
