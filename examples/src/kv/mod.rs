//! A small key-value store on top of the pool, over SQLite, PostgreSQL or
//! MariaDB: the same code runs on all three sqlx drivers, and the URL alone
//! picks one (`sqlite:`, `postgres://`, `mysql://`).
//!
//! - One table: a text key (primary key) and the value as JSON text.
//! - [`KvStore::put`] is one upsert in the backend's own syntax (`ON
//!   CONFLICT` on PostgreSQL and SQLite, `ON DUPLICATE KEY UPDATE` on
//!   MariaDB); [`get`](KvStore::get), [`delete`](KvStore::delete),
//!   [`keys`](KvStore::keys), [`len`](KvStore::len).
//! - Reads go through a small in-process cache with a TTL, emptied of a key
//!   when it is written or deleted through this store.
//! - [`KvStore::copy_to`] copies every row to another store, on any backend,
//!   in one transaction on the target, verified before it commits.
//!
//! # How it is built
//!
//! `backend.rs` holds one enum over the three `Pool<C>` types
//! and a handful of driver calls (execute, fetch, multi-row upsert) whose
//! body is written once and compiled per driver by a macro; `sql.rs` holds
//! each dialect's statements; `store.rs` and `copy.rs` are the store itself,
//! backend-blind; `cache.rs` the read cache.

mod backend;
mod cache;
mod copy;
mod error;
mod sql;
mod store;

pub use cache::{CacheStats, Clock, ManualClock, SystemClock};
pub use copy::CopyReport;
pub use error::KvError;
pub use sql::BackendKind;
pub use store::{KvOptions, KvStore};
