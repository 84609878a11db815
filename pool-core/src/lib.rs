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
//!
//! Everything from `pool-api` is re-exported here. Start with [`Pool`].
//!
//! How the engine works, file by file, and one connection's journey through
//! it: [`design`]. Sizing, metric names, leak reports, writing a manager:
//! the [`guide`] pages.
//!
//! The drivers are crates of their own, each reaching the pool through its
//! public API: `pool-postgres` (tokio-postgres, several hosts, a fleet-wide
//! budget, transaction-mode poolers), `pool-sqlx` (sqlx 0.9 and 0.8) and
//! `pool-ambient` (ambient transactions). The adapters that run a bb8 or
//! deadpool manager in this pool are here ([`compat`]).
//!
//! # Supported versions
//!
//! | feature | supports |
//! |---|---|
//! | `bb8` | bb8 0.9 |
//! | `deadpool` | deadpool 0.13.1 or later in 0.13 |
//! | `metrics` (default) | metrics 0.24.2 or later in 0.24 |
//!
//! with tokio 1.40 or later. Each lower bound is the requirement this
//! crate declares, and the crate is tested with every direct dependency at
//! it. A lock holding an older release is raised by Cargo when this crate
//! is added (`cargo update -p tokio` does it beforehand).
//!
//! # Example
//!
//! A manager says how to open and check one connection; the pool does the
//! rest. Here the "connections" are in-memory buffers; the driver crates
//! and the adapters ([`compat`]) do the same for real databases.
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
mod clock;
mod coop;
mod engine;
mod entry;
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

#[doc = include_str!("../docs/engine.md")]
pub mod design {}

/// Guides: the pool in the situations a service meets, each page with an
/// example that compiles.
///
/// | page | what it covers |
/// |---|---|
/// | [`sizing`](guide::sizing) | `max_size` and `min_size` from the server's `max_connections`, rolling deploys included |
/// | [`metrics`](guide::metrics) | the snapshot, both export naming schemes with every series, example queries |
/// | [`exhaustion`](guide::exhaustion) | when the pool runs dry: holders, slow checkouts, leak detection, suspend |
/// | [`behaviour`](guide::behaviour) | what someone who knows other pools may not expect |
/// | [`own_manager`](guide::own_manager) | writing a `ManageConnection` |
///
pub mod guide {
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
// adapters' types stay in `compat`; the public API is listed, item by item, in public-api.txt
// (scripts/api_check.sh).
pub use engine::PooledConnection;
pub use pool::{Pool, PoolId};
pub use pool_api::{
    async_trait, ConfigError, ConnectRunning, ConnectTimedOut, ConnectionInfo, ErrorClass,
    Evictions, Holder, HolderSites, Hooks, ManageConnection, MetricNames, NoHooks, PoolConfig,
    PoolConfigBuilder, PoolError, PoolMetrics, PoolState, SiteHolders, TimeoutPhase,
    ValidationMode, MAX_POOL_SIZE,
};
