//! Each `PoolError` the pool returns says, in its Display, what the pool was
//! doing and the cause's own message; `source()` returns the cause.
//! Produced through the public `Pool` API with a small manager of
//! this file's own.

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support;
use pool_core::{async_trait, ManageConnection, Pool, PoolConfig, PoolError};

#[derive(Debug)]
struct Refused(&'static str);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Error for Refused {}

/// Connects unless `down` (slowly when `slow`); every validation fails
/// when `invalid`.
#[derive(Debug, Clone, Default)]
struct Switch {
    down: Arc<AtomicBool>,
    invalid: Arc<AtomicBool>,
    slow: Arc<AtomicBool>,
}

#[async_trait]
impl ManageConnection for Switch {
    type Connection = ();
    type Error = Refused;

    async fn connect(&self) -> Result<(), Refused> {
        if self.slow.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        }
        if self.down.load(Ordering::SeqCst) {
            Err(Refused("password authentication failed for user \"app\""))
        } else {
            Ok(())
        }
    }

    async fn is_valid(&self, _: &mut ()) -> Result<(), Refused> {
        if self.invalid.load(Ordering::SeqCst) {
            Err(Refused("server closed the connection unexpectedly"))
        } else {
            Ok(())
        }
    }
}

fn config(max: u32) -> pool_core::PoolConfigBuilder {
    PoolConfig::builder()
        .max_size(max)
        .idle_timeout(None)
        .max_lifetime(None)
}

#[tokio::test(start_paused = true)]
async fn a_failed_first_connect_says_connect_and_the_cause() {
    let manager = Switch::default();
    manager.down.store(true, Ordering::SeqCst);
    let err = Pool::new(manager, config(2).build().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, PoolError::Backend(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "connect failed: password authentication failed for user \"app\""
    );
    let source = err.source().expect("the connect error is the source");
    assert!(source.downcast_ref::<Refused>().is_some());
    assert_eq!(
        source.to_string(),
        "password authentication failed for user \"app\""
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_pool_says_so() {
    let pool = Pool::new(Switch::default(), config(1).build().unwrap())
        .await
        .unwrap();
    pool.close().await;
    let err = pool.get().await.unwrap_err();
    assert!(matches!(err, PoolError::Closed), "{err:?}");
    assert_eq!(err.to_string(), "pool is closed");
    assert!(err.source().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_runs_out_says_waiting_and_the_counts() {
    let pool = Pool::new(Switch::default(), config(1).build().unwrap())
        .await
        .unwrap();
    let _held = pool.get().await.unwrap();
    let err = pool
        .get_timeout(Duration::from_millis(1_500))
        .await
        .unwrap_err();
    support::assert_wait_timeout(&err);
    let text = err.to_string();
    assert!(
        text.starts_with("timed out after 1.5s waiting for a connection (1 of 1 open: "),
        "{text}"
    );
    assert!(err.source().is_none(), "nothing failed: {text}");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_carries_the_last_validation_error() {
    let manager = Switch::default();
    let pool = support::started(&manager, config(1).validation_bypass(Duration::ZERO)).await;
    // The first connection is fresh; let it sit so checkout validates it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    manager.invalid.store(true, Ordering::SeqCst);
    // Its replacement would be handed over unchecked (fresh): make it late.
    manager.slow.store(true, Ordering::SeqCst);
    let err = pool
        .get_timeout(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("timed out after "), "{text}");
    assert!(
        text.ends_with("; last error: server closed the connection unexpectedly"),
        "{text}"
    );
    let source = err.source().expect("the validation error is the source");
    assert_eq!(
        source.to_string(),
        "server closed the connection unexpectedly"
    );
}
