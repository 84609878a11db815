//! SQLite: `SqliteConnection`.

use std::fmt;

use super::backend::BoxFuture;
use super::backend::{private, SqlxConnection};
use super::driver::sqlite::{SqliteConnectOptions, SqliteConnection};
use super::driver::{Error, Executor};
use super::driver_core::transaction::TransactionManager;
use super::reset::Tm;

impl SqlxConnection for SqliteConnection {}

impl private::Sealed for SqliteConnection {
    // Flushing is a no-op for SQLite: statements run on a worker thread
    // that rolls back a `begin()` cancelled in flight by itself.
    const POLL_IN_FLIGHT: bool = false;
    // The worker rolls a cancelled `BEGIN` back itself; closing would lose
    // an in-memory database.
    const CLOSE_ON_CANCELLED_BEGIN: bool = false;

    fn describe(options: &SqliteConnectOptions, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("driver", &"sqlite")
            .field("filename", &options.get_filename());
    }

    fn for_pooler(_: &SqliteConnectOptions, _: bool) -> Option<SqliteConnectOptions> {
        None
    }

    fn with_password(options: SqliteConnectOptions, _: &str) -> SqliteConnectOptions {
        // Never called: a password provider needs `SqlxPasswordConnection`.
        options
    }

    fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>> {
        // SQLite's `begin_with` counts a level even when the statement opened
        // no transaction, so it cannot serve as a probe here.
        Box::pin(roll_back_one_by_one(conn))
    }

    fn execute_raw<'a>(conn: &'a mut Self, sql: &'static str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(super::raw(sql)).await.map(drop) })
    }

    fn execute_built<'a>(conn: &'a mut Self, sql: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(super::raw_built(sql)).await.map(drop) })
    }
}

/// Rolls back every level sqlx tracks on a connection whose transaction
/// commands run one by one on a worker, then makes sure by SQL that nothing
/// is open.
///
/// The depth is read after each awaited rollback, so a rollback the worker
/// still had queued (from a dropped `sqlx::Transaction`) is counted right; the
/// loop is bounded by the depth first seen plus one.
async fn roll_back_one_by_one(conn: &mut SqliteConnection) -> Result<(), Error> {
    let bound = Tm::<SqliteConnection>::get_transaction_depth(conn) + 1;
    for _ in 0..bound {
        if Tm::<SqliteConnection>::get_transaction_depth(conn) == 0 {
            break;
        }
        Tm::<SqliteConnection>::rollback(conn).await?;
    }
    if Tm::<SqliteConnection>::get_transaction_depth(conn) != 0 {
        return Err(Error::Protocol(
            "transaction depth did not reach zero while rolling back".into(),
        ));
    }
    // A raw `BEGIN` fails inside a transaction; either way one `ROLLBACK`
    // leaves none open.
    let execute_raw = <SqliteConnection as private::Sealed>::execute_raw;
    match execute_raw(conn, "BEGIN").await {
        Ok(()) | Err(Error::Database(_)) => execute_raw(conn, "ROLLBACK").await,
        Err(e) => Err(e),
    }
}
