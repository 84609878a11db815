//! The examples' smoke tests, one module per example, in one test binary:
//! the axum service, the key-value store, and the to-do program ported from
//! `PgPool`.

mod axum_service;
mod kv_store;
mod todos;
