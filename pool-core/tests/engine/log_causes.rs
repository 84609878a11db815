//! The pool's WARN for a failed connect carries the error's whole cause
//! chain, each text once, also for an error whose `Display` is only its
//! kind (as `tokio_postgres::Error` prints `db error` and leaves the
//! server's message to `source()`).

use std::error::Error;
use std::fmt;
use std::time::Duration;

use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};

use crate::support::logs;

/// A driver error that prints only its kind; the cause is its source.
#[derive(Debug)]
struct KindOnly(std::io::Error);

impl fmt::Display for KindOnly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("db error")
    }
}

impl Error for KindOnly {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.0)
    }
}

/// Every connect fails with a [`KindOnly`].
#[derive(Debug)]
struct Refusing;

#[async_trait]
impl ManageConnection for Refusing {
    type Connection = ();
    type Error = KindOnly;

    async fn connect(&self) -> Result<(), KindOnly> {
        Err(KindOnly(std::io::Error::other(
            "password authentication failed for user \"app\"",
        )))
    }

    async fn is_valid(&self, _: &mut ()) -> Result<(), KindOnly> {
        Ok(())
    }

    fn has_broken(&self, _: &mut ()) -> bool {
        false
    }
}

#[tokio::test(start_paused = true)]
async fn the_connect_warning_carries_the_cause_chain() {
    let (captured, _guard) = logs::capture();
    let config = PoolConfig::builder()
        .max_size(1)
        .acquire_timeout(Duration::from_secs(1))
        .build()
        .expect("config");
    let err = Pool::new(Refusing, config)
        .await
        .expect_err("connect fails");
    assert!(err.to_string().contains("db error"), "{err}");
    let warned = captured.records_with("connect failed");
    assert!(!warned.is_empty(), "{}", captured.text());
    for record in warned {
        let cause = "db error: password authentication failed for user \"app\"";
        assert_eq!(record.matches(cause).count(), 1, "{record}");
    }
}
