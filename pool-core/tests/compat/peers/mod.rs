//! The pool tests of bb8, deadpool, r2d2 and sqlx's pool, each scenario
//! rewritten against this pool, so that a change of semantics a migrating
//! user relies on shows up here.
//!
//! A module per peer; each test is named after the peer's test it ports and
//! says in its doc what the peer expects. Where this pool deliberately
//! differs, the test asserts this pool's documented behaviour and
//! MIGRATION.md lists it under "Where the peers' own tests expect something
//! else".
//!
//! The mock manager is the shared one (`support`), wrapped in [`Peer`] for
//! the few scripts the peers' suites need on top of it (a connect budget,
//! "fail the next n", a gated check). The tests run on tokio's paused clock
//! unless they need threads; sqlx's real-database tests run against
//! `DATABASE_URL` and are ignored unless asked for.

#[cfg(not(feature = "tokio-clock"))]
compile_error!("these tests run the pool on tokio's paused clock: build them with `--features tokio-clock` (scripts/test.sh does)");

mod peer;

mod from_bb8;
mod from_deadpool;
mod from_r2d2;
mod from_sqlx;
