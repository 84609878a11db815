//! Behaving like the pools users come from: bb8 and deadpool managers run
//! in this pool through the adapters (`bb8_adapter`, `deadpool_adapter`,
//! `compat_errors`), and the peers' own pool tests, ported (`peers`).

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "bb8")]
mod bb8_adapter;
#[cfg(any(feature = "bb8", feature = "deadpool"))]
mod compat_errors;
#[cfg(feature = "deadpool")]
mod deadpool_adapter;
mod peers;
