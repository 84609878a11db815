//! The examples' smoke tests, one module per example, run as the
//! library's unit tests (one test binary): the axum service, the key-value
//! store, and the to-do program ported from `PgPool`.

mod axum_service;
mod kv_store;
mod todos;
