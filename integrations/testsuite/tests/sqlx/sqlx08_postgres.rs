//! `SqlxManager<PgConnection>` on sqlx 0.8 against a real PostgreSQL
//! (`DATABASE_URL`): a connection that comes back inside a transaction,
//! however it got there, is not left in it, a clean one is left alone, the
//! bound holds under concurrent queries, and the pool works as sqlx's own
//! (`&pool` as an executor, `pool.begin()`). The test bodies are shared
//! with the other sqlx version's file, in `sqlx_shared/`.
#![cfg(feature = "sqlx08-postgres")]

// The sqlx 0.8 crate and its managers, under the names the bodies use.
#[path = "../sqlx_shared/drivers08.rs"]
mod drivers;

#[path = "../sqlx_shared/pg_probes.rs"]
mod probes;

#[path = "../sqlx_shared/pg_manager.rs"]
mod manager;

#[path = "../sqlx_shared/pg_pool.rs"]
mod pool;

#[path = "../sqlx_shared/pg_dropin.rs"]
mod dropin;

#[path = "../sqlx_shared/pg_options.rs"]
mod options;

#[path = "../sqlx_shared/pg_errors.rs"]
mod errors;
