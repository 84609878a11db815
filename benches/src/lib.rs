//! Side-by-side benchmarks of `pool-core` against the pools users would
//! otherwise pick: deadpool, bb8, qp, mobc, fastpool and sqlx's own pool.
//!
//! Every pool is wrapped as a [`Contestant`] so each scenario runs the very
//! same task loop over all of them. The peers, sqlx, the plots and the
//! criterion bench build with the `peers` feature only (every benchmark
//! command passes `--features peers`); without it the harness, its scenarios
//! and its tests build over this pool and the floor alone, which is what the
//! test command compiles. The scenarios (`S1` … `S7`) live in
//! [`scenarios`]; the comparison binary `compare` runs them, writes JSON and
//! Markdown under `benches/out/` (ignored by git) and renders the SVG plots;
//! the criterion bench `micro` measures the S1/S6 micro figures.
//!
//! Validity is part of every result: a run whose tasks get stuck past a
//! watchdog, that errors, or whose per-task completion counts are unfair
//! (Jain's index below [`stats::FAIR_ENOUGH`]) is marked invalid and can
//! never be the best peer.
#![warn(missing_debug_implementations, unreachable_pub)]

pub mod contestant;
pub mod fake;
pub mod placement;
#[cfg(feature = "peers")]
pub mod plot;
pub mod pools;
#[cfg(test)]
mod quick_tests;
pub mod report;
pub mod runner;
pub mod scenarios;
pub mod stats;

pub use contestant::{Contestant, Kind};
