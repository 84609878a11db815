//! A panic in user code while holding a connection loses no slot.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::support;
use crate::support::{config, Mock};
use pool_core::{ManageConnection, Pool};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_while_holding_returns_the_slot() {
    let (_, pool) = support::pool(config(2)).await;
    for _ in 0..10 {
        let p = pool.clone();
        let r = tokio::spawn(async move {
            let _a = p.get().await.unwrap();
            let _b = p.get().await.unwrap();
            panic!("user code failed");
        })
        .await;
        assert!(r.unwrap_err().is_panic());
        assert_eq!(pool.metrics().in_use, 0);
    }
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(pool.metrics().total, 2);
}

/// A current-thread runtime the test drives itself, and a pool of one
/// over `manager` opened on it.
fn pool_on_own_runtime<M: ManageConnection>(manager: M) -> (tokio::runtime::Runtime, Pool<M>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = rt
        .block_on(Pool::new(manager, config(1).build().unwrap()))
        .unwrap();
    (rt, pool)
}

#[test]
fn panic_on_a_plain_thread_returns_the_slot() {
    let (rt, pool) = pool_on_own_runtime(Mock::default());
    let conn = rt.block_on(pool.get()).unwrap();
    // Dropped by unwinding on another thread, outside the runtime.
    let r = std::thread::spawn(move || {
        let _conn = conn;
        panic!("boom");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(pool.metrics().in_use, 0);
    assert_eq!(pool.metrics().idle, 1);
}

/// A manager whose return-path checks panic on demand.
#[derive(Debug, Default)]
struct Exploding {
    in_has_broken: AtomicBool,
    in_needs_reset: AtomicBool,
    opened: AtomicU64,
}

#[pool_core::async_trait]
impl ManageConnection for Exploding {
    type Connection = u64;
    type Error = std::io::Error;

    async fn connect(&self) -> Result<u64, std::io::Error> {
        Ok(self.opened.fetch_add(1, Ordering::SeqCst))
    }

    async fn is_valid(&self, _conn: &mut u64) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn has_broken(&self, _conn: &mut u64) -> bool {
        assert!(
            !self.in_has_broken.load(Ordering::SeqCst),
            "has_broken exploded"
        );
        false
    }

    fn needs_reset(&self, _conn: &mut u64) -> bool {
        assert!(
            !self.in_needs_reset.load(Ordering::SeqCst),
            "needs_reset exploded"
        );
        false
    }
}

/// A panicking `has_broken` or `needs_reset` closes the connection and
/// frees its slot; the panic reaches the code that dropped the guard.
#[tokio::test]
async fn a_panicking_manager_check_loses_no_slot() {
    let pool = Pool::new(Exploding::default(), config(1).build().unwrap())
        .await
        .unwrap();
    for (round, which) in ["has_broken", "needs_reset"].into_iter().enumerate() {
        let m = pool.manager();
        let flag = if which == "has_broken" {
            &m.in_has_broken
        } else {
            &m.in_needs_reset
        };
        let conn = pool.get().await.unwrap();
        flag.store(true, Ordering::SeqCst);
        let dropped = std::panic::catch_unwind(AssertUnwindSafe(|| drop(conn)));
        assert!(dropped.is_err(), "{which}: the manager's panic goes on");
        flag.store(false, Ordering::SeqCst);
        let m = pool.metrics();
        assert_eq!((m.in_use, m.idle, m.total), (0, 0, 0), "{which}: {m:?}");
        assert_eq!(m.evictions.broken, round as u64 + 1, "{which}");
        // The slot is usable again: a new connection fills it.
        drop(pool.get().await.unwrap());
        assert_eq!(pool.metrics().total, 1, "{which}");
    }
}

/// Dropped while the caller's code is already panicking, a panicking check
/// closes the connection without a second panic (which would abort).
#[test]
fn a_panicking_check_during_unwinding_does_not_abort() {
    let (rt, pool) = pool_on_own_runtime(Exploding::default());
    let conn = rt.block_on(pool.get()).unwrap();
    pool.manager().in_has_broken.store(true, Ordering::SeqCst);
    let r = std::thread::spawn(move || {
        let _conn = conn;
        panic!("user code failed");
    })
    .join();
    assert!(r.is_err());
    let m = pool.metrics();
    assert_eq!((m.in_use, m.total, m.evictions.broken), (0, 0, 1), "{m:?}");
}
