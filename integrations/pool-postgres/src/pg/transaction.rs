//! Transactions begun through a [`PgClient`](super::PgClient), tracked until
//! they are committed or rolled back.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, IsolationLevel, Row, SimpleQueryMessage, Statement};
use tokio_postgres::{Transaction, TransactionBuilder};

use super::error::PgError;
use super::statement::{refuse, PgStatement};
use crate::PoolerMode;

/// What a [`PgClient`](super::PgClient) knows about the transactions open
/// on its connection: one begun through the wrapper (a [`PgTransaction`],
/// or SQL text sent by the ambient scopes), and, behind a pooler, a `BEGIN`
/// sent as text or a describe's own transaction. The reset on return reads
/// [`is_open`](Self::is_open) and clears both with [`reset`](Self::reset).
#[derive(Debug, Default)]
pub(super) struct TxTracker {
    /// A transaction begun through this wrapper has not been committed or
    /// rolled back through it. Only touched through `&mut` (the client's,
    /// or the borrow a `PgTransaction` holds).
    wrapped: bool,
    /// Behind a pooler: a `BEGIN` sent as text was not yet followed by its
    /// end, or a describe's own transaction is open. Read by the reset on
    /// return (after the return orders it) and by the describe on the same
    /// client: Relaxed.
    raw: AtomicBool,
}

impl TxTracker {
    /// Either mark is set.
    pub(super) fn is_open(&self) -> bool {
        self.wrapped || self.raw.load(Ordering::Relaxed)
    }

    /// A transaction begun through the wrapper is open.
    pub(super) fn wrapped_open(&self) -> bool {
        self.wrapped
    }

    /// Marks a transaction begun through the wrapper (before anything is
    /// sent, so a begin dropped half-way still counts).
    pub(super) fn begin_wrapped(&mut self) {
        self.wrapped = true;
    }

    /// Clears the wrapper's mark once its commit or rollback went through.
    pub(super) fn end_wrapped(&mut self) {
        self.wrapped = false;
    }

    /// Sets the wrapper's mark as the ambient scopes' SQL text says.
    pub(super) fn set_wrapped(&mut self, open: bool) {
        self.wrapped = open;
    }

    /// A transaction begun as text (or a describe's own) is open.
    pub(super) fn raw_open(&self) -> bool {
        self.raw.load(Ordering::Relaxed)
    }

    /// Follows a `BEGIN` (`true`) or its end (`false`) sent as text, or a
    /// describe's own transaction; through `&self`, as queries share the
    /// client.
    pub(super) fn set_raw(&self, open: bool) {
        self.raw.store(open, Ordering::Relaxed);
    }

    /// Clears both marks, after a successful reset.
    pub(super) fn reset(&mut self) {
        self.wrapped = false;
        *self.raw.get_mut() = false;
    }
}

/// A `tokio_postgres` transaction whose end the pool can see.
///
/// Dereferences (mutably, for savepoints) to [`Transaction`]; end it with
/// this type's [`commit`](Self::commit) or [`rollback`](Self::rollback).
/// Until one of them succeeds, the connection counts as dirty and the
/// [`Rollback`](super::ResetMode::Rollback) mode sends `ROLLBACK` when it
/// comes back to the pool. Dropping it rolls back as `tokio_postgres` does.
///
/// Its own `query`, `query_one`, `query_opt`, `execute`, `batch_execute`,
/// `simple_query` and `prepare` are the driver's, but behind a
/// transaction-mode pooler they refuse text that sets session state, as
/// the pooled client's do (see
/// [`PostgresManager::pooler_mode`](super::PostgresManager::pooler_mode)).
#[must_use = "dropping the transaction rolls it back"]
pub struct PgTransaction<'a> {
    tx: Transaction<'a>,
    /// The owning `PgClient`'s transaction marks.
    open: &'a mut TxTracker,
    /// Behind a transaction-mode pooler: query texts are looked at.
    behind_pooler: bool,
}

