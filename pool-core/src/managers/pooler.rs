//! [`PoolerMode`]: whether connections go straight to PostgreSQL or through
//! a transaction-mode pooler (PgBouncer, pgcat, Supavisor).

/// What sits between the pool and PostgreSQL, for the built-in PostgreSQL
/// managers.
///
/// Behind a pooler in transaction mode, each transaction (or each statement
/// outside one) may run on a different server connection, shared with
/// other clients. Whatever lives in a server session then breaks or leaks:
/// named prepared statements (one connection prepares, another is asked to
/// run it: "prepared statement ... does not exist"), session `SET`s,
/// `LISTEN`, advisory session locks, and resets such as `DISCARD ALL`.
///
/// The default, `Session`, is a direct connection (or a session-mode
/// pooler): the managers behave as they always did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PoolerMode {
    /// A server session per connection: prepared statements are cached,
    /// session state stays with the connection.
    #[default]
    Session,
    /// Behind a transaction-mode pooler: no statement name reaches the
    /// server (each connection goes through a statement relay, see the
    /// managers' `pooler_mode`) and no reset needs a session.
    Transaction,
}

/// Settings that cannot work with [`PoolerMode::Transaction`] on the sqlx
/// PostgreSQL manager, reported when the pool is built (and by every
/// connect, before any I/O).
///
/// In that mode the manager reaches the pooler through an in-process relay
/// that reads the plaintext protocol (see
/// `SqlxManager::<PgConnection>::pooler_mode`), which rules out TLS to the
/// pooler and needs Unix domain sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionPoolerError {
    /// The connect options ask for TLS (`sslmode` `require`, `verify-ca` or
    /// `verify-full`), which the relay cannot read through.
    Tls {
        /// The `sslmode` asked for, as PostgreSQL spells it.
        ssl_mode: &'static str,
    },
    /// This platform has no Unix domain sockets for the relay to listen on.
    NoUnixSockets,
}

impl std::fmt::Display for TransactionPoolerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tls { ssl_mode } => write!(
                f,
                "pooler_mode(PoolerMode::Transaction) cannot work with sslmode={ssl_mode}: its \
                 statement relay reads the plaintext protocol; connect to the pooler without \
                 TLS (sslmode=disable or prefer, over loopback or a private network) or use \
                 PoolerMode::Session"
            ),
            Self::NoUnixSockets => f.write_str(
                "pooler_mode(PoolerMode::Transaction) needs Unix domain sockets for its \
                 statement relay, which this platform lacks",
            ),
        }
    }
}

impl std::error::Error for TransactionPoolerError {}
