//! The fleet budget on `SqlxManager<PgConnection>` on sqlx 0.9 against a
//! real PostgreSQL (`DATABASE_URL`). The test bodies are shared with the
//! sqlx 0.8 file, in `sqlx_shared/pg_fleet.rs`.
#![cfg(feature = "sqlx-postgres")]

mod drivers {
    pub use ::pool_sqlx;
    pub use ::sqlx;
}

#[path = "../sqlx_shared/pg_fleet.rs"]
mod fleet;
