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

/// Looks at every statement of `sql`. Runs on every text query behind a
/// transaction-mode pooler, so it allocates nothing: it reads bytes, and
/// compares words ignoring ASCII case.
pub(super) fn session_state(sql: &str) -> Found {
    let mut found = Found::default();
    for statement in sql.as_bytes().split(|&b| b == b';') {
        let statement = statement.trim_ascii_start();
        let (first, rest) = word(statement);
        let second = word(rest.trim_ascii_start()).0;
        let kind = if is(first, b"set")
            && !(is(second, b"local") || is(second, b"transaction") || is(second, b"constraints"))
        {
            Some("SET")
        } else if is(first, b"listen") {
            Some("LISTEN")
        } else if is(first, b"prepare") && !is(second, b"transaction") {
            Some("PREPARE")
        } else if is(first, b"declare") && contains(statement, b"with hold") {
            Some("DECLARE ... WITH HOLD")
        } else if is(first, b"create") && (is(second, b"temp") || is(second, b"temporary")) {
            Some("CREATE TEMPORARY")
        } else if contains(statement, b"pg_advisory_lock")
            || contains(statement, b"pg_try_advisory_lock")
        {
            Some("advisory session lock")
        } else {
            None
        };
        if found.session_state.is_none() {
            found.session_state = kind;
        }
        if is(first, b"begin") || (is(first, b"start") && is(second, b"transaction")) {
            found.tx = Some(TxChange::Begin);
        } else if is(first, b"commit")
            || is(first, b"end")
            || is(first, b"abort")
            || (is(first, b"rollback") && !is(second, b"to"))
        {
            found.tx = Some(TxChange::End);
        }
    }
    found
}

/// The leading word of `text` (up to ASCII whitespace) and what follows.
fn word(text: &[u8]) -> (&[u8], &[u8]) {
    let end = text
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(text.len());
    text.split_at(end)
}

/// Whether `word` is `lower` (lower case), ignoring ASCII case.
fn is(word: &[u8], lower: &[u8]) -> bool {
    word.eq_ignore_ascii_case(lower)
}

/// Whether `text` contains `needle` (lower case), ignoring ASCII case.
fn contains(text: &[u8], needle: &[u8]) -> bool {
    text.len() >= needle.len()
        && text
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(sql: &str) -> Option<&'static str> {
        session_state(sql).session_state
    }

    #[test]
    fn reads_words_in_any_case() {
        assert_eq!(
            kind("sElEcT PG_Advisory_Lock(1)"),
            Some("advisory session lock")
        );
        assert_eq!(
            kind("Declare c Cursor With Hold For SELECT 1"),
            Some("DECLARE ... WITH HOLD")
        );
        assert_eq!(kind("Set Local x = 1"), None);
        assert_eq!(kind("SELECT pg_advisory_xact_lock(1)"), None);
        assert_eq!(session_state("Rollback To a").tx, None);
        assert_eq!(session_state("Start Transaction").tx, Some(TxChange::Begin));
        assert_eq!(
            kind("select pg_try_advisory_lock_shared(7)"),
            Some("advisory session lock")
        );
        assert_eq!(kind("SELECT pg_try_advisory_xact_lock(7), a_b"), None);
        assert_eq!(kind("SELECT 1; commit; listen x"), Some("LISTEN"));
        assert_eq!(
            session_state("SELECT 1; commit; select 2").tx,
            Some(TxChange::End)
        );
        assert_eq!(session_state("").tx, None);
        assert_eq!(kind(";;  ;"), None);
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
