//! The pool's reference count against parked connections
//! (`slots/parked.rs`, "The pool's reference"): a parked slot carries its
//! guard's count, every claim takes it over or releases it exactly once,
//! and dropping the last handle frees the pool and closes its connections
//! whatever was parked. A count taken twice shows here as a count below
//! what is alive (and, soon after, a use after free); one never released,
//! as a pool that outlives its handles.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use pool_api::{ManageConnection, PoolConfig, ValidationMode};

use crate::engine::Engine;
use crate::{Pool, PooledConnection};

/// A connection that counts itself among the live ones.
#[derive(Debug)]
struct Conn(Arc<AtomicUsize>);

impl Drop for Conn {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug, Clone, Default)]
struct Counting {
    live: Arc<AtomicUsize>,
    /// `has_broken` panics while set.
    panics: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait]
impl ManageConnection for Counting {
    type Connection = Conn;
    type Error = std::io::Error;

    async fn connect(&self) -> Result<Conn, std::io::Error> {
        self.live.fetch_add(1, Ordering::SeqCst);
        Ok(Conn(Arc::clone(&self.live)))
    }

    async fn is_valid(&self, _: &mut Conn) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn has_broken(&self, _: &mut Conn) -> bool {
        assert!(!self.panics.load(Ordering::SeqCst), "has_broken panics");
        false
    }
}

async fn pool(size: u32, affinity: bool) -> (Pool<Counting>, Counting) {
    pool_with_min(size, size, affinity).await
}

async fn pool_with_min(size: u32, min: u32, affinity: bool) -> (Pool<Counting>, Counting) {
    let manager = Counting::default();
    let config = PoolConfig::builder()
        .max_size(size)
        .min_size(min)
        .validation_mode(ValidationMode::None)
        .housekeeping_period(Duration::from_secs(3600))
        .thread_affinity(affinity)
        .build()
        .unwrap();
    let pool = Pool::new(manager.clone(), config).await.unwrap();
    settle().await;
    (pool, manager)
}

/// Lets the connector tasks that opened the connections end (each holds a
/// count while it runs).
async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

fn shared(pool: &Pool<Counting>) -> &Arc<Engine<Counting>> {
    &pool.shared
}

fn parked(pool: &Pool<Counting>) -> usize {
    shared(pool).slots.parked()
}

/// The pool's strong count is its handles, its guards and its parked
/// connections: nothing else holds one at rest.
#[track_caller]
fn assert_counts(pool: &Pool<Counting>, handles: usize, guards: usize) {
    let parked = parked(pool);
    assert_eq!(
        Arc::strong_count(shared(pool)),
        handles + guards + parked,
        "{handles} handles, {guards} guards, {parked} parked"
    );
}

