//! `SqlxManager` on sqlx 0.9 and 0.8 against PostgreSQL, MariaDB and SQLite,
//! behind PgBouncer, and with no server at all. The bodies shared by both
//! sqlx versions are in `tests/sqlx_shared/`, included once per version.
// The same bodies over each sqlx version, on purpose: only `drivers` differs.
#![allow(clippy::duplicate_mod)]

#[path = "../../../../pool-core/tests/support/mod.rs"]
mod support;

// The drop-in tests every backend runs, before the modules that run them.
#[macro_use]
#[path = "../sqlx_shared/dropin_suite.rs"]
mod dropin_suite;

mod peers_from_sqlx;
mod sqlx08_mysql;
mod sqlx08_postgres;
mod sqlx08_postgres_fleet;
mod sqlx08_sqlite;
mod sqlx_mysql;
mod sqlx_pgbouncer;
mod sqlx_postgres;
mod sqlx_postgres_fleet;
mod sqlx_sqlite;
mod sqlx_startup;
mod sqlx_unreachable;
