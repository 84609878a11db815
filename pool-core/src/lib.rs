//! A generic async connection pool with a lock-free hot path.
//!
//! * **Hard bound**: never more than `max_size` connections open (idle, in
//!   use and being opened), under any interleaving, cancellation, panic or
//!   failure.
//! * **Lock-free, LIFO hot path**: checking out an idle connection and
//!   returning a clean one are a CAS each: on the connection's own slot
//!   when this thread returned it last (thread affinity, the default), else
//!   on a Treiber stack of idle slots; the most recently returned
//!   connection is handed out first.
//! * **Fair, notified waiting**: callers queue first come, first served, and
//!   a returned or newly opened connection is handed straight to the longest
//!   waiter.
//! * **Demand-driven creation** apart from callers, bounded by
//!   `max_concurrent_connects` (`max_concurrent_reconnects` while the pool
//!   reopens after an outage); a connect outlives a caller who gave up.
//! * **Reset on return**: a dirty connection is reset before anyone else gets
//!   it; a broken one is closed.
//! * **Housekeeper, leak reports, metrics**: idle timeout, max lifetime with
//!   jitter, `min_size`/`min_idle` refill, keepalive, leak warnings naming
//!   the checkout site (with its backtrace when asked for), `holders()`,
//!   and export through the `metrics` crate.
//! * **Ambient transactions** (with a sqlx or the tokio-postgres feature):
//!   a scope binds a transaction to the future it runs, and code below asks
//!   the pool for it; propagation modes, savepoints, explicit hand-over to
//!   spawned tasks (the `ambient` module).
//!
//! Everything from `pool-api` is re-exported here. Start with [`Pool`].
//!
//! How the engine works, file by file, and one connection's journey through
//! it: [`design`]. Behind PgBouncer, fleet budgets, several hosts, ambient
//! transactions, sizing, metric names, leak reports: the [`guide`] pages.
//!
//! # Supported versions
//!
//! | feature | supports |
//! |---|---|
//! | `sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite` | sqlx 0.9 |
//! | `sqlx08-postgres`, `sqlx08-mysql`, `sqlx08-sqlite` | sqlx 0.8.5 or later in 0.8 |
//! | `tokio-postgres` | tokio-postgres 0.7.17 or later in 0.7 |
//! | `bb8` | bb8 0.9 |
//! | `deadpool` | deadpool 0.13.1 or later in 0.13 |
//! | `metrics` (default) | metrics 0.24.2 or later in 0.24 |
//!
//! with tokio 1.40 or later. Each lower bound is the requirement this
//! crate declares, and the crate is tested with every direct dependency at
//! it. A lock holding an older release is raised by Cargo when this crate
//! is added (`cargo update -p sqlx` does it beforehand).
//!
//! # Example
//!
//! A manager says how to open and check one connection; the pool does the
//! rest. Here the "connections" are in-memory buffers; the built-in managers
//! ([`managers`], [`compat`]) do the same for real databases.
//!
//! ```
//! use std::time::Duration;
//! use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
//!
//! #[derive(Debug)]
//! struct Buffers;
//!
//! #[async_trait]
//! impl ManageConnection for Buffers {
//!     type Connection = Vec<u8>;
//!     type Error = std::io::Error;
//!
//!     async fn connect(&self) -> Result<Vec<u8>, std::io::Error> {
//!         Ok(Vec::new())
//!     }
//!
//!     async fn is_valid(&self, _conn: &mut Vec<u8>) -> Result<(), std::io::Error> {
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = PoolConfig::builder()
//!     .name("buffers")
//!     .max_size(4)
//!     .acquire_timeout(Duration::from_secs(5))
//!     .build()?;
//! let pool = Pool::new(Buffers, config).await?; // opens one connection first
//!
//! let mut conn = pool.get().await?; // derefs to the connection
//! conn.extend_from_slice(b"hello");
//! drop(conn); // back to the pool
//!
//! let m = pool.metrics();
//! assert_eq!((m.total, m.idle, m.acquire_count), (1, 1, 1));
//! pool.close().await;
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod affinity;
#[cfg(any(feature = "_sqlx", feature = "tokio-postgres"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "sqlx-postgres",
        feature = "sqlx-mysql",
        feature = "sqlx-sqlite",
        feature = "tokio-postgres"
    )))
)]
pub mod ambient;
mod clock;
mod coop;
mod engine;
mod entry;
mod error_chain;
#[cfg(feature = "metrics")]
mod export;
mod health;
mod histogram;
mod index_stack;
mod linked_list;
mod pool;
mod slots;
mod stats;
mod suspend;
mod sync;
mod waiters;

