//! What the test binaries share, written once. Each binary includes this
//! module (`#[path = "../support/mod.rs"] mod support;`):
//!
//! * the mock manager the engine's behaviour tests script ([`mock`],
//!   re-exported here: `support::Mock`, `support::config`, ...);
//! * [`db`]: the database URL a test needs, a time bound, unique names and
//!   polling for a server-side effect;
//! * [`pg`]: a PostgreSQL admin client that watches the pool's sessions;
//! * [`logs`]: `tracing` output captured into a buffer;
//! * [`cluster`]: a throw-away PostgreSQL cluster of the test's own;
//! * [`pgbouncer`]: a PgBouncer of the test's own in front of a server;
//! * [`faults`]: the fault suite's load, sampler, figures and proxy;
//! * [`silent`]: a listener that never answers, and a port that refuses.
// Every binary includes all of it and uses a part (the engine the mock, the
// server suites the URLs, the admin client and the cluster): what one binary
// leaves unused another uses, so the unused-item lints would only be noise
// here. `scripts/test.sh`'s passes build every binary, and each item is
// used by at least one of them.
#![allow(dead_code, unreachable_pub)]
// Shared by the test binaries of several crates, each with its own features
// (`tokio-postgres` is pool-postgres's, the `sqlx*` ones pool-sqlx's).
#![allow(unexpected_cfgs)]

pub mod cluster;
pub mod db;
#[cfg(feature = "tokio-postgres")]
pub mod faults;
pub mod harness;
pub mod logs;
pub mod mock;
pub mod pg;
pub mod pgbouncer;
pub mod silent;
pub mod sqlx_rules;

// Unused by the server suites, which have no mock.
#[allow(unused_imports)]
pub use harness::*;
#[allow(unused_imports)]
pub use mock::*;
