//! Transactions begun through a [`PgClient`](super::PgClient), tracked until
//! they are committed or rolled back.

use std::fmt;
use std::ops::{Deref, DerefMut};

use tokio_postgres::{Error, IsolationLevel, Transaction, TransactionBuilder};

/// A `tokio_postgres` transaction whose end the pool can see.
///
/// Dereferences (mutably, for savepoints) to [`Transaction`]; end it with
/// this type's [`commit`](Self::commit) or [`rollback`](Self::rollback).
/// Until one of them succeeds, the connection counts as dirty and the
/// [`Rollback`](super::ResetMode::Rollback) mode sends `ROLLBACK` when it
/// comes back to the pool. Dropping it rolls back as `tokio_postgres` does.
#[must_use = "dropping the transaction rolls it back"]
pub struct PgTransaction<'a> {
    tx: Transaction<'a>,
    /// The owning `PgClient`'s "transaction open" mark.
    open: &'a mut bool,
}

impl<'a> PgTransaction<'a> {
    pub(super) fn new(tx: Transaction<'a>, open: &'a mut bool) -> Self {
        Self { tx, open }
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
        let Self { tx, open } = self;
        tx.commit().await?;
        *open = false;
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
        let Self { tx, open } = self;
        tx.rollback().await?;
        *open = false;
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
    open: &'a mut bool,
}

impl<'a> PgTransactionBuilder<'a> {
    pub(super) fn new(builder: TransactionBuilder<'a>, open: &'a mut bool) -> Self {
        Self { builder, open }
    }

    /// Sets the isolation level.
    pub fn isolation_level(self, level: IsolationLevel) -> Self {
        Self {
            builder: self.builder.isolation_level(level),
            open: self.open,
        }
    }

    /// Sets the access mode.
    pub fn read_only(self, read_only: bool) -> Self {
        Self {
            builder: self.builder.read_only(read_only),
            open: self.open,
        }
    }

    /// Sets the deferrability (serializable read-only transactions only).
    pub fn deferrable(self, deferrable: bool) -> Self {
        Self {
            builder: self.builder.deferrable(deferrable),
            open: self.open,
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
        let Self { builder, open } = self;
        *open = true;
        let tx = builder.start().await?;
        Ok(PgTransaction::new(tx, open))
    }
}

impl fmt::Debug for PgTransactionBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTransactionBuilder")
            .finish_non_exhaustive()
    }
}
