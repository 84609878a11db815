//! The bb8 and deadpool adapters' errors say what failed and the cause's own
//! message, and hand the cause to `source()`, alone and inside the pool's
//! `PoolError`.
#![cfg(any(feature = "bb8", feature = "deadpool"))]

use std::error::Error;
use std::io;

use pool_core::{PoolConfig, ValidationMode};

/// The messages of `err` and each of its sources, outermost first.
fn chain(err: &(dyn Error + 'static)) -> Vec<String> {
    let mut messages = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        messages.push(e.to_string());
        next = e.source();
    }
    messages
}

fn config() -> PoolConfig {
    PoolConfig::builder()
        .max_size(1)
        .validation_mode(ValidationMode::None)
        .build()
        .expect("config")
}

#[cfg(feature = "bb8")]
mod bb8_errors {
    use super::*;
    use pool_core::compat::bb8::{Bb8Error, Bb8Manager};
    use pool_core::{ManageConnection, Pool, PoolError};

    /// A bb8 manager whose connect and check always fail.
    #[derive(Debug)]
    struct Refusing;

    impl bb8::ManageConnection for Refusing {
        type Connection = ();
        type Error = io::Error;

        async fn connect(&self) -> Result<(), io::Error> {
            Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "connection refused",
            ))
        }

        async fn is_valid(&self, _conn: &mut ()) -> Result<(), io::Error> {
            Err(io::Error::other("ping timed out"))
        }

        fn has_broken(&self, _conn: &mut ()) -> bool {
            false
        }
    }

    #[tokio::test]
    async fn a_bb8_error_shows_and_sources_its_cause() {
        let err = Bb8Manager::new(Refusing)
            .connect()
            .await
            .expect_err("refused");
        assert_eq!(err.to_string(), "bb8 manager failed: connection refused");
        assert_eq!(
            chain(&err),
            [
                "bb8 manager failed: connection refused",
                "connection refused"
            ]
        );
        let cause = err.source().expect("a source");
        assert_eq!(
            cause.downcast_ref::<io::Error>().map(io::Error::kind),
            Some(io::ErrorKind::ConnectionRefused)
        );

        let mut conn = ();
        let err = Bb8Manager::new(Refusing)
            .is_valid(&mut conn)
            .await
            .expect_err("check fails");
        assert_eq!(
            chain(&err),
            ["bb8 manager failed: ping timed out", "ping timed out"]
        );
    }

    #[tokio::test]
    async fn a_pool_error_names_the_phase_and_the_cause() {
        let err = Pool::new(Bb8Manager::new(Refusing), config())
            .await
            .expect_err("no connection can open");
        let PoolError::Backend(bb8) = &err else {
            panic!("a Backend error: {err:?}");
        };
        let _: &Bb8Error<io::Error> = bb8;
        assert_eq!(bb8.target(), None);
        assert_eq!(
            err.to_string(),
            "connect failed: bb8 manager failed: connection refused"
        );
        assert_eq!(
            chain(&err)[1..],
            [
                "bb8 manager failed: connection refused",
                "connection refused"
            ]
        );
    }

    #[tokio::test]
    async fn told_its_target_a_failed_connect_names_it_once() {
        let manager = Bb8Manager::new(Refusing).with_target("db.internal:5432");
        let err = manager.connect().await.expect_err("refused");
        assert_eq!(err.target(), Some("db.internal:5432"));
        assert_eq!(
            chain(&err),
            [
                "connect to db.internal:5432 failed: connection refused",
                "connection refused"
            ]
        );
        // A check is no connect: it says what failed, as before.
        let err = manager.is_valid(&mut ()).await.expect_err("check fails");
        assert_eq!(err.to_string(), "bb8 manager failed: ping timed out");
        // The pool adds no second prefix.
        let err = Pool::new(manager, config()).await.expect_err("refused");
        assert_eq!(
            err.to_string(),
            "connect to db.internal:5432 failed: connection refused"
        );
    }
}

#[cfg(feature = "deadpool")]
mod deadpool_errors {
    use super::*;
    use deadpool::managed::{Manager, Metrics, RecycleError, RecycleResult};
    use pool_core::compat::deadpool::{DeadpoolError, DeadpoolManager, RecycleAt};
    use pool_core::{ManageConnection, Pool, PoolError};

    /// A deadpool manager whose create fails unless told otherwise, and
    /// whose recycle fails with a backend error.
    #[derive(Debug)]
    struct Failing {
        create: bool,
    }

    impl Manager for Failing {
        type Type = ();
        type Error = io::Error;

        async fn create(&self) -> Result<(), io::Error> {
            if self.create {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "connection refused",
                ))
            }
        }

        async fn recycle(&self, _obj: &mut (), _metrics: &Metrics) -> RecycleResult<io::Error> {
            Err(RecycleError::Backend(io::Error::other("socket gone")))
        }
    }

    #[tokio::test]
    async fn a_deadpool_error_shows_and_sources_its_cause() {
        let err = DeadpoolManager::new(Failing { create: false })
            .connect()
            .await
            .expect_err("refused");
        assert!(matches!(err, DeadpoolError::Backend(_)), "{err:?}");
        assert_eq!(
            chain(&err),
            [
                "deadpool manager failed: connection refused",
                "connection refused"
            ]
        );

        // A recycle's backend error, at checkout.
        let manager =
            DeadpoolManager::new(Failing { create: true }).recycle_at(RecycleAt::Checkout);
        let mut obj = manager.connect().await.expect("create");
        let err = manager.is_valid(&mut obj).await.expect_err("recycle fails");
        assert_eq!(
            chain(&err),
            ["deadpool manager failed: socket gone", "socket gone"]
        );
    }

    #[tokio::test]
    async fn a_pool_error_names_the_phase_and_the_cause() {
        let err = Pool::new(DeadpoolManager::new(Failing { create: false }), config())
            .await
            .expect_err("no connection can open");
        assert!(
            matches!(err, PoolError::Backend(DeadpoolError::Backend(_))),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "connect failed: deadpool manager failed: connection refused"
        );
        assert_eq!(
            chain(&err)[1..],
            [
                "deadpool manager failed: connection refused",
                "connection refused"
            ]
        );
    }

    #[tokio::test]
    async fn told_its_target_a_failed_create_is_a_connect_error_naming_it() {
        let manager =
            DeadpoolManager::new(Failing { create: false }).with_target("db.internal:5432");
        let err = manager.connect().await.expect_err("refused");
        assert!(
            matches!(&err, DeadpoolError::Connect { target, .. } if target == "db.internal:5432"),
            "{err:?}"
        );
        assert_eq!(
            chain(&err),
            [
                "connect to db.internal:5432 failed: connection refused",
                "connection refused"
            ]
        );
        let err = Pool::new(manager, config()).await.expect_err("refused");
        assert_eq!(
            err.to_string(),
            "connect to db.internal:5432 failed: connection refused"
        );
    }
}
