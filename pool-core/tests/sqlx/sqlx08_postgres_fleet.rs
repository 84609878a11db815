//! The fleet budget on `SqlxManager<PgConnection>` on sqlx 0.8 against a
//! real PostgreSQL (`DATABASE_URL`). The test bodies are shared with the
//! sqlx 0.9 file, in `sqlx_shared/pg_fleet.rs`.
#![cfg(feature = "sqlx08-postgres")]

mod drivers {
    pub use ::sqlx08 as sqlx;
    pub use pool_core::managers::sqlx08 as pool_sqlx;
}

#[path = "../sqlx_shared/pg_fleet.rs"]
mod fleet;
