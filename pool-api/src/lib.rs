//! The plain types and traits of the pool, with no runtime behind them.
//!
//! This crate holds what a connection manager or an application needs to
//! *describe* a pool: the [`ManageConnection`] trait a backend implements, the
//! optional [`Hooks`] an application runs around connections, the validated
//! [`PoolConfig`] and its builder, the [`PoolMetrics`] snapshot and the
//! export's [`MetricNames`], and the error types. It depends on nothing but
//! `async-trait`: no tokio, no sqlx.
//!
//! The pool itself lives in `pool-core`, which re-exports everything here, so
//! an application depends on `pool-core` alone.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]

mod builder;
mod config;
mod error;
pub mod error_chain;
mod holders;
mod hooks;
mod manager;
mod metrics;

pub use async_trait::async_trait;
pub use builder::PoolConfigBuilder;
pub use config::{ConfigError, PoolConfig, ValidationMode, MAX_POOL_SIZE};
pub use error::{ConnectRunning, ConnectTimedOut, PoolError, PoolState, TimeoutPhase};
pub use holders::{Holder, HolderSites, SiteHolders};
pub use hooks::{ConnectionInfo, Hooks, NoHooks};
pub use manager::{ErrorClass, ManageConnection};
pub use metrics::{Evictions, MetricNames, PoolMetrics};
