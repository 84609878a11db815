//! Library code shared by the runnable examples and their tests.
//!
//! - [`kv`]: a small key-value store over the pool whose backend (SQLite,
//!   PostgreSQL or MariaDB) is chosen by its URL alone.
//! - [`axum_service`]: an axum service on a pool of sqlx PostgreSQL
//!   connections, with Prometheus metrics.

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod axum_service;
pub mod kv;
