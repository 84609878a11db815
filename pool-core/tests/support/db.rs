//! Where the real-database tests find their servers, and what every such
//! test needs around its queries.
//!
//! Every test that needs a server is `#[ignore]`d with the reason ("needs
//! DATABASE_URL", "needs MYSQL_URL", ...), so a run without one shows it as
//! ignored; `scripts/test.sh` passes `--include-ignored` when `DATABASE_URL`
//! and `MYSQL_URL` are set.

use std::future::Future;
use std::time::{Duration, Instant};

/// The URL in `var` (`DATABASE_URL`, `MYSQL_URL`).
///
/// # Panics
///
/// When it is unset or empty: the test was asked to run (it is ignored
/// otherwise), so a missing server is a failure, never a silent pass.
pub fn url(var: &str) -> String {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{var} is not set: this test needs a database server \
             (e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test, \
             MYSQL_URL=mysql://root@127.0.0.1:3306/test; see scripts/test.sh); \
             without one, run the tests without --include-ignored"
        ),
    }
}

/// A pool config for a server test: its `name`, at most `max_size`
/// connections, and a checkout that waits at most `acquire`.
///
/// # Panics
///
/// When `max_size` is zero.
pub fn named_config(name: &str, max_size: u32, acquire: Duration) -> pool_core::PoolConfig {
    pool_core::PoolConfig::builder()
        .name(name)
        .max_size(max_size)
        .acquire_timeout(acquire)
        .build()
        .unwrap()
}

/// Awaits every task in `tasks`, in order.
///
/// # Panics
///
/// When a task panicked.
pub async fn join_all<T>(tasks: Vec<tokio::task::JoinHandle<T>>) {
    for t in tasks {
        t.await.expect("task");
    }
}

/// Upper bound on one database test, so a hung server fails the test
/// instead of stalling the run.
pub const TEST_BOUND: Duration = Duration::from_secs(60);

/// Runs `fut` under [`TEST_BOUND`].
///
/// # Panics
///
/// When `fut` takes longer.
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, fut)
        .await
        .expect("the test did not finish within its time bound")
}

/// A name no other test or run uses (tables, tags in shared tables, pool
/// names, files): `prefix`, this process's id and a random number.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}_{}", std::process::id(), fastrand::u32(..))
}

/// Polls `check` every 20 ms of real time until it holds or `limit` has
/// passed; returns whether it held. For server-side effects that land
/// asynchronously (a backend exiting, a cancel arriving); the in-process
/// conditions on tokio's clock use [`super::eventually`].
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    const EVERY: Duration = Duration::from_millis(20);
    let start = Instant::now();
    // Bounded in count as well as in time: one poll per period, plus the first.
    let polls = limit.as_millis() / EVERY.as_millis() + 1;
    for _ in 0..=polls {
        if check().await {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(EVERY).await;
    }
    false
}

/// The config most server tests start from: `max` connections, `min` kept
/// open, checkouts waiting at most `acquire_timeout`; everything else the
/// defaults.
///
/// # Panics
///
/// When the combination is invalid (`min > max`, `max` 0).
pub fn pool_config(max: u32, min: u32, acquire_timeout: Duration) -> pool_core::PoolConfig {
    pool_core::PoolConfig::builder()
        .max_size(max)
        .min_size(min)
        .acquire_timeout(acquire_timeout)
        .build()
        .expect("a valid pool config")
}

/// The shared server a [`Table`] lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// PostgreSQL at `DATABASE_URL`.
    Postgres,
    /// MariaDB or MySQL at `MYSQL_URL`.
    MySql,
}

/// A table of one test's own in a shared database: a name no other test or
/// run uses, and `DROP TABLE IF EXISTS` when the guard goes, however the
/// test ends (a panic included). The test creates the table itself, under
/// [`Table::name`].
///
/// The drop runs on a thread of its own, with a fresh connection and a
/// runtime of its own, so it works in a panicking test, inside or outside a
/// runtime, whatever the pools of the test are doing. Declare the guard
/// before the pools and transactions that use the table: locals drop in
/// reverse order, so those go first and hold no lock the drop would wait
/// for.
#[derive(Debug)]
pub struct Table {
    name: &'static str,
    server: Server,
}

