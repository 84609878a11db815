//! Library code shared by the runnable examples and their tests.
//!
//! - [`kv`]: a small key-value store over the pool whose backend (SQLite,
//!   PostgreSQL or MariaDB) is chosen by its URL alone.

pub mod kv;
