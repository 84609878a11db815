//! Cleaning a PostgreSQL or MySQL connection in one round trip, by the
//! server's own transaction flag.

use super::backend::private::Sealed;
use super::driver::{Connection, Error};
use super::driver_core::transaction::TransactionManager;
use super::reset::Tm;

/// Queues one rollback per transaction level sqlx tracks (PostgreSQL and
/// MySQL write it to the send buffer without I/O; the next statement sends it
/// in the same write).
pub(super) fn queue_tracked_rollbacks<C: Connection>(conn: &mut C) {
    for _ in 0..Tm::<C>::get_transaction_depth(conn) {
        Tm::<C>::start_rollback(conn);
    }
}

/// Sends `probe` behind whatever is queued and reads the server's
/// transaction flag from its reply through `begin_with`, then rolls back if
/// the flag says a transaction is still open.
///
/// `probe` must neither open nor end a transaction. Used for the drivers
/// whose `begin_with` checks the flag without changing the transaction depth
/// when it fails (PostgreSQL and MySQL); the caller has queued the tracked
/// rollbacks, so the depth is zero here.
pub(super) async fn roll_back_by_server_flag<C: Sealed>(
    conn: &mut C,
    probe: &'static str,
) -> Result<(), Error> {
    let failed_inside = match conn.begin_with(super::static_sql(probe)).await {
        // The flag was clear after the probe: nothing open.
        Err(Error::BeginFailed) => return Ok(()),
        // The flag was set, so a transaction sqlx did not know about is open;
        // `begin_with` now counts it, and its rollback ends it.
        Ok(tx) => return tx.rollback().await,
        // The probe (or a statement queued before it) failed on the server,
        // e.g. PostgreSQL refusing anything inside an aborted transaction.
        Err(Error::Database(e)) => e,
        Err(e) => return Err(e),
    };
    tracing::debug!(error = %failed_inside, "reset probe failed on the server; rolling back");
    // A plain `ROLLBACK` ends whatever is open (and is harmless if nothing
    // is); sqlx's depth is already zero.
    C::execute_raw(conn, "ROLLBACK").await
}
