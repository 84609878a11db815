//! The pool as a drop-in for sqlx's `MySqlPool`: the drop-in suite
//! (`dropin_suite.rs`) on MariaDB/MySQL.

use std::time::Duration;

use super::drivers::pool_sqlx::{Pool as SqlxPool, SqlxManager, Transaction};
use super::drivers::sqlx;
use super::drivers::sqlx::{Connection, MySqlConnection};
use super::probes::{connection_id as backend_id, server_in_transaction};
use crate::support::db::{bounded, sql, unique, Table};
use pool_core::PoolConfig;

type Conn = MySqlConnection;
type P = SqlxPool<MySqlConnection>;
/// The server's connection id.
type Id = u64;

/// A server backend may close a connection whose `BEGIN` was cut off.
const KEEPS_CONNECTION_ON_CANCEL: bool = false;

async fn open(config: PoolConfig) -> P {
    let url = crate::support::db::url("MYSQL_URL");
    SqlxPool::new(SqlxManager::from_url(&url).unwrap(), config)
        .await
        .expect("MariaDB is reachable")
}

fn new_table(prefix: &str) -> Table {
    Table::mysql(prefix)
}

async fn create_table(pool: &P, table: &Table) {
    sqlx::query(sql(format!(
        "CREATE TABLE {table} (tag VARCHAR(128) NOT NULL)"
    )))
    .execute(pool)
    .await
    .expect("creating the table");
}

async fn assert_same_backend(conn: &mut MySqlConnection, id: Id) {
    assert_eq!(backend_id(conn).await, id, "the same backend");
}

dropin_suite! {
    #[ignore = "needs MYSQL_URL: set it to a MariaDB server and run with --include-ignored"]
    name: "mysql-dropin",
    table: "pool_core_sqlx_dropin",
    placeholders: ("?", "?"),
    int: i64,
    select_none: "SELECT 1 FROM DUAL WHERE false",
}
