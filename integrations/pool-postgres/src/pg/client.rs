//! The pooled client: a `tokio_postgres::Client` plus transaction tracking,
//! a statement cache and a cancel handle.
//!
//! The type and its state live here; its methods are split by concern:
//! the query forwarders in `query.rs`, the statement cache in
//! `statements.rs`, the describe of transaction-pooler mode in
//! `describe.rs` and the cancel on timeout in `cancel.rs`.
//!
//! Everything but the driver's `Client` is state that a query seldom or
//! never touches, so [`PgClient`] keeps it all behind one box: the pool
//! moves a connection by value when it hands it straight to a waiting
//! caller, and a small connection is a cheap move (see BENCH.md,
//! "Counted").

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_postgres::{Client, Error};

use super::timeout::{CancelHandle, Canceller};

use super::cache::Statements;
use super::failover::{is_server_gone, HostMark};
use super::transaction::{PgTransaction, PgTransactionBuilder, TxTracker};
use crate::fleet::FleetSeat;
use crate::PoolerMode;

/// A pooled `tokio_postgres` connection.
///
/// Dereferences to [`Client`] for queries. Start transactions through
/// [`transaction`](Self::transaction) or
/// [`build_transaction`](Self::build_transaction) (the method syntax
/// `conn.transaction()` finds these first), so that the
/// [`Rollback`](super::ResetMode::Rollback) reset mode knows about them.
pub struct PgClient {
    /// Held inline. It was boxed, to keep the `PgClient` moved at each
    /// handoff to a waiting caller one pointer wide; counted with code
    /// placement fixed (one codegen unit, `s5_cycles`, 16 and 256 tasks) the
    /// box saved 0.2 % of a query, within the runs' spread, so it went.
    inner: Inner,
}

/// What a [`PgClient`] holds.
struct Inner {
    client: Client,
    /// The statement caches, and how statements reach the server.
    statements: Statements,
    pooler_mode: PoolerMode,
    /// The fleet budget ticket this connection holds.
    ticket: Option<i32>,
    /// The ticket counted for its instance's fair share; `None` without
    /// fair share, and once the connection is given back.
    seat: Option<FleetSeat>,
    /// One describe at a time on this connection, so that two tasks sharing
    /// it do not interleave their `BEGIN`/`COMMIT`s.
    describing: tokio::sync::Mutex<()>,
    cancel: CancelHandle,
    /// The transactions open on the connection.
    tx: TxTracker,
    /// A query run by `with_timeout` was abandoned; the connection must not
    /// be reused. Relaxed is enough: the pool reads it after taking the
    /// connection back, and the return itself orders the two.
    abandoned: AtomicBool,
    /// Its server's epoch at connect, and whether a query here said the
    /// server is read-only or going away (see [`is_retired`](PgClient::is_retired)).
    host: HostMark,
    /// The task that drives the socket: aborted when an abandoned
    /// connection is dropped, which closes the socket at once, and awaited
    /// by [`close`](PgClient::close).
    driver: Option<tokio::task::JoinHandle<()>>,
    /// What the server reported at startup about its role.
    reported: ReportedRole,
}

/// What a server said about its role in its startup parameter statuses
/// (PostgreSQL 14 and later send both; older servers neither).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReportedRole {
    /// `in_hot_standby`: `Some(true)` on a standby.
    pub(crate) in_hot_standby: Option<bool>,
    /// `default_transaction_read_only`.
    pub(crate) default_read_only: Option<bool>,
}

impl ReportedRole {
    /// Reads the two parameter statuses as the server spelt them (`on` or
    /// `off`); anything else counts as not reported.
    pub(super) fn from_params(in_hot_standby: Option<&str>, read_only: Option<&str>) -> Self {
        let flag = |v: Option<&str>| match v {
            Some("on") => Some(true),
            Some("off") => Some(false),
            _ => None,
        };
        Self {
            in_hot_standby: flag(in_hot_standby),
            default_read_only: flag(read_only),
        }
    }
}

impl PgClient {
    pub(super) fn new(
        client: Client,
        cache_capacity: usize,
        canceller: Canceller,
        cancel_timeout: Duration,
        pooler_mode: PoolerMode,
        ticket: Option<i32>,
        host: HostMark,
    ) -> Self {
        Self {
            inner: Inner {
                client,
                statements: Statements::new(cache_capacity),
                pooler_mode,
                ticket,
                seat: None,
                describing: tokio::sync::Mutex::new(()),
                cancel: CancelHandle::new(canceller, cancel_timeout),
                tx: TxTracker::default(),
                abandoned: AtomicBool::new(false),
                host,
                driver: None,
                reported: ReportedRole::default(),
            },
        }
    }