/// Forwards a text-taking method of [`Transaction`], looking at the text
/// first behind a pooler.
macro_rules! checked {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $out:ty) => {
        $(#[$doc])*
        ///
        /// # Errors
        ///
        /// [`PgError::SessionStateBehindPooler`]: behind a transaction-mode
        /// pooler, the text sets session state (nothing is sent). Else the
        /// driver's error ([`PgError::Db`]).
        ///
        /// # Cancel safety
        ///
        /// As the driver's method.
        pub async fn $name<T>(&self, statement: &T, $($arg: $ty),*) -> Result<$out, PgError>
        where
            T: ?Sized + PgStatement,
        {
            self.look(statement.text())?;
            Ok(self.tx.$name(statement, $($arg),*).await?)
        }
    };
}

impl<'a> PgTransaction<'a> {
    pub(super) fn new(tx: Transaction<'a>, open: &'a mut TxTracker, behind_pooler: bool) -> Self {
        Self {
            tx,
            open,
            behind_pooler,
        }
    }

    /// Behind a pooler, refuses text that sets session state.
    fn look(&self, text: Option<&str>) -> Result<(), PgError> {
        match text {
            Some(sql) if self.behind_pooler => refuse(sql),
            _ => Ok(()),
        }
    }

    checked!(
        /// Runs a query and returns its rows, like [`Transaction::query`].
        query(params: &[&(dyn ToSql + Sync)]) -> Vec<Row>
    );
    checked!(
        /// Runs a query that returns exactly one row, like
        /// [`Transaction::query_one`].
        query_one(params: &[&(dyn ToSql + Sync)]) -> Row
    );
    checked!(
        /// Runs a query that returns at most one row, like
        /// [`Transaction::query_opt`].
        query_opt(params: &[&(dyn ToSql + Sync)]) -> Option<Row>
    );
    checked!(
        /// Runs a statement and returns the number of rows it changed, like
        /// [`Transaction::execute`].
        execute(params: &[&(dyn ToSql + Sync)]) -> u64
    );

    /// Runs statements separated by `;` with the simple protocol, like
    /// [`Transaction::batch_execute`].
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As the driver's method.
    pub async fn batch_execute(&self, query: &str) -> Result<(), PgError> {
        self.look(Some(query))?;
        Ok(self.tx.batch_execute(query).await?)
    }

    /// Runs statements with the simple protocol and returns their text
    /// rows, like [`Transaction::simple_query`].
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As the driver's method.
    pub async fn simple_query(&self, query: &str) -> Result<Vec<SimpleQueryMessage>, PgError> {
        self.look(Some(query))?;
        Ok(self.tx.simple_query(query).await?)
    }

    /// Prepares a statement, like [`Transaction::prepare`].
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// # Cancel safety
    ///
    /// As the driver's method.
    pub async fn prepare(&self, query: &str) -> Result<Statement, PgError> {
        self.look(Some(query))?;
        Ok(self.tx.prepare(query).await?)
    }

    /// Commits, like [`Transaction::commit`], and clears the mark.
    ///
    /// # Errors
    ///
    /// The driver's error if `COMMIT` fails; the mark stays, so the
    /// connection is rolled back on return.
    ///
    /// # Cancel safety
    ///
    /// If dropped before the server answered, the mark stays and the
    /// connection is rolled back on return (a no-op if the commit went
    /// through).
    pub async fn commit(self) -> Result<(), Error> {
        let Self { tx, open, .. } = self;
        tx.commit().await?;
        open.end_wrapped();
        Ok(())
    }

    /// Rolls back, like [`Transaction::rollback`], and clears the mark.
    ///
    /// # Errors
    ///
    /// The driver's error if `ROLLBACK` fails; the mark stays.
    ///
    /// # Cancel safety
    ///
    /// As for [`commit`](Self::commit).
    pub async fn rollback(self) -> Result<(), Error> {
        let Self { tx, open, .. } = self;
        tx.rollback().await?;
        open.end_wrapped();
        Ok(())
    }
}

impl<'a> Deref for PgTransaction<'a> {
    type Target = Transaction<'a>;

    fn deref(&self) -> &Transaction<'a> {
        &self.tx
    }
}

impl<'a> DerefMut for PgTransaction<'a> {
    fn deref_mut(&mut self) -> &mut Transaction<'a> {
        &mut self.tx
    }
}

