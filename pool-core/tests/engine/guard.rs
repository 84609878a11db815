//! `discard` closes the connection; `detach` takes it out of the pool and
//! frees its slot.

use crate::support;
use crate::support::config;

#[tokio::test]
async fn discard_closes_and_frees_the_slot() {
    let (mock, pool) = support::pool(config(1)).await;
    let conn = pool.get().await.unwrap();
    let id = conn.id;
    conn.discard();
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
    let raw = conn.detach();
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
    conn.discard();
    assert_ne!(waiter.await.unwrap(), old);
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
