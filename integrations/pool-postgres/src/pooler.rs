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
/// The mode sets the session rules: resets that need no session; settings
/// that need one (a fleet budget, `ResetMode::Clean`) refused when the pool
/// is built; and statements that set session state (`SET`, `LISTEN`,
/// `pg_advisory_lock` and its session-level siblings, see
/// [`SessionStatement`]) refused wherever the pool sees their text, before
/// anything is sent:
///
/// - tokio-postgres: every text-taking method of the pooled client and of
///   its transactions fails with `PgError::SessionStateBehindPooler`. The
///   driver's own `Client` (reached through `Deref` or `client()`) is not
///   looked at, but with [`PoolerStatements::Unnamed`] the relay below
///   refuses there too.
/// - With [`PoolerStatements::Unnamed`] (both managers) the statement relay
///   looks at every `Query` and `Parse`: it answers a refused one with an
///   error of SQLSTATE `0A000` (`feature_not_supported`) and the same
///   message, in place of the server's answer, and the connection goes on.
/// - sqlx with statements passed through: not checked. The pool never reads
///   a query's text there (`&Pool` hands the query to the connection as
///   it is), so such statements reach the pooler.
///
/// The look reads the leading words of each `;`-separated statement, not a
/// parse: a comment or a quoted `;` can hide a statement from it.
/// `PREPARE`, `DECLARE ... WITH HOLD` and `CREATE TEMPORARY` are only logged
/// at `WARN` (a temporary table `ON COMMIT DROP` is fine).
///
/// What happens to prepared statements is the separate
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

/// A statement that sets session state, refused behind a transaction-mode
/// pooler ([`PoolerMode::Transaction`]): the state would stay on whichever
/// server connection ran it, shared with other clients, and be missing
/// from the next transaction.
///
/// `Display` is the message of the refusal: what was refused, why, and what
/// to do instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStatement {
    /// `SET` (or `SET SESSION`), not `SET LOCAL`.
    Set,
    /// `LISTEN`.
    Listen,
    /// A session-level advisory lock: `pg_advisory_lock`,
    /// `pg_try_advisory_lock` and their `_shared` variants (the `_xact_`
    /// ones are fine).
    AdvisoryLock,
}

impl SessionStatement {
    /// The refused statement for a kind the look at statement text
    /// reports; `None` for a kind that is only warned about.
    pub(crate) fn refused(kind: &str) -> Option<Self> {
        match kind {
            "SET" => Some(Self::Set),
            "LISTEN" => Some(Self::Listen),
            "advisory session lock" => Some(Self::AdvisoryLock),
            _ => None,
        }
    }

    /// The first refused statement in `sql`, if the look at it finds one;
    /// other session state it finds is logged at `WARN`.
    pub(crate) fn in_text(sql: &str) -> Option<Self> {
        Self::judge(super::session::session_state(sql).session_state)
    }

    /// What to do with the kind of session state the look found: the
    /// refused statement, or `None` (after a warning for the kinds that
    /// are only warned about).
    pub(crate) fn judge(kind: Option<&'static str>) -> Option<Self> {
        let kind = kind?;
        let refused = Self::refused(kind);
        if refused.is_none() {
            tracing::warn!(
                statement = kind,
                "session state set through a pooled connection behind a transaction-mode \
                 pooler (PoolerMode::Transaction): it stays on whichever server connection ran \
                 it, where other clients see it, and is missing from the next transaction"
            );
        }
        refused
    }
}

impl std::fmt::Display for SessionStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Set => {
                "SET cannot work behind a transaction-mode pooler: the setting would stay on \
                 whichever server connection ran it, seen by other clients and missing from \
                 this client's next transaction; use SET LOCAL inside a transaction"
            }
            Self::Listen => {
                "LISTEN cannot work behind a transaction-mode pooler: notifications would go to \
                 whichever server connection ran it, shared with other clients; use a direct \
                 or session-mode connection for notifications"
            }
            Self::AdvisoryLock => {
                "pg_advisory_lock cannot work behind a transaction-mode pooler: a session-level \
                 advisory lock would stay on whichever server connection took it, held for \
                 other clients and never released by this one; use pg_advisory_xact_lock (or \
                 the other _xact_ variants) inside a transaction"
            }
        })
    }
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

#[cfg(test)]
mod tests {
    use super::SessionStatement;

    #[test]
    fn the_look_names_the_refused_statements() {
        assert_eq!(
            SessionStatement::in_text("SET x.y = 1"),
            Some(SessionStatement::Set)
        );
        assert_eq!(
            SessionStatement::in_text("select 1; listen c"),
            Some(SessionStatement::Listen)
        );
        for lock in [
            "SELECT pg_advisory_lock(1)",
            "SELECT pg_try_advisory_lock(1)",
            "SELECT pg_advisory_lock_shared(1)",
            "SELECT pg_try_advisory_lock_shared(1, 2)",
        ] {
            assert_eq!(
                SessionStatement::in_text(lock),
                Some(SessionStatement::AdvisoryLock),
                "{lock}"
            );
        }
        for fine in [
            "SET LOCAL x.y = 1",
            "SELECT pg_advisory_xact_lock(1)",
            "UNLISTEN *",
            "SELECT 'SET'",
            "CREATE TEMP TABLE t (a int) ON COMMIT DROP",
        ] {
            assert_eq!(SessionStatement::in_text(fine), None, "{fine}");
        }
    }
}