impl fmt::Debug for PgTransaction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTransaction").finish_non_exhaustive()
    }
}

/// Builds a [`PgTransaction`] with custom settings, like
/// [`TransactionBuilder`].
#[must_use = "a transaction builder does nothing until `start()` is called"]
pub struct PgTransactionBuilder<'a> {
    builder: TransactionBuilder<'a>,
    open: &'a mut TxTracker,
    behind_pooler: bool,
}

impl<'a> PgTransactionBuilder<'a> {
    pub(super) fn new(
        builder: TransactionBuilder<'a>,
        open: &'a mut TxTracker,
        pooler_mode: PoolerMode,
    ) -> Self {
        Self {
            builder,
            open,
            behind_pooler: pooler_mode == PoolerMode::Transaction,
        }
    }

    /// Sets the isolation level.
    pub fn isolation_level(self, level: IsolationLevel) -> Self {
        Self {
            builder: self.builder.isolation_level(level),
            open: self.open,
            behind_pooler: self.behind_pooler,
        }
    }

    /// Sets the access mode.
    pub fn read_only(self, read_only: bool) -> Self {
        Self {
            builder: self.builder.read_only(read_only),
            open: self.open,
            behind_pooler: self.behind_pooler,
        }
    }

    /// Sets the deferrability (serializable read-only transactions only).
    pub fn deferrable(self, deferrable: bool) -> Self {
        Self {
            builder: self.builder.deferrable(deferrable),
            open: self.open,
            behind_pooler: self.behind_pooler,
        }
    }

    /// Begins the transaction. The connection is marked dirty before
    /// `START TRANSACTION` is sent.
    ///
    /// # Errors
    ///
    /// The driver's error if `START TRANSACTION` fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for the pool: the mark is set before anything is sent.
    pub async fn start(self) -> Result<PgTransaction<'a>, Error> {
        let Self {
            builder,
            open,
            behind_pooler,
        } = self;
        open.begin_wrapped();
        let tx = builder.start().await?;
        Ok(PgTransaction::new(tx, open, behind_pooler))
    }
}

impl fmt::Debug for PgTransactionBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTransactionBuilder")
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::TxTracker;

    #[test]
    fn a_new_tracker_has_nothing_open() {
        let tracker = TxTracker::default();
        assert!(!tracker.is_open());
        assert!(!tracker.wrapped_open());
        assert!(!tracker.raw_open());
    }

    #[test]
    fn a_wrapped_transaction_is_open_until_its_end() {
        let mut tracker = TxTracker::default();
        tracker.begin_wrapped();
        assert!(tracker.is_open());
        assert!(tracker.wrapped_open());
        assert!(!tracker.raw_open());
        tracker.end_wrapped();
        assert!(!tracker.is_open());
    }

    #[test]
    fn the_ambient_scopes_set_and_clear_the_wrapped_mark() {
        let mut tracker = TxTracker::default();
        tracker.set_wrapped(true);
        assert!(tracker.is_open() && tracker.wrapped_open());
        tracker.set_wrapped(false);
        assert!(!tracker.is_open());
    }

    #[test]
    fn a_text_begin_is_open_until_its_text_end() {
        let tracker = TxTracker::default();
        tracker.set_raw(true);
        assert!(tracker.is_open());
        assert!(tracker.raw_open());
        assert!(!tracker.wrapped_open());
        tracker.set_raw(false);
        assert!(!tracker.is_open());
    }

    #[test]
    fn either_mark_alone_keeps_it_open() {
        let mut tracker = TxTracker::default();
        tracker.begin_wrapped();
        tracker.set_raw(true);
        tracker.end_wrapped();
        assert!(tracker.is_open(), "the text begin is still open");
        tracker.set_raw(false);
        tracker.begin_wrapped();
        assert!(tracker.is_open(), "the wrapped one is still open");
    }

    #[test]
    fn reset_clears_both_marks() {
        let mut tracker = TxTracker::default();
        tracker.begin_wrapped();
        tracker.set_raw(true);
        tracker.reset();
        assert!(!tracker.is_open());
        assert!(!tracker.wrapped_open());
        assert!(!tracker.raw_open());
    }
}
