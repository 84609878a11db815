//! `PostgresManager` (tokio-postgres) against real PostgreSQL: the shared
//! server of `DATABASE_URL`, and clusters, PgBouncers and processes the
//! tests start themselves. One module per area; the host pool over a
//! primary and a standby of its own in `hosts`.
#![cfg(feature = "tokio-postgres")]

#[path = "../../../../pool-core/tests/support/mod.rs"]
mod support;

mod cluster_support;
mod connect_errors;
mod hosts;
mod startup_bound;
mod tokio_postgres_abandoned;
mod tokio_postgres_credentials;
mod tokio_postgres_fleet;
mod tokio_postgres_manager;
mod tokio_postgres_pgbouncer;
mod tokio_postgres_pool;
mod tokio_postgres_reset;
mod tokio_postgres_statement_cache;
mod tokio_postgres_terminate;
