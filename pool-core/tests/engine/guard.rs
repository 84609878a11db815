//! `discard` closes the connection; `detach` takes it out of the pool and
//! frees its slot.

use crate::support;
use crate::support::config;
use pool_core::PooledConnection;

#[tokio::test]
async fn discard_closes_and_frees_the_slot() {
    let (mock, pool) = support::pool(config(1)).await;
    let conn = pool.get().await.unwrap();
    let id = conn.id;
    PooledConnection::discard(conn);
    assert_eq!(mock.script.alive(), 0);
    let m = pool.metrics();
    assert_eq!((m.total, m.in_use, m.evictions.closed), (0, 0, 1));
    assert_ne!(
        pool.get().await.unwrap().id,
        id,
        "a new connection is opened"
    );
}

#[tokio::test]
async fn detach_takes_the_connection_and_frees_the_slot() {
    let (mock, pool) = support::pool(config(1)).await;
    let conn = pool.get().await.unwrap();
    let raw = PooledConnection::detach(conn);
    assert_eq!(mock.script.alive(), 1, "the detached connection stays open");
    assert_eq!(pool.metrics().total, 0);
    // The slot is free: another connection can be had at max_size 1.
    let other = pool.get().await.unwrap();
    assert_ne!(other.id, raw.id);
    drop(raw);
    assert_eq!(mock.script.alive(), 1);
}

#[tokio::test]
async fn discard_serves_a_waiter_with_a_new_connection() {
    let (_, pool) = support::pool(config(1)).await;
    let conn = pool.get().await.unwrap();
    let old = conn.id;
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get().await.unwrap().id })
    };
    support::until(|| pool.metrics().waiting > 0).await;
    PooledConnection::discard(conn);
    assert_ne!(waiter.await.unwrap(), old);
}

/// The guard's own operations never hide the connection's methods of the
/// same name: `conn.detach()` and `conn.discard()` reach the connection
/// through `Deref`, and the guard's are called as
/// `PooledConnection::detach(conn)`.
mod no_shadowing {
    use pool_core::{async_trait, ManageConnection, Pool, PooledConnection};

    use crate::support::config;

    /// A connection with methods named like the guard's operations (a
    /// driver's "detach from the session", "discard all").
    #[derive(Debug, Default)]
    struct Session {
        calls: Vec<&'static str>,
    }

    impl Session {
        fn detach(&mut self) -> &'static str {
            self.calls.push("detach");
            "the session's own detach"
        }

        fn discard(&mut self) -> &'static str {
            self.calls.push("discard");
            "the session's own discard"
        }
    }

    #[derive(Debug)]
    struct Sessions;

    #[async_trait]
    impl ManageConnection for Sessions {
        type Connection = Session;
        type Error = std::io::Error;

        async fn connect(&self) -> Result<Session, std::io::Error> {
            Ok(Session::default())
        }

        async fn is_valid(&self, _: &mut Session) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn method_calls_on_the_guard_reach_the_connection() {
        let pool = Pool::new(Sessions, config(1).build().unwrap())
            .await
            .unwrap();
        let mut conn = pool.get().await.unwrap();
        assert_eq!(conn.detach(), "the session's own detach");
        assert_eq!(conn.discard(), "the session's own discard");
        assert_eq!(pool.metrics().in_use, 1, "the guard still holds it");
        let session = PooledConnection::detach(conn);
        assert_eq!(session.calls, ["detach", "discard"]);
        assert_eq!(pool.metrics().total, 0, "detached from the pool");
    }
}

/// A manager whose connection is `Send` but not `Sync` (a `Cell`, like
/// rusqlite's connection), and one whose connection is both.
mod thread_safety {
    use std::cell::Cell;
    use std::marker::PhantomData;

    use pool_core::{async_trait, ManageConnection, PooledConnection};

    #[derive(Debug)]
    pub struct Cells;

    #[async_trait]
    impl ManageConnection for Cells {
        type Connection = Cell<u64>;
        type Error = std::io::Error;
        async fn connect(&self) -> Result<Cell<u64>, std::io::Error> {
            Ok(Cell::new(0))
        }
        async fn is_valid(&self, _: &mut Cell<u64>) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    #[derive(Debug)]
    pub struct Numbers;

    #[async_trait]
    impl ManageConnection for Numbers {
        type Connection = u64;
        type Error = std::io::Error;
        async fn connect(&self) -> Result<u64, std::io::Error> {
            Ok(0)
        }
        async fn is_valid(&self, _: &mut u64) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    /// Whether `T: Sync`, read at run time: the inherent constant exists
    /// only when the bound holds and wins over the trait's default.
    struct Probe<T>(PhantomData<T>);
    trait NotSync {
        const SYNC: bool = false;
    }
    impl<T> NotSync for Probe<T> {}
    impl<T: Sync> Probe<T> {
        const SYNC: bool = true;
    }

    fn is_send<T: Send>() {}

    /// A guard shared between threads hands each of them
    /// `&M::Connection`: for a connection that is not `Sync` (a `Cell`),
    /// that is a data race in safe code, so the guard must not be `Sync`.
    #[test]
    fn the_guard_is_sync_only_when_its_connection_is() {
        // Checked at compile time: the test does not build if the guard
        // over a `Cell` ever becomes `Sync` again.
        const {
            assert!(
                !Probe::<PooledConnection<Cells>>::SYNC,
                "PooledConnection over a !Sync connection must not be Sync"
            )
        };
        const { assert!(Probe::<PooledConnection<Numbers>>::SYNC) };
        // The probe itself tells the two apart.
        const { assert!(!Probe::<Cell<u64>>::SYNC) };
        const { assert!(Probe::<u64>::SYNC) };
        // Send either way: moving a guard moves its `Send` connection.
        is_send::<PooledConnection<Cells>>();
        is_send::<PooledConnection<Numbers>>();
        is_send::<pool_core::Pool<Cells>>();
    }
}
