//! Helpers shared by the database tests.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

/// The URL in `var`, or `None` (with the reason printed) when it is unset
/// outside CI. In CI (`CI` set) a missing URL fails the test: the servers
/// are part of the CI contract there.
pub fn database_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "{var} is not set, but CI is: the database tests must run against a real server in CI"
        ),
        _ => {
            eprintln!("skipped: {var} is not set (point it at a test database to run this test)");
            None
        }
    }
}

/// Upper bound on one database test, so a hung server fails the test
/// instead of stalling the run.
pub const TEST_BOUND: Duration = Duration::from_secs(60);

/// Runs `fut` under [`TEST_BOUND`].
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, fut)
        .await
        .expect("the test did not finish within its time bound")
}

/// A tag unique to this test run, for rows shared tables get.
pub fn unique_tag(test: &str) -> String {
    format!("{test}-{}-{}", std::process::id(), fastrand_u64())
}

fn fastrand_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}
