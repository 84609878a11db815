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
/// transaction-mode pooler, so it is kept to a few dozen instructions for a
/// short query: most queries (one statement, its first word no keyword)
/// are answered by [`one_plain_statement`] inline; otherwise it allocates
/// nothing, finds each `;` (and, in a statement long enough to name an
/// advisory lock function, each `_`) with a plain loop in a short text and
/// a vectorised search in a long one, and reads only the first word of a
/// statement unless that word is one of the few it cares about.
#[inline]
pub(super) fn session_state(sql: &str) -> Found {
    match one_plain_statement(sql.as_bytes()) {
        Some(found) => found,
        None => every_statement(sql.as_bytes()),
    }
}

/// What [`session_state`] finds in `text` when that is quick to be sure
/// of: `text` is one statement (no `;`) of at least 8 bytes, starting at
/// its first byte (nothing to trim) with a word that begins unlike every
/// keyword. Then only an advisory lock function can set session state,
/// and nothing begins or ends a transaction. `None`: look at every
/// statement.
#[inline]
fn one_plain_statement(text: &[u8]) -> Option<Found> {
    let head = u64::from_le_bytes(*text.first_chunk::<8>()?);
    // Whitespace (to trim) or a control byte first, or maybe a keyword:
    // the long way.
    if head as u8 <= b' ' || keyword_start(head as u32) {
        return None;
    }
    if text.len() <= 16 {
        // The first and the last 8 bytes cover it.
        let last = u64::from_le_bytes(*text.last_chunk::<8>()?);
        let semicolon = ONES * u64::from(b';');
        if below(head ^ semicolon, 1) | below(last ^ semicolon, 1) != 0 {
            return None;
        }
        // No advisory lock function's name fits in fewer than 16 bytes.
        if text.len() < 16 {
            return Some(Found::default());
        }
    } else if find(b';', text).is_some() {
        return None;
    }
    Some(Found {
        session_state: advisory_session_lock(text).then_some("advisory session lock"),
        tx: None,
    })
}

/// Looks at every statement of `text`: what [`session_state`] does.
#[inline(never)]
fn every_statement(text: &[u8]) -> Found {
    let mut found = Found::default();
    let mut rest = text;
    while let Some(end) = find(b';', rest) {
        look_at(&rest[..end], &mut found);
        rest = &rest[end + 1..];
    }
    look_at(rest, &mut found);
    found
}

/// Where `byte` first is in `text`: below 64 bytes eight bytes at a time
/// in a `u64`, which costs less than setting up the vectorised search.
#[inline]
fn find(byte: u8, text: &[u8]) -> Option<usize> {
    if text.len() >= 64 {
        return memchr::memchr(byte, text);
    }
    let mut chunks = text.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let found = below(x ^ (ONES * u64::from(byte)), 1);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == byte)
        .map(|i| at + i)
}

/// `0x01` in every byte of a `u64`.
const ONES: u64 = u64::from_le_bytes([1; 8]);

/// The high bit set in the lowest byte of `x` (as read little-endian)
/// whose value is below `n` (at most 128), and possibly in bytes above it;
/// 0 when no byte is below `n`. Below the first such byte no bit is set: a
/// byte not below `n` takes no borrow from the subtraction and keeps its
/// high bit clear (below 128) or has it masked off by `!x` (128 or above).
#[inline]
const fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * n as u64) & !x & (ONES * 0x80)
}

/// Folds one statement (the text between two `;`) into `found`.
fn look_at(statement: &[u8], found: &mut Found) {
    let statement = statement.trim_ascii_start();
    let (first, rest) = first_word(statement);
    // Only the first kind found is reported.
    if found.session_state.is_none() {
        let second = || word(rest.trim_ascii_start()).0;
        let kind = match first {
            SET if !(is(second(), b"local")
                || is(second(), b"transaction")
                || is(second(), b"constraints")) =>
            {
                Some("SET")
            }
            LISTEN => Some("LISTEN"),
            PREPARE if !is(second(), b"transaction") => Some("PREPARE"),
            DECLARE if contains(statement, b"with hold") => Some("DECLARE ... WITH HOLD"),
            CREATE if is(second(), b"temp") || is(second(), b"temporary") => {
                Some("CREATE TEMPORARY")
            }
            _ if advisory_session_lock(statement) => Some("advisory session lock"),
            _ => None,
        };
        found.session_state = kind;
    }
    match first {
        BEGIN => found.tx = Some(TxChange::Begin),
        START if is(word(rest.trim_ascii_start()).0, b"transaction") => {
            found.tx = Some(TxChange::Begin);
        }
        COMMIT | END | ABORT => found.tx = Some(TxChange::End),
        ROLLBACK if !is(word(rest.trim_ascii_start()).0, b"to") => {
            found.tx = Some(TxChange::End);
        }
        _ => {}
    }
}

