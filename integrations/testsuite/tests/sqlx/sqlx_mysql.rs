//! `SqlxManager<MySqlConnection>` on sqlx 0.9 against a real MariaDB or
//! MySQL (`MYSQL_URL`): transactions left open are rolled back before
//! reuse, and the pool works as sqlx's own (`&pool` as an executor,
//! `pool.begin()`). The test bodies are shared with the other sqlx
//! version's file, in `sqlx_shared/`.
#![cfg(feature = "sqlx-mysql")]

mod drivers {
    pub use ::pool_sqlx;
    pub use ::sqlx;
}

#[path = "../sqlx_shared/mysql_probes.rs"]
mod probes;

#[path = "../sqlx_shared/mysql.rs"]
mod manager;

#[path = "../sqlx_shared/mysql_dropin.rs"]
mod dropin;