    /// Adds what the server reported about its role at startup.
    pub(super) fn with_reported_role(mut self, reported: ReportedRole) -> Self {
        self.inner.reported = reported;
        self
    }

    /// What the server reported about its role at startup.
    pub(crate) fn reported_role(&self) -> ReportedRole {
        self.inner.reported
    }

    /// Sends statements unnamed: queries given as text run as typed unnamed
    /// statements, and the cache's capacity goes to their parameter types.
    pub(super) fn with_unnamed_statements(mut self, unnamed: bool) -> Self {
        if unnamed {
            self.inner.statements.go_unnamed();
        }
        self
    }

    /// Marks the connection as relayed (see [`is_relayed`](Self::is_relayed)):
    /// named statements are safe, so [`prepare_cached`](Self::prepare_cached)
    /// caches them, up to the same capacity as the parameter types.
    pub(super) fn relayed(mut self) -> Self {
        self.inner.statements.go_relayed();
        self
    }

    /// Counts the connection's ticket for its instance's fair share.
    pub(super) fn with_fleet_seat(mut self, seat: Option<FleetSeat>) -> Self {
        self.inner.seat = seat;
        self
    }

    /// Whether this connection is to be given back to the fleet budget
    /// (closed on return) for an instance below its share; once `true`, it
    /// no longer counts as held. No I/O: one atomic load when nothing is
    /// to be given back.
    pub(super) fn gives_back_ticket(&mut self) -> bool {
        if self.inner.seat.as_ref().is_some_and(FleetSeat::give_back) {
            self.inner.seat = None;
            return true;
        }
        false
    }

    /// Adds the handle of the task that drives the socket, aborted when an
    /// abandoned connection is dropped.
    pub(super) fn with_driver(mut self, driver: tokio::task::JoinHandle<()>) -> Self {
        self.inner.driver = Some(driver);
        self
    }

    /// Closes the session and waits until its socket is closed: dropping
    /// the client makes the driver send `Terminate` and end (an abandoned
    /// one, whose socket may be stuck, is aborted instead).
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the driver goes on to its end by itself.
    pub(super) async fn close(mut self) {
        let driver = self.inner.driver.take();
        let abandoned = self.is_abandoned();
        drop(self);
        if let Some(driver) = driver {
            if abandoned {
                driver.abort();
            }
            // Its end, or its abort: the socket is closed either way.
            let _ = driver.await;
        }
    }

    /// Marks the connection abandoned while a check runs (`true`), and
    /// clears the mark once it answered (`false`): a check dropped by its
    /// timeout leaves the mark, so the pool closes the connection and its
    /// socket goes with it.
    pub(crate) fn set_abandoned(&self, abandoned: bool) {
        self.inner.abandoned.store(abandoned, Ordering::Relaxed);
    }