/// A word of at most 8 bytes folded into a `u64`: each byte with bit 5 set
/// (lower case for an ASCII letter), zeros after the word. For a keyword
/// made of lower-case ASCII letters, `key(w) == key(keyword)` exactly when
/// `w` is the keyword ignoring ASCII case: a byte with bit 5 set is a given
/// lower-case letter only if it was that letter in either case, and no
/// byte of a word becomes zero.
const fn key(word: &[u8]) -> u64 {
    let mut bytes = [0; 8];
    let mut i = 0;
    while i < word.len() && i < 8 {
        bytes[i] = word[i] | 0x20;
        i += 1;
    }
    u64::from_le_bytes(bytes)
}

const SET: u64 = key(b"set");
const LISTEN: u64 = key(b"listen");
const PREPARE: u64 = key(b"prepare");
const DECLARE: u64 = key(b"declare");
const CREATE: u64 = key(b"create");
const BEGIN: u64 = key(b"begin");
const START: u64 = key(b"start");
const COMMIT: u64 = key(b"commit");
const END: u64 = key(b"end");
const ABORT: u64 = key(b"abort");
const ROLLBACK: u64 = key(b"rollback");

/// Whether the first three bytes of `head` (little-endian), folded as
/// [`key`] folds them, are how one of the keywords above begins: one
/// multiply and one compare, through a table in which each keyword's first
/// three letters have a slot of their own (checked when the table is
/// built). A text whose first word is a keyword always starts so (the
/// shortest keywords have three letters, and folding makes a letter only
/// of a letter); a word that merely starts so (`settings`, `comment`) is
/// looked at the long way. Slots left empty hold 0, which folding never
/// makes.
#[inline]
fn keyword_start(head: u32) -> bool {
    let start = (head & 0x00ff_ffff) | 0x0020_2020;
    KEYWORD_STARTS[start_slot(start)] == start
}

/// `start`'s slot in [`KEYWORD_STARTS`]: the top 4 bits of a 32-bit
/// multiply by a constant that gives the keywords' starts distinct slots.
#[inline]
const fn start_slot(start: u32) -> usize {
    (start.wrapping_mul(0x644f) >> 28) as usize
}

/// The first three letters of each keyword, folded, each in its
/// [`start_slot`].
static KEYWORD_STARTS: [u32; 16] = {
    let keys = [
        SET, LISTEN, PREPARE, DECLARE, CREATE, BEGIN, START, COMMIT, END, ABORT, ROLLBACK,
    ];
    let mut table = [0; 16];
    let mut i = 0;
    while i < keys.len() {
        let start = (keys[i] & 0x00ff_ffff) as u32;
        assert!(table[start_slot(start)] == 0, "two keywords share a slot");
        table[start_slot(start)] = start;
        i += 1;
    }
    table
};

/// The [`key`] of the leading word of `text` (up to ASCII whitespace), 0
/// when that word is empty or longer than any keyword, and what follows it.
/// Reads at most 9 bytes to find where a keyword would end.
fn first_word(text: &[u8]) -> (u64, &[u8]) {
    if let Some(head) = text.get(..8) {
        // Eight bytes at once: the first below 0x21 ends the word if it is
        // whitespace; none there, the ninth byte (or the end) decides.
        let x = u64::from_le_bytes(head.try_into().unwrap_or_default());
        let low = below(x, 0x21);
        if low == 0 {
            return match text.get(8) {
                None => (x | (ONES * 0x20), &[]),
                Some(b) if b.is_ascii_whitespace() => (x | (ONES * 0x20), &text[8..]),
                Some(_) => (0, &[]),
            };
        }
        let end = (low.trailing_zeros() / 8) as usize;
        if head[end].is_ascii_whitespace() {
            // As `key` folds it: the bytes before `end`, zeros after.
            let mask = (1_u64 << (8 * end)) - 1;
            return ((x | (ONES * 0x20)) & mask, &text[end..]);
        }
        // A control byte that is not whitespace: byte by byte.
    }
    let mut key = 0;
    for (i, &b) in text.iter().enumerate().take(9) {
        if b.is_ascii_whitespace() {
            return (key, &text[i..]);
        }
        if i == 8 {
            return (0, &[]);
        }
        // As `key` folds it.
        key |= u64::from(b | 0x20) << (8 * i);
    }
    (key, &[])
}

