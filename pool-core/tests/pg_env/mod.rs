//! Where the PostgreSQL tests find their server.
//!
//! Every test that needs the server is `#[ignore]`d with the reason, so a
//! run without a database shows it as ignored; `scripts/test.sh` passes
//! `--include-ignored` when `DATABASE_URL` and `MYSQL_URL` are set. A test
//! that runs without `DATABASE_URL` fails with a message saying so.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// `DATABASE_URL`.
///
/// # Panics
///
/// When it is unset or empty: the test was asked to run (it is ignored
/// otherwise), so a missing server is a failure, never a silent pass.
pub fn database_url(test: &str) -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{test} needs PostgreSQL but DATABASE_URL is not set \
             (e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test); \
             without a server, run the tests without --include-ignored"
        ),
    }
}

/// Parsed connection settings for `url`.
pub fn config(url: &str) -> tokio_postgres::Config {
    url.parse()
        .unwrap_or_else(|e| panic!("DATABASE_URL is not a valid connection string: {e}"))
}

/// A plain client outside any pool, to watch the pool's connections from
/// the server's side (`pg_stat_activity`, `pg_terminate_backend`).
pub async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = config(url)
        .connect(tokio_postgres::NoTls)
        .await
        .expect("admin connection to DATABASE_URL");
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("admin connection ended: {e}");
        }
    });
    client
}

/// The server process id behind a client.
pub async fn backend_pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid()")
        .get(0)
}

/// `pg_stat_activity.state` of a backend (`None` once it has exited).
pub async fn backend_state(admin: &tokio_postgres::Client, pid: i32) -> Option<String> {
    admin
        .query_opt("SELECT state FROM pg_stat_activity WHERE pid = $1", &[&pid])
        .await
        .expect("pg_stat_activity")
        .and_then(|row| row.get::<_, Option<String>>(0))
}

/// Polls `check` every 20 ms until it holds or `limit` passes; returns
/// whether it held. For server-side effects that land asynchronously
/// (a backend exiting, a cancel arriving).
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A unique table name for one test, so tests can run in parallel.
pub fn table(prefix: &str) -> String {
    format!("{prefix}_{}_{}", std::process::id(), fastrand::u32(..))
}
