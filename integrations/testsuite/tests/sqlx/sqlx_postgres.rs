//! `SqlxManager<PgConnection>` on sqlx 0.9 against a real PostgreSQL
//! (`DATABASE_URL`): a connection that comes back inside a transaction,
//! however it got there, is not left in it, a clean one is left alone, the
//! bound holds under concurrent queries, and the pool works as sqlx's own
//! (`&pool` as an executor, `pool.begin()`). The test bodies are shared
//! with the other sqlx version's file, in `sqlx_shared/`.
#![cfg(feature = "sqlx-postgres")]

mod drivers {
    pub use ::pool_sqlx;
    pub use ::sqlx;
}

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