pub mod compat;
pub mod managers;

#[doc = include_str!("../docs/engine.md")]
pub mod design {}

/// Guides: the pool in the situations a service meets, each page with an
/// example that compiles.
///
/// | page | what it covers |
/// |---|---|
/// | [`pgbouncer`](guide::pgbouncer) | transaction-mode poolers: session rules, named statements passed through or unnamed, sizing behind PgBouncer |
/// | [`fleet_budget`](guide::fleet_budget) | one connection budget for every instance of a service, enforced by PostgreSQL, with fair share |
/// | [`hosts`](guide::hosts) | a primary and its standbys behind one handle: routing by role, failover, events, sizing |
/// | [`transactions`](guide::transactions) | ambient transactions: a scope binds a transaction to a future, code below asks the pool for it |
/// | [`sizing`](guide::sizing) | `max_size` and `min_size` from the server's `max_connections`, rolling deploys included |
/// | [`metrics`](guide::metrics) | the snapshot, both export naming schemes with every series, example queries |
/// | [`exhaustion`](guide::exhaustion) | when the pool runs dry: holders, slow checkouts, leak detection, suspend |
/// | [`behaviour`](guide::behaviour) | what someone who knows other pools may not expect |
/// | [`own_manager`](guide::own_manager) | writing a `ManageConnection` |
///
/// The PostgreSQL pages need the crate's features; build the docs with
/// `cargo doc -p pool-core --all-features` to see every item they name.
pub mod guide {
    #[doc = include_str!("../docs/guide/pgbouncer.md")]
    pub mod pgbouncer {}
    #[doc = include_str!("../docs/guide/fleet_budget.md")]
    pub mod fleet_budget {}
    #[doc = include_str!("../docs/guide/hosts.md")]
    pub mod hosts {}
    #[doc = include_str!("../docs/guide/transactions.md")]
    pub mod transactions {}
    #[doc = include_str!("../docs/guide/sizing.md")]
    pub mod sizing {}
    #[doc = include_str!("../docs/guide/metrics.md")]
    pub mod metrics {}
    #[doc = include_str!("../docs/guide/exhaustion.md")]
    pub mod exhaustion {}
    #[doc = include_str!("../docs/guide/behaviour.md")]
    pub mod behaviour {}
    #[doc = include_str!("../docs/guide/own_manager.md")]
    pub mod own_manager {}
}

// The crate root's re-exports, all of them: the pool, its guard, and
// everything of pool-api that a manager or an application names. The
// drivers' types stay in their modules (`managers::...`, `compat::...`,
// `ambient`); the public API is listed, item by item, in public-api.txt
// (scripts/api_check.sh).
pub use engine::PooledConnection;
pub use pool::Pool;
pub use pool_api::{
    async_trait, ConfigError, ConnectRunning, ConnectTimedOut, ConnectionInfo, ErrorClass,
    Evictions, Holder, HolderSites, Hooks, ManageConnection, MetricNames, NoHooks, PoolConfig,
    PoolConfigBuilder, PoolError, PoolMetrics, PoolState, SiteHolders, TimeoutPhase,
    ValidationMode, MAX_POOL_SIZE,
};
// For the crate's own paths (`crate::PoolerMode`), used by the PostgreSQL
// managers only, each behind its feature; users name them in
// `managers::pooler`.
#[allow(unused_imports)]
pub(crate) use managers::pooler::{PoolerMode, PoolerStatements};