/// Whether `statement` contains `pg_advisory_lock` or
/// `pg_try_advisory_lock`, ignoring ASCII case: both are `pg` or `pg_try`
/// before `_advisory_lock`, so only the `_` bytes (which have no case) are
/// looked for, and each is checked where the text around it could hold
/// either name.
fn advisory_session_lock(statement: &[u8]) -> bool {
    const TAIL: &[u8] = b"_advisory_lock";
    let len = statement.len();
    if len < 2 + TAIL.len() {
        return false;
    }
    // Each `_` at `i` with `2 <= i` and `i + TAIL.len() <= len`.
    let candidates = &statement[2..=len - TAIL.len()];
    let mut from = 0;
    while let Some(at) = find(b'_', &candidates[from..]) {
        let i = 2 + from + at;
        if statement[i..i + TAIL.len()].eq_ignore_ascii_case(TAIL)
            && (statement[i - 2..i].eq_ignore_ascii_case(b"pg")
                || (i >= 6 && statement[i - 6..i].eq_ignore_ascii_case(b"pg_try")))
        {
            return true;
        }
        from += at + 1;
    }
    false
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
    use proptest::prelude::*;

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

    /// The look as first written: a plain reading of the rules, which
    /// [`session_state`] must agree with on every text.
    fn reference(sql: &str) -> Found {
        let mut found = Found::default();
        for statement in sql.as_bytes().split(|&b| b == b';') {
            let statement = statement.trim_ascii_start();
            let (first, rest) = word(statement);
            let second = word(rest.trim_ascii_start()).0;
            let kind = if is(first, b"set")
                && !(is(second, b"local")
                    || is(second, b"transaction")
                    || is(second, b"constraints"))
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

    /// Pieces of SQL that the rules read or that could fool a faster
    /// reading: their keywords and near misses, every byte `trim_ascii`
    /// and `is_ascii_whitespace` treat differently, comments, quoted
    /// strings and dollar quotes holding `;` and keywords, and parts of the
    /// advisory lock functions' names.
    const PIECES: &[&str] = &[
        "set",
        "local",
        "session",
        "transaction",
        "constraints",
        "listen",
        "unlisten",
        "prepare",
        "declare",
        "cursor",
        "with",
        "hold",
        "with hold",
        "with  hold",
        "for",
        "create",
        "temp",
        "temporary",
        "table",
        "begin",
        "start",
        "commit",
        "end",
        "abort",
        "rollback",
        "to",
        "savepoint",
        "select",
        "sets",
        "rollbacks",
        "transactions",
        "pg_advisory_lock",
        "pg_try_advisory_lock",
        "pg_advisory_lock_shared",
        "pg_advisory_xact_lock",
        "pg_try_advisory_xact_lock",
        "pg_",
        "pg",
        "_try",
        "try_",
        "_advisory",
        "advisory_",
        "_lock",
        "lock",
        "_",
        "__",
        "p",
        "g",
        "(1)",
        "1",
        "$1::int",
        "x",
        "a_b",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\x0b",
        "\x0c",
        ";",
        ";;",
        "-- set x\n",
        "/* ; listen x */",
        "'a;b'",
        "'it''s; SET x'",
        "$$ ; LISTEN x $$",
        "$t$;begin$t$",
        "\"set\"",
        "é",
        "\u{17f}",
        "\u{212a}",
        "\0",
    ];

    /// Generated SQL: pieces joined, each piece in random ASCII case.
    fn sql() -> impl Strategy<Value = String> {
        proptest::collection::vec((0..PIECES.len(), any::<u64>()), 0..48).prop_map(|pieces| {
            let mut sql = String::new();
            for (piece, case) in pieces {
                for (i, c) in PIECES[piece].chars().enumerate() {
                    if case >> (i % 64) & 1 == 1 {
                        sql.push(c.to_ascii_uppercase());
                    } else {
                        sql.push(c);
                    }
                }
            }
            sql
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn agrees_with_the_reference_on_generated_sql(sql in sql()) {
            prop_assert_eq!(session_state(&sql), reference(&sql), "{:?}", sql);
        }

        #[test]
        fn agrees_with_the_reference_on_any_text(sql in any::<String>()) {
            prop_assert_eq!(session_state(&sql), reference(&sql), "{:?}", sql);
        }
    }

    #[test]
    fn agrees_with_the_reference_at_the_edges() {
        for sql in [
            "set",
            "SET",
            "set\x0bx",
            "set\tlocal",
            "set local",
            "setlocal",
            "rollbacks",
            "rollback",
            "rollback\nto",
            "rollback to",
            "start\ttransaction",
            "pg_advisory_lock",
            "pg_advisory_loc",
            "xpg_try_advisory_lock",
            "pg_try_advisory_lock",
            "PG_TRY_ADVISORY_LOCK",
            "pg__advisory_lock",
            "_advisory_lock",
            "g_advisory_lock",
            "SET LOCAL a = pg_advisory_lock(1)",
            "select 1; set x = 1; select pg_advisory_lock(1)",
            "select pg_advisory_lock(1); set x = 1",
            "declare c cursor with hold for select pg_advisory_lock(1)",
            "declare c cursor for select pg_advisory_lock(1)",
            "declare c cursor with\thold",
            "create temp table t; commit; begin",
            " SELECT 1",
            "/* c */ SET x = 1",
            "-- c\nSET x = 1",
            "select 1;",
            "SELECT 1;set x=1",
            "select pg_advisory_lock(1)",
            "SELECT PG_ADVISORY_LOCK(1)",
            "Select Pg_Try_Advisory_Lock(1)",
            "select pg_advisory_lock(1);",
            "settings",
            "COMMIT;",
            "rollback_x",
            "x_advisory_lock(1)",
            "0123456789abcde",
            "0123456789abcdef",
            "0123456789abcdefg",
            "0123456789abcd;f",
            "0123456789abcde;",
            "0123456789abcdef;",
            "selec\0t set x",
            "\u{212a}",
            "",
            ";",
        ] {
            assert_eq!(session_state(sql), reference(sql), "{sql:?}");
        }
        // Past the length where the vectorised search takes over.
        let long = format!("SELECT {}", "a_b, ".repeat(30));
        for sql in [
            format!("{long}pg_advisory_lock(1)"),
            format!("{long}pg_try_Advisory_lock(1); begin"),
            format!("{long}pg_advisory_xact_lock(1); {long}; set x = 1; commit"),
            format!("{long}; {long}; listen x"),
        ] {
            assert_eq!(session_state(&sql), reference(&sql), "{sql:?}");
            assert!(session_state(&sql).session_state.is_some(), "{sql:?}");
        }
    }

    #[test]
    fn answers_plain_statements_the_quick_way() {
        for sql in [
            "SELECT 1",
            "select * from t where id = $1",
            "INSERT INTO t (a, b) VALUES ($1, $2)",
            "update t set a = 1",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "delete from t",
            "Select pg_advisory_lock(1)",
            "pg_advisory_lock",
            "SELECT pg_advisory_xact_lock(1)",
            "sel\tect 1",
        ] {
            let quick = one_plain_statement(sql.as_bytes());
            assert_eq!(quick, Some(reference(sql)), "{sql:?}");
        }
        for sql in [
            // Shorter than 8 bytes.
            "SELECT",
            // Something to trim first.
            " SELECT 1",
            "\tselect 1",
            "\x0bselect 1",
            "\0select 1",
            // Starts like a keyword.
            "SET x = 1",
            "settings",
            "Commit;  ",
            "comment on table t is 'x'",
            "rollback to a",
            "ENDless text",
            // More than one statement.
            "SELECT 1;",
            "sel;ect 1",
            "select 1234;567",
            "select 12345678;",
            "select 1234567890;",
            "select 1; set x = 1",
        ] {
            assert_eq!(one_plain_statement(sql.as_bytes()), None, "{sql:?}");
            assert_eq!(session_state(sql), reference(sql), "{sql:?}");
        }
    }

    #[test]
    fn every_keyword_takes_the_long_way() {
        for keyword in [
            "set", "listen", "prepare", "declare", "create", "begin", "start", "commit", "end",
            "abort", "rollback",
        ] {
            for word in [keyword.to_owned(), keyword.to_ascii_uppercase()] {
                let sql = format!("{word} transaction x");
                assert_eq!(one_plain_statement(sql.as_bytes()), None, "{sql:?}");
            }
        }
    }

    /// Common first words and pieces of them, for the quick way.
    const FIRST_WORDS: &[&str] = &[
        "SELECT ", "select\t", "insert ", "Update ", "with", "sel", "s",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Short texts around the lengths where the quick way reads 8 and
        /// 16 bytes, made of keywords' letters, `;`, `_` and whitespace.
        #[test]
        fn agrees_with_the_reference_on_short_texts(
            sql in "[sSeEtTlLcCoOmMbBgGnNrRaA;_ \t\x0b\n1]{0,20}"
        ) {
            prop_assert_eq!(session_state(&sql), reference(&sql), "{:?}", sql);
        }

        /// A common first word, then generated SQL: the quick way's texts
        /// and their near misses.
        #[test]
        fn agrees_with_the_reference_after_a_plain_first_word(
            first in prop::sample::select(FIRST_WORDS),
            rest in sql(),
        ) {
            let sql = format!("{first}{rest}");
            prop_assert_eq!(session_state(&sql), reference(&sql), "{:?}", sql);
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
