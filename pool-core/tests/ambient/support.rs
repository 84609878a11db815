//! What the suites share: the database URL, a time bound, unique table
//! names, the test bodies' error type.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use pool_core::ambient::TxError;

/// The URL in `var`. The tests that call this are `#[ignore]`d and run when
/// asked for (`--include-ignored`); asked for without the URL, they fail
/// here instead of passing without having run.
pub fn url(var: &str) -> String {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("{var} is not set: this test needs a database server (see scripts/test.sh)"),
    }
}

/// Runs `fut` under a bound, so a hung server fails the test.
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the test did not finish within its time bound")
}

/// A table name no other test or run uses.
pub fn table(test: &str) -> String {
    format!(
        "ambient_{test}_{}_{}",
        std::process::id(),
        fastrand::u32(..)
    )
}

/// What the test bodies return: the scope's own errors, or one the body
/// chose to roll back with.
#[derive(Debug)]
pub enum Fail<E> {
    Tx(TxError<E>),
    App(&'static str),
}

impl<E> From<TxError<E>> for Fail<E> {
    fn from(e: TxError<E>) -> Self {
        Self::Tx(e)
    }
}

/// Polls `check` until it holds, up to about ten seconds; whether it did.
pub async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
