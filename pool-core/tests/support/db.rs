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
