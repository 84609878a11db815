//! The fleet budget on `SqlxManager<PgConnection>` on sqlx 0.8 against a
//! real PostgreSQL (`DATABASE_URL`). The test bodies are shared with the
//! sqlx 0.9 file, in `sqlx_shared/pg_fleet.rs`.
#![cfg(feature = "sqlx08-postgres")]

// The sqlx 0.8 crate and its managers, under the names the bodies use.
#[path = "../sqlx_shared/drivers08.rs"]
mod drivers;

#[path = "../sqlx_shared/pg_fleet.rs"]
mod fleet;
