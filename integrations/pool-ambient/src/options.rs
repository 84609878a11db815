//! What a scope asks for: how it relates to a transaction already current
//! ([`Propagation`]) and the settings of one it begins ([`Isolation`],
//! read-only).

use std::fmt;

/// How a scope relates to the transaction already current for its pool in
/// this task.
///
/// | mode | a transaction is current | none is current |
/// |---|---|---|
/// | [`Required`](Self::Required) (default) | joins it | begins one |
/// | [`RequiresNew`](Self::RequiresNew) | suspends it; begins one on a second connection | begins one |
/// | [`Nested`](Self::Nested) | a `SAVEPOINT` in it | begins one |
/// | [`Mandatory`](Self::Mandatory) | joins it | fails with [`TxError::NoTransaction`](super::TxError::NoTransaction) |
/// | [`Never`](Self::Never) | fails with [`TxError::AlreadyInTransaction`](super::TxError::AlreadyInTransaction) | runs the body without one |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Propagation {
    /// Join the current transaction, else begin one. A joining scope does
    /// not commit: its `Err`, panic or cancellation marks the transaction
    /// rollback-only, and the scope that began it then rolls back and
    /// fails with [`TxError::RollbackOnly`](super::TxError::RollbackOnly).
    #[default]
    Required,
    /// Begin a transaction of its own on another connection of the pool,
    /// committed or rolled back on its own; the current one, if any, waits
    /// suspended (it keeps its connection).
    RequiresNew,
    /// A savepoint in the current transaction: released when the body
    /// returns `Ok`, rolled back to on `Err`, panic or a failed subtask,
    /// leaving the outer transaction going. Without a current transaction,
    /// as [`Required`](Self::Required).
    ///
    /// Savepoint scopes polled together on one transaction take turns: one
    /// opens only when no sibling's savepoint is open (see the
    /// [module docs](super#savepoints-polled-together)).
    Nested,
    /// Join the current transaction; fail without one.
    Mandatory,
    /// Run without a transaction; fail inside one.
    Never,
}

impl fmt::Display for Propagation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Required => "required",
            Self::RequiresNew => "requires-new",
            Self::Nested => "nested",
            Self::Mandatory => "mandatory",
            Self::Never => "never",
        })
    }
}

/// The isolation level of a transaction a scope begins (joining scopes and
/// savepoints keep the outer transaction's).
///
/// PostgreSQL and MySQL/MariaDB have all four. SQLite runs every
/// transaction serializable: only [`Serializable`](Self::Serializable) is
/// accepted there, the others fail with
/// [`TxError::Unsupported`](super::TxError::Unsupported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Isolation {
    /// `READ UNCOMMITTED` (PostgreSQL runs it as `READ COMMITTED`).
    ReadUncommitted,
    /// `READ COMMITTED`.
    ReadCommitted,
    /// `REPEATABLE READ`.
    RepeatableRead,
    /// `SERIALIZABLE`.
    Serializable,
}

impl Isolation {
    /// The MySQL statement that sets the isolation level of the session's
    /// next transaction (MySQL's `START TRANSACTION` takes no level).
    pub fn mysql_set(self) -> &'static str {
        match self {
            Self::ReadUncommitted => "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
            Self::ReadCommitted => "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            Self::RepeatableRead => "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
            Self::Serializable => "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        }
    }

    /// The level as SQL names it.
    pub fn as_sql(self) -> &'static str {
        match self {
            Self::ReadUncommitted => "READ UNCOMMITTED",
            Self::ReadCommitted => "READ COMMITTED",
            Self::RepeatableRead => "REPEATABLE READ",
            Self::Serializable => "SERIALIZABLE",
        }
    }
}

/// The settings of a transaction a scope begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct TxOptions {
    /// The isolation level; `None` keeps the server's default.
    pub isolation: Option<Isolation>,
    /// Whether the transaction may only read.
    pub read_only: bool,
}

impl TxOptions {
    /// The server's defaults: its isolation level, read-write.
    pub fn new() -> Self {
        Self::default()
    }

    /// The PostgreSQL statement that begins a transaction with these
    /// settings (also what MySQL's `START TRANSACTION` takes after
    /// `ISOLATION` is set apart).
    pub fn postgres_begin(self) -> &'static str {
        use Isolation::*;
        match (self.isolation, self.read_only) {
            (None, false) => "BEGIN",
            (None, true) => "BEGIN READ ONLY",
            (Some(ReadUncommitted), false) => "BEGIN ISOLATION LEVEL READ UNCOMMITTED",
            (Some(ReadUncommitted), true) => "BEGIN ISOLATION LEVEL READ UNCOMMITTED READ ONLY",
            (Some(ReadCommitted), false) => "BEGIN ISOLATION LEVEL READ COMMITTED",
            (Some(ReadCommitted), true) => "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY",
            (Some(RepeatableRead), false) => "BEGIN ISOLATION LEVEL REPEATABLE READ",
            (Some(RepeatableRead), true) => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            (Some(Serializable), false) => "BEGIN ISOLATION LEVEL SERIALIZABLE",
            (Some(Serializable), true) => "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY",
        }
    }
}
