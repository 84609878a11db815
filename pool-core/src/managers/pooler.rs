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
    /// Behind a transaction-mode pooler: no named prepared statement
    /// outlives its transaction and no reset needs a session.
    Transaction,
}
