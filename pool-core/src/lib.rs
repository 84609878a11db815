//! A generic async connection pool with a lock-free hot path.
//!
//! * **Hard bound**: never more than `max_size` connections open (idle, in
//!   use and being opened), under any interleaving, cancellation, panic or
//!   failure.
//! * **Lock-free, LIFO hot path**: checking out an idle connection and
//!   returning a clean one are a CAS each on a Treiber stack; the most
//!   recently returned connection is handed out first.
//! * **Fair, notified waiting**: callers queue first come, first served, and
//!   a returned or newly opened connection is handed straight to the longest
//!   waiter.
//! * **Demand-driven creation** apart from callers, bounded by
//!   `max_concurrent_connects`; a connect outlives a caller who gave up.
//! * **Reset on return**: a dirty connection is reset before anyone else gets
//!   it; a broken one is closed.
//! * **Housekeeper, leak reports, metrics**: idle timeout, max lifetime with
//!   jitter, `min_size` refill, keepalive, leak warnings with the acquiring
//!   backtrace, and export through the `metrics` crate.
//!
//! Everything from `pool-api` is re-exported here. Start with [`Pool`].
//!
//! How the engine works, file by file, and one connection's journey through
//! it, is written at the top of `src/shared.rs`.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod acquire;
mod clock;
mod connection;
mod connector;
mod entry;
#[cfg(feature = "metrics")]
mod export;
mod floating;
mod histogram;
mod housekeeper;
mod index_stack;
mod leak;
mod linked_list;
#[cfg(all(test, loom))]
mod loom_tests;
mod pool;
mod shared;
mod slots;
mod stats;
mod sweeper;
mod sync;
mod waiters;

pub mod compat;
pub mod managers;

pub use connection::PooledConnection;
pub use pool::Pool;
pub use pool_api::*;
