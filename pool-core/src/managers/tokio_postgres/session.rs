//! A cheap look at statements sent as text behind a transaction-mode
//! pooler: which set session state, and which begin or end a transaction.
//!
//! Statement boundaries are found by splitting on `;` and only the leading
//! words of each statement are read (comments and quoted `;` can hide a
//! statement from it): this catches the common mistakes, it is not a
//! parser.

/// A transaction begun or ended by a statement sent as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxChange {
    Begin,
    End,
}

/// What [`session_state`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Found {
    /// The kind of session state set, if any statement sets one.
    pub(super) session_state: Option<&'static str>,
    /// The last transaction change.
    pub(super) tx: Option<TxChange>,
}

/// Looks at every statement of `sql`.
pub(super) fn session_state(sql: &str) -> Found {
    let mut found = Found::default();
    for statement in sql.split(';') {
        let lower = statement.trim_start().to_ascii_lowercase();
        let mut words = lower.split_ascii_whitespace();
        let first = words.next().unwrap_or("");
        let second = words.next().unwrap_or("");
        let kind = match first {
            "set" if !matches!(second, "local" | "transaction" | "constraints") => Some("SET"),
            "listen" => Some("LISTEN"),
            "prepare" if second != "transaction" => Some("PREPARE"),
            "declare" if lower.contains("with hold") => Some("DECLARE ... WITH HOLD"),
            "create" if matches!(second, "temp" | "temporary") => Some("CREATE TEMPORARY"),
            _ if lower.contains("pg_advisory_lock") || lower.contains("pg_try_advisory_lock") => {
                Some("advisory session lock")
            }
            _ => None,
        };
        if found.session_state.is_none() {
            found.session_state = kind;
        }
        match (first, second) {
            ("begin", _) | ("start", "transaction") => found.tx = Some(TxChange::Begin),
            ("commit" | "end" | "abort", _) => found.tx = Some(TxChange::End),
            ("rollback", s) if s != "to" => found.tx = Some(TxChange::End),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(sql: &str) -> Option<&'static str> {
        session_state(sql).session_state
    }

    #[test]
    fn finds_session_state() {
        assert_eq!(kind("SET search_path TO tenant_1"), Some("SET"));
        assert_eq!(kind("  set SESSION statement_timeout = 5"), Some("SET"));
        assert_eq!(kind("LISTEN jobs"), Some("LISTEN"));
        assert_eq!(kind("PREPARE q AS SELECT 1"), Some("PREPARE"));
        assert_eq!(
            kind("SELECT pg_advisory_lock(1)"),
            Some("advisory session lock")
        );
        assert_eq!(kind("SELECT 1; SET x.y = 1"), Some("SET"));
        assert_eq!(
            kind("CREATE TEMP TABLE t (a int)"),
            Some("CREATE TEMPORARY")
        );
        assert_eq!(
            kind("DECLARE c CURSOR WITH HOLD FOR SELECT 1"),
            Some("DECLARE ... WITH HOLD")
        );
    }

    #[test]
    fn leaves_transaction_scoped_statements_alone() {
        for sql in [
            "SET LOCAL search_path TO tenant_1",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET CONSTRAINTS ALL DEFERRED",
            "SELECT pg_advisory_xact_lock(1)",
            "SELECT $1::int",
            "PREPARE TRANSACTION 'x'",
            "",
        ] {
            assert_eq!(kind(sql), None, "{sql}");
        }
    }

    #[test]
    fn follows_transactions_sent_as_text() {
        assert_eq!(session_state("BEGIN").tx, Some(TxChange::Begin));
        assert_eq!(session_state("start transaction").tx, Some(TxChange::Begin));
        assert_eq!(session_state("COMMIT").tx, Some(TxChange::End));
        assert_eq!(
            session_state("BEGIN; SELECT 1; COMMIT").tx,
            Some(TxChange::End)
        );
        assert_eq!(session_state("ROLLBACK TO SAVEPOINT a").tx, None);
        assert_eq!(session_state("rollback").tx, Some(TxChange::End));
    }
}
