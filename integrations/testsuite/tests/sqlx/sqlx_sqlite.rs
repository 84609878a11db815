//! `SqlxManager<SqliteConnection>` on sqlx 0.9, on temporary files and in
//! memory: transactions left open are rolled back before reuse, and the
//! pool works as sqlx's own (`&pool` as an executor, `pool.begin()`). The
//! test bodies are shared with the other sqlx version's file, in
//! `sqlx_shared/`.
#![cfg(feature = "sqlx-sqlite")]

mod drivers {
    pub use ::pool_sqlx;
    pub use ::sqlx;
}

#[path = "../sqlx_shared/sqlite_probes.rs"]
mod probes;

#[path = "../sqlx_shared/sqlite.rs"]
mod manager;

#[path = "../sqlx_shared/sqlite_dropin.rs"]
mod dropin;
