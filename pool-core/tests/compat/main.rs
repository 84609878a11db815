//! bb8 and deadpool managers run in this pool through the adapters.
#![cfg(any(feature = "bb8", feature = "deadpool"))]

#[path = "../support/mod.rs"]
mod support;

mod bb8_adapter;
mod compat_errors;
mod deadpool_adapter;
