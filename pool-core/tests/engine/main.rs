//! The engine on a scripted in-memory manager: the bound, checkout and
//! return, waiting and handoff, cancellation, panics, timeouts, hooks,
//! the housekeeper, leaks, metrics, runtime control, and everything at
//! once under stress. One module per behaviour.
//!
//! Most modules run the pool on tokio's paused clock and need the
//! `tokio-clock` feature; the ones on real time also run in the
//! production-clock pass of `scripts/test.sh`, without it.

#[path = "../support/mod.rs"]
mod support;

mod affinity;
mod bound;
mod cancel;
mod close;
#[cfg(feature = "tokio-clock")]
mod cold_paths;
#[cfg(feature = "tokio-clock")]
mod construction;
mod coop;
#[cfg(feature = "tokio-clock")]
mod deadlines;
#[cfg(feature = "tokio-clock")]
mod error_display;
#[cfg(feature = "tokio-clock")]
mod errors;
#[cfg(feature = "tokio-clock")]
mod fail_fast;
#[cfg(feature = "tokio-clock")]
mod failure_matrix;
#[cfg(feature = "tokio-clock")]
mod fairness;
#[cfg(feature = "tokio-clock")]
mod faults_engine;
#[cfg(feature = "tokio-clock")]
mod fresh_checkout;
mod guard;
#[cfg(feature = "tokio-clock")]
mod holders;
#[cfg(feature = "tokio-clock")]
mod hooks;
#[cfg(feature = "tokio-clock")]
mod housekeeper;
#[cfg(feature = "tokio-clock")]
mod leak;
mod lifo;
#[cfg(feature = "tokio-clock")]
mod log_causes;
#[cfg(feature = "tokio-clock")]
mod metric_names;
#[cfg(feature = "tokio-clock")]
mod metrics_export;
#[cfg(feature = "tokio-clock")]
mod metrics_snapshot;
#[cfg(feature = "tokio-clock")]
mod min_idle;
mod panic;
#[cfg(feature = "tokio-clock")]
mod proptest_model;
#[cfg(feature = "tokio-clock")]
mod reopen;
#[cfg(feature = "tokio-clock")]
mod return_path;
#[cfg(feature = "tokio-clock")]
mod runtime_control;
#[cfg(feature = "tokio-clock")]
mod spike;
#[cfg(feature = "tokio-clock")]
mod startup;
mod stress;
#[cfg(feature = "tokio-clock")]
mod suspend;
#[cfg(feature = "tokio-clock")]
mod timeouts;
#[cfg(feature = "tokio-clock")]
mod validation;
