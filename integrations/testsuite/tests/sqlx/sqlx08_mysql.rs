//! `SqlxManager<MySqlConnection>` on sqlx 0.8 against a real MariaDB or
//! MySQL (`MYSQL_URL`): transactions left open are rolled back before
//! reuse, and the pool works as sqlx's own (`&pool` as an executor,
//! `pool.begin()`). The test bodies are shared with the other sqlx
//! version's file, in `sqlx_shared/`.
#![cfg(feature = "sqlx08-mysql")]

// The sqlx 0.8 crate and its managers, under the names the bodies use.
#[path = "../sqlx_shared/drivers08.rs"]
mod drivers;

#[path = "../sqlx_shared/mysql_probes.rs"]
mod probes;

#[path = "../sqlx_shared/mysql.rs"]
mod manager;

#[path = "../sqlx_shared/mysql_dropin.rs"]
mod dropin;
