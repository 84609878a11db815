//! The tokio-postgres manager: its pieces, re-exported at the crate root.

mod ambient;
mod cache;
mod cancel;
mod client;
mod describe;
mod driver;
mod error;
mod failover;
mod manager;
mod query;
mod statement;
mod statements;
mod timeout;
mod transaction;

pub use cache::StatementCacheStats;
pub use client::PgClient;
pub use error::{BoxError, PgConfigError, PgError};
pub use manager::{
    PasswordFuture, PostgresManager, ResetMode, DEFAULT_KEEPALIVE_IDLE, DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_KEEPALIVE_RETRIES,
};
pub use statement::PgStatement;
pub use timeout::QueryError;
pub use transaction::{PgTransaction, PgTransactionBuilder};
