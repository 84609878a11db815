//! MySQL and MariaDB: `MySqlConnection`.

use std::fmt;

use super::backend::BoxFuture;
use super::backend::{private, SqlxConnection, SqlxPasswordConnection};
use super::driver::mysql::{MySqlConnectOptions, MySqlConnection};
use super::driver::{Error, Executor};
use super::server_flag::{queue_tracked_rollbacks, roll_back_by_server_flag};

impl SqlxConnection for MySqlConnection {}
impl SqlxPasswordConnection for MySqlConnection {}

impl private::Sealed for MySqlConnection {
    // sqlx-mysql reads a packet's header and payload in two steps; a read
    // dropped between them would desynchronise the stream.
    const POLL_IN_FLIGHT: bool = false;
    // Nothing shows a `BEGIN` in flight.
    const CLOSE_ON_CANCELLED_BEGIN: bool = true;

    fn describe(options: &MySqlConnectOptions, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("driver", &"mysql");
        match options.get_socket() {
            Some(socket) => out.field("socket", socket),
            None => out.field("host", &options.get_host()),
        };
        out.field("port", &options.get_port())
            .field("database", &options.get_database())
            .field("user", &options.get_username());
    }

    fn target(options: &MySqlConnectOptions) -> Option<String> {
        let port = options.get_port();
        Some(match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None if options.get_host().contains(':') => format!("[{}]:{port}", options.get_host()),
            None => format!("{}:{port}", options.get_host()),
        })
    }

    fn for_pooler(_: &MySqlConnectOptions, _: bool) -> Option<MySqlConnectOptions> {
        None
    }

    fn with_password(options: MySqlConnectOptions, password: &str) -> MySqlConnectOptions {
        options.password(password)
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
        Box::pin(async move { conn.execute(super::raw(sql)).await.map(drop) })
    }

    fn execute_built<'a>(conn: &'a mut Self, sql: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { conn.execute(super::raw_built(sql)).await.map(drop) })
    }
}

impl private::SealedPassword for MySqlConnection {}