/// Drops the last handle and checks the pool is freed with every
/// connection closed.
#[track_caller]
fn assert_freed_on_drop(pool: Pool<Counting>, manager: &Counting) {
    let weak: Weak<Engine<Counting>> = Arc::downgrade(shared(&pool));
    drop(pool);
    assert!(weak.upgrade().is_none(), "the pool outlived its handles");
    assert_eq!(
        manager.live.load(Ordering::SeqCst),
        0,
        "connections left open"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_parked_connection_carries_its_guards_count_to_the_next_checkout() {
    let (pool, manager) = pool(2, true).await;
    assert_counts(&pool, 1, 0);
    for _ in 0..3 {
        let a = pool.get().await.unwrap();
        assert_counts(&pool, 1, 1);
        drop(a);
        assert_eq!(parked(&pool), 1, "parked for this thread");
        assert_counts(&pool, 1, 0);
    }
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_counts(&pool, 1, 2);
    drop((a, b));
    assert_eq!(parked(&pool), 2);
    assert_counts(&pool, 1, 0);
    assert_freed_on_drop(pool, &manager);
}

#[tokio::test(flavor = "current_thread")]
async fn claims_by_other_threads_take_the_count_over_or_release_it() {
    let (pool, manager) = pool(3, true).await;
    let held: Vec<_> = futures::future::join_all((0..3).map(|_| pool.get())).await;
    drop(held);
    assert_eq!(parked(&pool), 3);
    assert_counts(&pool, 1, 0);
    // `try_get` on a thread that parked nothing claims a parked slot.
    let other = pool.clone();
    let got = std::thread::spawn(move || {
        let c = other.try_get().expect("a parked connection");
        drop(c);
        // Parked again, for that thread; its handle goes with it.
    })
    .join();
    assert!(got.is_ok());
    assert_counts(&pool, 1, 0);
    // The sweep, `soft_evict_all`, `resize` and `retain` take every parked
    // one and release their counts.
    assert_eq!(pool.retain(|_, _| true), 0);
    assert_counts(&pool, 1, 0);
    pool.soft_evict_all();
    // The refill to `min_size` runs in connector tasks, each with a count.
    settle().await;
    assert_counts(&pool, 1, 0);
    let c = pool.get().await.unwrap();
    drop(c);
    assert_counts(&pool, 1, 0);
    assert_freed_on_drop(pool, &manager);
}

#[tokio::test(flavor = "current_thread")]
async fn a_guard_that_outlives_the_last_handle_closes_its_connection() {
    let (pool, manager) = pool(2, true).await;
    let parked_one = pool.get().await.unwrap();
    drop(parked_one);
    let out: PooledConnection<Counting> = pool.get().await.unwrap();
    let weak = Arc::downgrade(shared(&pool));
    drop(pool);
    assert!(weak.upgrade().is_some(), "the guard keeps the pool");
    assert_eq!(
        manager.live.load(Ordering::SeqCst),
        1,
        "idle ones closed with the last handle"
    );
    drop(out);
    assert!(weak.upgrade().is_none(), "freed with the last guard");
    assert_eq!(manager.live.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_check_that_panics_at_return_loses_no_count() {
    let (pool, manager) = pool(2, true).await;
    let conn = pool.get().await.unwrap();
    manager.panics.store(true, Ordering::SeqCst);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(conn)));
    assert!(
        dropped.is_err(),
        "the panic goes on to the code that dropped it"
    );
    manager.panics.store(false, Ordering::SeqCst);
    assert_eq!(
        manager.live.load(Ordering::SeqCst),
        1,
        "the broken one closed"
    );
    // The refill to `min_size` runs in a connector task, with a count.
    settle().await;
    assert_counts(&pool, 1, 0);
    assert_freed_on_drop(pool, &manager);
}

#[tokio::test(flavor = "current_thread")]
async fn close_takes_the_parked_counts() {
    let (pool, manager) = pool(2, true).await;
    let held: Vec<_> = futures::future::join_all((0..2).map(|_| pool.get())).await;
    drop(held);
    assert_eq!(parked(&pool), 2);
    pool.close().await;
    assert_counts(&pool, 1, 0);
    assert_freed_on_drop(pool, &manager);
}

#[tokio::test(flavor = "current_thread")]
async fn without_affinity_nothing_is_parked_and_counts_are_the_guards() {
    let (pool, manager) = pool(2, false).await;
    let a = pool.get().await.unwrap();
    assert_counts(&pool, 1, 1);
    drop(a);
    assert_eq!(parked(&pool), 0);
    assert_counts(&pool, 1, 0);
    assert_freed_on_drop(pool, &manager);
}

/// Many threads checking out and returning at once, with `try_get`,
/// `soft_evict_all` and `resize` against them: at rest the counts add up,
/// and the pool is freed at the end.
#[test]
fn counts_add_up_after_a_concurrent_run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let (pool, manager) = rt.block_on(pool_with_min(8, 0, true));
    rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    for i in 0..2_000 {
                        if (i + t) % 97 == 0 {
                            drop(pool.try_get());
                        } else {
                            drop(pool.get().await.unwrap());
                        }
                        if i % 100 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        // Spreads the evictions and resizes over the run: a pacing of the
        // test's own faults, bounded at 20 rounds, not a wait for anything.
        for round in 0..20 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            if round % 5 == 0 {
                pool.soft_evict_all();
            }
            if round % 7 == 0 {
                pool.resize(if round % 2 == 0 { 6 } else { 8 }).unwrap();
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    // Shutting the runtime down ends any connector still running, with its
    // count: what is left is the handle and the parked connections.
    drop(rt);
    assert_counts(&pool, 1, 0);
    let weak = Arc::downgrade(shared(&pool));
    drop(pool);
    assert!(weak.upgrade().is_none(), "the pool outlived its handles");
    assert_eq!(
        manager.live.load(Ordering::SeqCst),
        0,
        "connections left open"
    );
}