impl Table {
    /// A table on PostgreSQL (`DATABASE_URL`) named `prefix` and a unique
    /// suffix (see [`unique`]).
    ///
    /// # Panics
    ///
    /// When `prefix` is not a lowercase SQL identifier.
    pub fn postgres(prefix: &str) -> Self {
        Self::on(Server::Postgres, prefix)
    }

    /// A table on MariaDB (`MYSQL_URL`) named `prefix` and a unique suffix.
    ///
    /// # Panics
    ///
    /// When `prefix` is not a lowercase SQL identifier.
    pub fn mysql(prefix: &str) -> Self {
        Self::on(Server::MySql, prefix)
    }

    fn on(server: Server, prefix: &str) -> Self {
        assert!(
            !prefix.is_empty()
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{prefix:?} is not a lowercase SQL identifier"
        );
        Self {
            name: sql(unique(prefix)),
            server,
        }
    }

    /// The table's name, for the test's SQL.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let name = self.name;
        let server = self.server;
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                match tokio::time::timeout(DROP_BOUND, drop_on(server, name)).await {
                    Ok(done) => done,
                    Err(_) => Err(format!("not done within {DROP_BOUND:?}")),
                }
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("dropping table {} failed: {dropped:?}", self.name);
        }
    }
}

/// Upper bound on a [`Table`]'s drop: connecting and the `DROP TABLE`.
const DROP_BOUND: Duration = Duration::from_secs(15);

/// Drops table `name`. On PostgreSQL, the sessions that hold a lock on it
/// are ended first: the table is this test's alone, so they are this
/// test's, left inside a transaction by a panic, and the `DROP` would wait
/// for them.
async fn drop_on(server: Server, name: &str) -> Result<(), String> {
    match server {
        Server::Postgres => {
            let (client, conn) =
                tokio_postgres::connect(&url("DATABASE_URL"), tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let statement = format!(
                "SELECT pg_terminate_backend(pid) FROM pg_locks \
                 WHERE relation = to_regclass('{name}') AND pid <> pg_backend_pid(); \
                 DROP TABLE IF EXISTS {name}"
            );
            let done = client
                .batch_execute(&statement)
                .await
                .map_err(|e| e.to_string());
            drop(client);
            let _ = driver.await;
            done
        }
        Server::MySql => drop_on_mysql(&format!("DROP TABLE IF EXISTS {name}")).await,
    }
}

#[cfg(feature = "sqlx-mysql")]
async fn drop_on_mysql(statement: &str) -> Result<(), String> {
    use sqlx::Connection;
    let mut conn = sqlx::MySqlConnection::connect(&url("MYSQL_URL"))
        .await
        .map_err(|e| e.to_string())?;
    let done = sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&mut conn)
        .await
        .map(drop)
        .map_err(|e| e.to_string());
    let _ = conn.close().await;
    done
}

#[cfg(all(not(feature = "sqlx-mysql"), feature = "sqlx08-mysql"))]
async fn drop_on_mysql(statement: &str) -> Result<(), String> {
    use sqlx08::Connection;
    let mut conn = sqlx08::MySqlConnection::connect(&url("MYSQL_URL"))
        .await
        .map_err(|e| e.to_string())?;
    let done = sqlx08::raw_sql(statement)
        .execute(&mut conn)
        .await
        .map(drop)
        .map_err(|e| e.to_string());
    let _ = conn.close().await;
    done
}

#[cfg(not(any(feature = "sqlx-mysql", feature = "sqlx08-mysql")))]
async fn drop_on_mysql(_statement: &str) -> Result<(), String> {
    Err("this build has no MySQL client (features sqlx-mysql or sqlx08-mysql)".to_owned())
}

/// SQL text built at run time, as both sqlx versions take it: sqlx 0.9
/// takes a `&'static str` (or `AssertSqlSafe`, which 0.8 lacks), 0.8 any
/// `&str`. Leaked: a few bytes per statement, in a test process.
pub fn sql(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}
