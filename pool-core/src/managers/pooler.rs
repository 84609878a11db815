//! [`PoolerMode`]: whether connections go through a pooler that shares
//! server connections between transactions.

/// Whether the database is reached directly (or through a pooler in session
/// mode) or through a pooler that hands out a server connection per
/// transaction (PgBouncer's or pgcat's transaction mode).
///
/// A manager in [`Transaction`](Self::Transaction) mode keeps no state on
/// the server beyond a transaction: no prepared statement kept for reuse,
/// no reset that relies on the same server session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PoolerMode {
    /// Each connection is one server session, as without a pooler. The
    /// default.
    #[default]
    Session,
    /// Each transaction (or statement outside one) may run on a different
    /// server connection.
    Transaction,
}
