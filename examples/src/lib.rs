//! Library code shared by the runnable examples and their tests.
//!
//! - [`kv`]: a small key-value store over the pool whose backend (SQLite,
//!   PostgreSQL or MariaDB) is chosen by its URL alone.
//! - [`axum_service`]: an axum service on a pool of sqlx PostgreSQL
//!   connections, with Prometheus metrics.
//! - [`todos`]: a to-do list ported from a `sqlx::PgPool` program:
//!   migrations, queries through `&pool`, a transaction, functions generic
//!   over `Executor` and `Acquire`.
//!
//! Each module is behind the feature of the example that uses it (`kv`,
//! `axum`, `todos`); the default build has none of them.

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]

#[cfg(feature = "axum")]
pub mod axum_service;
#[cfg(feature = "kv")]
pub mod kv;
#[cfg(feature = "todos")]
pub mod todos;

#[cfg(test)]
mod smoke;
