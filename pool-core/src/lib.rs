//! A generic async connection pool with a lock-free hot path.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod compat;
pub mod managers;

pub use pool_api::*;
