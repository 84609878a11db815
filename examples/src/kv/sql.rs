//! The SQL each backend speaks: one [`Sql`] per store, its statements written
//! once per dialect with the store's (validated) table name in them.
//!
//! The three dialects agree on what matters for a lossless copy: keys compare
//! and sort by their bytes (PostgreSQL `COLLATE "C"`, SQLite's default
//! `BINARY`, MariaDB `utf8mb4_nopad_bin`), so `ORDER BY` gives the same order
//! everywhere (the order of Rust's `str`), `'a'`, `'A'` and `'a '` are three
//! keys, and paging by "key greater than the last one" visits every row once.
//! Values are JSON kept as text (not `jsonb`), so they come back byte for byte.

use std::fmt;

use super::KvError;

/// Which database a store runs on, chosen by the URL's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// `sqlite:` (a file, or `sqlite::memory:`).
    Sqlite,
    /// `postgres://` or `postgresql://`.
    Postgres,
    /// `mysql://` (MariaDB or MySQL).
    MariaDb,
}

impl BackendKind {
    /// The backend a URL's scheme names.
    ///
    /// # Errors
    ///
    /// [`KvError::UnsupportedUrl`] for any other scheme or none. Only the
    /// scheme is kept in the error, never the rest of the URL.
    pub fn from_url(url: &str) -> Result<Self, KvError> {
        let scheme = url.split_once(':').map(|(s, _)| s).filter(|s| {
            let mut chars = s.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        });
        match scheme.map(str::to_ascii_lowercase).as_deref() {
            Some("sqlite") => Ok(Self::Sqlite),
            Some("postgres" | "postgresql") => Ok(Self::Postgres),
            Some("mysql") => Ok(Self::MariaDb),
            other => Err(KvError::UnsupportedUrl {
                scheme: other.map(str::to_owned),
            }),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
            Self::MariaDb => "MariaDB",
        })
    }
}

/// Rows per page when a copy reads its source.
pub(crate) const PAGE_ROWS: usize = 256;

/// The statements of one store.
#[derive(Debug, Clone)]
pub(crate) struct Sql {
    pub(crate) create: String,
    pub(crate) drop: String,
    pub(crate) upsert: String,
    /// `INSERT ... ` before a multi-row `VALUES` list.
    pub(crate) upsert_many_head: String,
    /// The conflict clause after a multi-row `VALUES` list.
    pub(crate) upsert_many_tail: &'static str,
    pub(crate) select: String,
    pub(crate) delete: String,
    pub(crate) keys: String,
    pub(crate) count: String,
    pub(crate) first_page: String,
    pub(crate) next_page: String,
    /// `SELECT key, value ... WHERE key IN (` before a list of keys.
    pub(crate) select_in_head: String,
    /// Opens a transaction that reads one consistent snapshot.
    pub(crate) begin_snapshot: &'static str,
    /// Opens a transaction that will write.
    pub(crate) begin_write: &'static str,
}

impl Sql {
    pub(crate) fn new(kind: BackendKind, table: &str) -> Result<Self, KvError> {
        check_table(table)?;
        let t = table;
        // A column of MariaDB with a binary collation is flagged BINARY on
        // the wire, which sqlx will not decode as a string: read the key
        // through a cast to the default (text) collation. It is compared and
        // sorted in its own collation everywhere else.
        let (create, key_out, p1, p2, begin_snapshot, begin_write, tail) = match kind {
            BackendKind::Sqlite => (
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} (
                         item_key TEXT NOT NULL PRIMARY KEY,
                         item_json TEXT NOT NULL)"
                ),
                "item_key",
                "?1",
                "?2",
                // Deferred: the snapshot is taken at the first read.
                "BEGIN",
                // Take the write lock now, so the transaction never has to
                // upgrade a read lock (which SQLite refuses under contention).
                "BEGIN IMMEDIATE",
                " ON CONFLICT (item_key) DO UPDATE SET item_json = excluded.item_json",
            ),
            BackendKind::Postgres => (
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} (
                         item_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
                         item_json TEXT NOT NULL)"
                ),
                "item_key",
                "$1",
                "$2",
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                "BEGIN",
                " ON CONFLICT (item_key) DO UPDATE SET item_json = excluded.item_json",
            ),
            BackendKind::MariaDb => (
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} (
                         item_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin
                             NOT NULL PRIMARY KEY,
                         item_json LONGTEXT CHARACTER SET utf8mb4 NOT NULL)
                     ENGINE = InnoDB"
                ),
                "CAST(item_key AS CHAR CHARACTER SET utf8mb4)",
                "?",
                "?",
                "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
                "START TRANSACTION",
                " ON DUPLICATE KEY UPDATE item_json = VALUES(item_json)",
            ),
        };
        Ok(Self {
            create,
            drop: format!("DROP TABLE IF EXISTS {t}"),
            upsert: format!("INSERT INTO {t} (item_key, item_json) VALUES ({p1}, {p2}){tail}"),
            upsert_many_head: format!("INSERT INTO {t} (item_key, item_json) "),
            upsert_many_tail: tail,
            select: format!("SELECT item_json FROM {t} WHERE item_key = {p1}"),
            delete: format!("DELETE FROM {t} WHERE item_key = {p1}"),
            keys: format!("SELECT {key_out} FROM {t} ORDER BY item_key"),
            count: format!("SELECT COUNT(*) FROM {t}"),
            first_page: format!(
                "SELECT {key_out}, item_json FROM {t} ORDER BY item_key LIMIT {PAGE_ROWS}"
            ),
            next_page: format!(
                "SELECT {key_out}, item_json FROM {t} WHERE item_key > {p1} \
                 ORDER BY item_key LIMIT {PAGE_ROWS}"
            ),
            select_in_head: format!("SELECT {key_out}, item_json FROM {t} WHERE item_key IN ("),
            begin_snapshot,
            begin_write,
        })
    }
}

/// Longest table name every backend accepts (PostgreSQL's limit).
const MAX_TABLE_LEN: usize = 63;

/// A table name goes into SQL text, so it must be a plain identifier.
fn check_table(table: &str) -> Result<(), KvError> {
    let mut chars = table.chars();
    let reason = if table.len() > MAX_TABLE_LEN {
        "longer than 63 characters"
    } else if !chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
    {
        "must start with a lowercase ASCII letter or `_`"
    } else if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        "only lowercase ASCII letters, digits and `_` are allowed"
    } else {
        return Ok(());
    };
    Err(KvError::InvalidTable { reason })
}

/// Longest key, in characters (MariaDB's `VARCHAR(255)`).
pub(crate) const MAX_KEY_CHARS: usize = 255;

/// A key must be storable, unchanged, on every backend.
pub(crate) fn check_key(key: &str) -> Result<(), KvError> {
    let reason = if key.is_empty() {
        "empty"
    } else if key.contains('\0') {
        "contains a NUL character, which PostgreSQL text cannot hold"
    } else if key.chars().count() > MAX_KEY_CHARS {
        "longer than 255 characters"
    } else {
        return Ok(());
    };
    Err(KvError::InvalidKey { reason })
}