    /// Passes `result` through; an error that says the server turned
    /// read-only or is going away retires this connection and the others
    /// opened to the same server before it.
    pub(super) fn observe<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(error) = &result {
            if is_server_gone(error) {
                self.inner.host.server_gone();
            }
        }
        result
    }

    /// Whether this connection is retired: a query through this wrapper
    /// failed with a SQLSTATE that says the server turned read-only
    /// (`25006`) or is shutting down or gone (`57P01`, `57P02`, `57P03`,
    /// class `08`), or such an error on another connection to the same
    /// server came after this one connected. The pool closes a retired
    /// connection on return and refuses it at validation; see the
    /// [module docs](crate#failover).
    pub fn is_retired(&self) -> bool {
        self.inner.host.is_retired()
    }

    /// Whether a query on this connection itself failed with a SQLSTATE
    /// that says its server turned read-only or is going away.
    pub(crate) fn saw_server_gone(&self) -> bool {
        self.inner.host.saw_server_gone()
    }

    /// The underlying client (also reachable through `Deref`).
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Begins a transaction, like [`Client::transaction`], and marks the
    /// connection dirty until the returned [`PgTransaction`] is committed or
    /// rolled back.
    ///
    /// # Errors
    ///
    /// The driver's error if `START TRANSACTION` fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe for the pool: the mark is set before `START TRANSACTION`
    /// is sent, so a call dropped half-way leaves a connection that is
    /// rolled back on return.
    pub async fn transaction(&mut self) -> Result<PgTransaction<'_>, Error> {
        self.build_transaction().start().await
    }

    /// A builder for a transaction with custom settings, like
    /// [`Client::build_transaction`]; tracked like
    /// [`transaction`](Self::transaction).
    pub fn build_transaction(&mut self) -> PgTransactionBuilder<'_> {
        let Inner {
            client,
            tx,
            pooler_mode,
            ..
        } = &mut self.inner;
        PgTransactionBuilder::new(client.build_transaction(), tx, *pooler_mode)
    }

    /// The statement caches, and how statements reach the server.
    #[inline]
    pub(super) fn statements(&self) -> &Statements {
        &self.inner.statements
    }

    /// The transactions open on the connection.
    #[inline]
    pub(super) fn tx(&self) -> &TxTracker {
        &self.inner.tx
    }

    /// One describe at a time on this connection.
    pub(super) fn describing(&self) -> &tokio::sync::Mutex<()> {
        &self.inner.describing
    }

    /// How a query past its limit is cancelled.
    pub(super) fn cancel_handle(&self) -> &CancelHandle {
        &self.inner.cancel
    }

    /// The fleet budget ticket as the advisory lock's second key.
    pub(super) fn ticket_key(&self) -> Option<i32> {
        self.inner.ticket
    }

    /// The pooler mode this connection was opened with.
    pub fn pooler_mode(&self) -> PoolerMode {
        self.inner.pooler_mode
    }

    /// Whether this connection reaches the pooler through the statement
    /// relay of [`PoolerStatements::Unnamed`](crate::PoolerStatements::Unnamed),
    /// which sends every statement to the server as the unnamed one (see
    /// [`PostgresManager::pooler_statements`](super::PostgresManager::pooler_statements)).
    pub fn is_relayed(&self) -> bool {
        self.inner.statements.is_relayed()
    }

    /// The fleet budget ticket this connection holds (the advisory lock's
    /// second key), if the manager has a
    /// [`fleet_budget`](super::PostgresManager::fleet_budget).
    pub fn fleet_ticket(&self) -> Option<u32> {
        self.inner.ticket.and_then(|t| u32::try_from(t).ok())
    }

    /// Whether a query on this connection was abandoned: by
    /// [`with_timeout`](Self::with_timeout), or a validation or reset the
    /// pool dropped at its `validation_timeout`. The pool closes such a
    /// connection, and dropping it closes its socket at once (without this,
    /// `tokio_postgres` keeps the socket, and the server session, open until
    /// the server answers the abandoned query, which on a half-open
    /// connection is never, or until TCP keepalive gives up).
    pub fn is_abandoned(&self) -> bool {
        self.inner.abandoned.load(Ordering::Relaxed)
    }

    /// Whether a transaction begun through this wrapper was left without a
    /// commit or rollback through it (dropped, leaked, or its end failed or
    /// was cancelled).
    ///
    /// Behind a pooler ([`PoolerMode::Transaction`]) this also counts a
    /// `BEGIN` sent as text through this wrapper and not yet ended.
    pub fn transaction_open(&self) -> bool {
        self.inner.tx.is_open()
    }

    /// Marks a transaction begun or ended with SQL text by the ambient
    /// scopes (`pool_ambient`), so that the reset on return sees it.
    pub(super) fn set_transaction_open(&mut self, open: bool) {
        self.inner.tx.set_wrapped(open);
    }

    /// Called after a successful reset.
    pub(super) fn mark_reset(&mut self) {
        self.inner.tx.reset();
    }
}

impl Drop for PgClient {
    fn drop(&mut self) {
        if self.is_abandoned() {
            if let Some(driver) = &self.inner.driver {
                driver.abort();
            }
        }
    }
}

impl Deref for PgClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.inner.client
    }
}

impl fmt::Debug for PgClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgClient")
            .field("closed", &self.inner.client.is_closed())
            .field("transaction_open", &self.inner.tx.wrapped_open())
            .field("abandoned", &self.is_abandoned())
            .field("retired", &self.is_retired())
            .field("cached_statements", &self.statement_cache_len())
            .field("pooler_mode", &self.inner.pooler_mode)
            .field("unnamed", &self.inner.statements.is_unnamed())
            .field("relayed", &self.inner.statements.is_relayed())
            .field("fleet_ticket", &self.inner.ticket)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_role_reads_on_and_off() {
        let role = ReportedRole::from_params(Some("on"), Some("off"));
        assert_eq!(role.in_hot_standby, Some(true));
        assert_eq!(role.default_read_only, Some(false));
        let unknown = ReportedRole::from_params(Some("yes"), None);
        assert_eq!(unknown, ReportedRole::default());
    }
}
