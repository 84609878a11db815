//! What differs between the sqlx drivers: how their options are shown
//! without secrets and how a connection's transaction state is cleared.

use std::fmt;

use ::sqlx::{Connection, Error, Executor};

use super::reset::BoxFuture;
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-mysql"))]
use super::reset::{queue_tracked_rollbacks, roll_back_by_server_flag};

/// A sqlx connection type that [`SqlxManager`](super::SqlxManager) can pool.
///
/// Implemented for `sqlx::PgConnection` (feature `sqlx-postgres`),
/// `sqlx::MySqlConnection` (`sqlx-mysql`) and `sqlx::SqliteConnection`
/// (`sqlx-sqlite`). The trait is sealed: how each driver's transaction state
/// is read and cleared depends on its internals.
pub trait SqlxConnection: Connection + fmt::Debug + private::Sealed + 'static {}

pub(crate) mod private {
    use super::*;

    /// The per-driver parts of the manager; not nameable outside the crate,
    /// which seals [`SqlxConnection`].
    pub trait Sealed: Connection {
        /// Whether sqlx's flush may be polled once and dropped to see a
        /// reply in flight: only where sqlx keeps a partial message buffered
        /// across a cancelled read.
        const POLL_IN_FLIGHT: bool;

        /// Adds where the options point to a `Debug` struct, without the
        /// password or anything else secret.
        fn describe(options: &Self::Options, out: &mut fmt::DebugStruct<'_, '_>);

        /// Leaves no transaction open: rolls back what sqlx tracks, then
        /// what the server says is still open.
        fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>>;

        /// Runs one statement as plain SQL text, outside sqlx's statement
        /// cache.
        fn execute_raw<'a>(
            conn: &'a mut Self,
            sql: &'static str,
        ) -> BoxFuture<'a, Result<(), Error>>;
    }
}

#[cfg(feature = "sqlx-postgres")]
impl SqlxConnection for ::sqlx::PgConnection {}

#[cfg(feature = "sqlx-postgres")]
impl private::Sealed for ::sqlx::PgConnection {
    // sqlx-postgres reads a message only once all of it is buffered, so a
    // read dropped half-way loses nothing.
    const POLL_IN_FLIGHT: bool = true;

    fn describe(options: &Self::Options, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("driver", &"postgres");
        match options.get_socket() {
            Some(socket) => out.field("socket", socket),
            None => out.field("host", &options.get_host()),
        };
        out.field("port", &options.get_port())
            .field("database", &options.get_database())
            .field("user", &options.get_username());
    }

    fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            // The queued rollbacks, the probe and their replies share one
            // round trip.
            queue_tracked_rollbacks(conn);
            roll_back_by_server_flag(conn, "SELECT 1").await
        })
    }
    fn execute_raw<'a>(conn: &'a mut Self, sql: &'static str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(::sqlx::raw_sql(sql)).await.map(drop) })
    }
}

#[cfg(feature = "sqlx-mysql")]
impl SqlxConnection for ::sqlx::MySqlConnection {}

#[cfg(feature = "sqlx-mysql")]
impl private::Sealed for ::sqlx::MySqlConnection {
    // sqlx-mysql reads a packet's header and payload in two steps; a read
    // dropped between them would desynchronise the stream.
    const POLL_IN_FLIGHT: bool = false;

    fn describe(options: &Self::Options, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("driver", &"mysql");
        match options.get_socket() {
            Some(socket) => out.field("socket", socket),
            None => out.field("host", &options.get_host()),
        };
        out.field("port", &options.get_port())
            .field("database", &options.get_database())
            .field("user", &options.get_username());
    }

    fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            queue_tracked_rollbacks(conn);
            // `DO` evaluates without a result set; its OK packet carries the
            // server status flags sqlx checks.
            roll_back_by_server_flag(conn, "DO 0").await
        })
    }
    fn execute_raw<'a>(conn: &'a mut Self, sql: &'static str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(::sqlx::raw_sql(sql)).await.map(drop) })
    }
}

#[cfg(feature = "sqlx-sqlite")]
impl SqlxConnection for ::sqlx::SqliteConnection {}

#[cfg(feature = "sqlx-sqlite")]
impl private::Sealed for ::sqlx::SqliteConnection {
    // Flushing is a no-op for SQLite: statements run on a worker thread
    // that rolls back a `begin()` cancelled in flight by itself.
    const POLL_IN_FLIGHT: bool = false;

    fn describe(options: &Self::Options, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("driver", &"sqlite")
            .field("filename", &options.get_filename());
    }

    fn reset_transaction(conn: &mut Self) -> BoxFuture<'_, Result<(), Error>> {
        // SQLite's `begin_with` counts a level even when the statement opened
        // no transaction, so it cannot serve as a probe here.
        Box::pin(super::reset::roll_back_one_by_one(conn))
    }
    fn execute_raw<'a>(conn: &'a mut Self, sql: &'static str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(::sqlx::raw_sql(sql)).await.map(drop) })
    }
}
