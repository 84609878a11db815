//! [`PoolerMode`]: whether connections go straight to PostgreSQL or through
//! a transaction-mode pooler (PgBouncer, pgdog, pgcat, Supavisor), and
//! [`PoolerStatements`]: what such a pooler does with named statements.

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
/// The mode sets the session rules: resets that need no session, and
/// settings that need one (a fleet budget, `ResetMode::Clean`) refused when
/// the pool is built. What happens to prepared statements is the separate
/// [`PoolerStatements`] setting: passed through (the default, for poolers
/// that keep them) or sent unnamed.
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
    /// Behind a transaction-mode pooler: no reset needs a session, and
    /// settings that need one are refused. Statements are handled as
    /// [`PoolerStatements`] says (by default passed through as the driver
    /// names them).
    Transaction,
}

/// What reaches a transaction-mode pooler of the statements the driver
/// prepares: set with the managers' `pooler_statements`, read only under
/// [`PoolerMode::Transaction`].
///
/// | pooler | setting | cost per query |
/// |---|---|---|
/// | PgBouncer 1.21 or later with `max_prepared_statements` above 0 (on by default from 1.24), pgdog | `PassThrough` (the default) | none: the direct path |
/// | PgBouncer before 1.21, or with `max_prepared_statements = 0` | `Unnamed` | rewriting in the process (inside tokio-postgres's stream; a relay task and one local hop per message for sqlx), and a parse again when a statement runs outside the transaction that parsed it |
/// | pgcat, Supavisor, Odyssey | `PassThrough` where their prepared statement support is turned on, else `Unnamed` | as above |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PoolerStatements {
    /// Named statements go to the pooler as the driver names them, and the
    /// pooler keeps each one on whichever server connection runs it. The
    /// connection is the direct one: no relay, no extra hop or parse.
    #[default]
    PassThrough,
    /// No statement name reaches the server: each connection goes through
    /// a statement relay in this process that sends every statement as the
    /// unnamed one (see the managers' `pooler_statements`). For poolers that
    /// do not keep named statements. Plaintext to the pooler only, Unix
    /// platforms only.
    Unnamed,
}

/// Whether connections go through the statement relay: unnamed statements
/// behind a transaction-mode pooler.
#[doc(hidden)]
pub fn relays(mode: PoolerMode, statements: PoolerStatements) -> bool {
    mode == PoolerMode::Transaction && statements == PoolerStatements::Unnamed
}

/// Settings that cannot work with [`PoolerStatements::Unnamed`] on the sqlx
/// PostgreSQL manager, reported when the pool is built (and by every
/// connect, before any I/O).
///
/// Unnamed statements reach the pooler through an in-process relay that
/// reads the plaintext protocol (see
/// `SqlxManager::<PgConnection>::pooler_statements`), which rules out TLS to
/// the pooler and needs Unix domain sockets.
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
    /// Unnamed statements without [`PoolerMode::Transaction`]: the relay
    /// is for transaction-mode poolers only.
    UnnamedOutsideTransactionMode,
}

impl std::fmt::Display for TransactionPoolerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tls { ssl_mode } => write!(
                f,
                "pooler_statements(PoolerStatements::Unnamed) cannot work with \
                 sslmode={ssl_mode}: its statement relay reads the plaintext protocol; connect \
                 to the pooler without TLS (sslmode=disable or prefer, over loopback or a \
                 private network) or use PoolerStatements::PassThrough with a pooler that \
                 keeps named statements"
            ),
            Self::NoUnixSockets => f.write_str(
                "pooler_statements(PoolerStatements::Unnamed) needs Unix domain sockets for its \
                 statement relay, which this platform lacks",
            ),
            Self::UnnamedOutsideTransactionMode => f.write_str(
                "pooler_statements(PoolerStatements::Unnamed) needs \
                 pooler_mode(PoolerMode::Transaction): named statements are safe on a direct \
                 connection or a session-mode pooler",
            ),
        }
    }
}

impl std::error::Error for TransactionPoolerError {}
