//! `SqlxManager<SqliteConnection>` on sqlx 0.8, on temporary files and in
//! memory: transactions left open are rolled back before reuse, and the
//! pool works as sqlx's own (`&pool` as an executor, `pool.begin()`). The
//! test bodies are shared with the other sqlx version's file, in
//! `sqlx_shared/`.
#![cfg(feature = "sqlx08-sqlite")]

// The sqlx 0.8 crate and its managers, under the names the bodies use.
#[path = "../sqlx_shared/drivers08.rs"]
mod drivers;

#[path = "../sqlx_shared/sqlite_probes.rs"]
mod probes;

#[path = "../sqlx_shared/sqlite.rs"]
mod manager;

#[path = "../sqlx_shared/sqlite_dropin.rs"]
mod dropin;
