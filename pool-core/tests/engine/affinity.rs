//! Thread affinity (`PoolConfigBuilder::thread_affinity`): a connection
//! returned while nobody waits is kept for the thread that returned it,
//! and every contract point still holds across threads: a return while a
//! caller waits reaches that caller; a connection kept by a thread that
//! has exited is found by checkouts, `close()` and the idle sweep; idle
//! counts include kept connections.

use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use crate::support;
use crate::support::{config, Mock};
use pool_core::{Pool, PooledConnection};

/// Takes `n` connections on a thread of its own and returns them there;
/// the thread then exits, leaving them kept for it.
fn keep_on_a_thread_that_exits(pool: &Pool<Mock>, n: usize) -> Vec<u64> {
    let pool = pool.clone();
    thread::spawn(move || {
        let conns: Vec<PooledConnection<Mock>> = (0..n)
            .map(|_| pool.try_get().expect("an idle connection"))
            .collect();
        conns.iter().map(|c| c.id).collect()
    })
    .join()
    .unwrap()
}

/// A pool of `n` slots with `min` connections (at least the one `Pool::new`
/// opens) open and idle. Its housekeeper sweeps (taking the idle set for an
/// instant) only one period after it starts, an hour here, so nothing but
/// the test touches the idle set afterwards.
async fn settled_pool(mock: &Mock, n: u32, min: u32, affinity: bool) -> Pool<Mock> {
    let pool = support::started(
        mock,
        config(n)
            .min_size(min)
            .housekeeping_period(Duration::from_secs(3600))
            .thread_affinity(affinity),
    )
    .await;
    let open = min.max(1);
    support::eventually("the pool opened its connections", || {
        let m = pool.metrics();
        m.idle == open && m.opening == 0
    })
    .await;
    pool
}

async fn full_pool(mock: &Mock, n: u32, affinity: bool) -> Pool<Mock> {
    settled_pool(mock, n, n, affinity).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_kept_by_an_exited_thread_count_idle_and_are_found() {
    let mock = Mock::default();
    let pool = full_pool(&mock, 3, true).await;
    let mut kept = keep_on_a_thread_that_exits(&pool, 3);
    let m = pool.metrics();
    assert_eq!((m.idle, m.in_use, m.total), (3, 0, 3), "{m:?}");
    // Another thread finds all three, with nothing left on the stack.
    let guards: Vec<_> = (0..3)
        .map(|_| pool.try_get().expect("kept connections are idle"))
        .collect();
    let mut found: Vec<u64> = guards.iter().map(|c| c.id).collect();
    kept.sort_unstable();
    found.sort_unstable();
    assert_eq!(found, kept);
    drop(guards);
    // And `get` does not wait for them either.
    let held: Vec<_> = futures::future::join_all((0..3).map(|_| pool.get()))
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("three idle connections, no waiting");
    assert_eq!(mock.script.connects(), 3, "no connection opened for them");
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_while_a_caller_waits_reaches_it() {
    let mock = Mock::default();
    let pool = full_pool(&mock, 1, true).await;
    let conn = pool.get().await.unwrap();
    let id = conn.id;
    let p = pool.clone();
    let waiter = tokio::spawn(async move { p.get_timeout(Duration::from_secs(5)).await });
    while pool.metrics().waiting == 0 {
        tokio::task::yield_now().await;
    }
    // Returned on a thread of its own, which would keep it if it ignored
    // the waiter: the waiter would then time out.
    thread::spawn(move || drop(conn)).join().unwrap();
    let got = waiter.await.unwrap().expect("the waiter gets the return");
    assert_eq!(got.id, id);
    assert_eq!(pool.metrics().waiting, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_closes_kept_connections() {
    let mock = Mock::default();
    let pool = full_pool(&mock, 2, true).await;
    keep_on_a_thread_that_exits(&pool, 2);
    // Kept by this thread too: one of each.
    let conn = pool.try_get().unwrap();
    drop(conn);
    tokio::time::timeout(Duration::from_secs(5), pool.close())
        .await
        .expect("close found every kept connection");
    assert_eq!(mock.script.alive(), 0);
    assert_eq!(pool.metrics().total, 0);
    assert!(pool.try_get().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_sweep_retires_kept_connections() {
    let (mock, pool) = support::pool(
        config(2)
            .min_size(0)
            .idle_timeout(Duration::from_millis(150))
            .max_lifetime(None)
            .housekeeping_period(Duration::from_millis(50)),
    )
    .await;
    // Two open, both kept by a thread that then exits.
    drop(futures::future::join_all([pool.get(), pool.get()]).await);
    assert_eq!(pool.metrics().total, 2);
    keep_on_a_thread_that_exits(&pool, 2);
    let limit = tokio::time::Instant::now() + Duration::from_secs(10);
    while pool.metrics().total != 0 {
        assert!(
            tokio::time::Instant::now() < limit,
            "kept connections never idled out: {:?}",
            pool.metrics()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(pool.metrics().evictions.idle_timeout, 2);
    assert_eq!(mock.script.closed.load(Ordering::SeqCst), 2);
}

/// The order each thread gets connections back in: with affinity, a
/// thread's own newest return first; without, the pool-wide newest.
fn reuse_order(pool: &Pool<Mock>) -> (u64, u64, u64, u64) {
    let (tx, rx) = std::sync::mpsc::channel();
    let (back_tx, back_rx) = std::sync::mpsc::channel::<()>();
    let p = pool.clone();
    let ready = tx.clone();
    let other = thread::spawn(move || {
        let c = p.try_get().unwrap();
        let id = c.id;
        ready.send(()).unwrap();
        // Returned after the main thread's two returns.
        back_rx.recv().unwrap();
        drop(c);
        tx.send(()).unwrap();
        back_rx.recv().unwrap();
        (id, p.try_get().unwrap().id)
    });
    // The other thread took its connection first.
    rx.recv().unwrap();
    let a = pool.try_get().unwrap();
    let b = pool.try_get().unwrap();
    let (ia, ib) = (a.id, b.id);
    assert_ne!(ia, ib);
    drop(a);
    drop(b);
    back_tx.send(()).unwrap();
    rx.recv().unwrap();
    let mine = pool.try_get().unwrap();
    let first_here = mine.id;
    back_tx.send(()).unwrap();
    let (returned_there, first_there) = other.join().unwrap();
    drop(mine);
    (ib, first_here, returned_there, first_there)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_thread_gets_its_own_newest_return_first() {
    let pool = full_pool(&Mock::default(), 3, true).await;
    let (newest_here, first_here, returned_there, first_there) = reuse_order(&pool);
    assert_eq!(first_here, newest_here, "this thread's own newest return");
    assert_eq!(first_there, returned_there, "the other thread's own return");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_affinity_the_pool_wide_newest_comes_first() {
    let pool = full_pool(&Mock::default(), 3, false).await;
    let (newest_here, first_here, returned_there, first_there) = reuse_order(&pool);
    assert_eq!(
        first_here, returned_there,
        "the newest return, from the other thread"
    );
    assert_eq!(first_there, newest_here, "then the next newest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_evict_all_resize_and_retain_reach_kept_connections() {
    let mock = Mock::default();
    let pool = settled_pool(&mock, 3, 0, true).await;
    let open_three = || async {
        drop(futures::future::join_all([pool.get(), pool.get(), pool.get()]).await);
        assert_eq!(pool.metrics().total, 3);
    };

    // Each operation right after the connections were kept (`retain` and
    // the sweep put the ones they keep on the shared stack).
    open_three().await;
    keep_on_a_thread_that_exits(&pool, 3);
    pool.soft_evict_all();
    let m = pool.metrics();
    assert_eq!(
        (m.total, m.evictions.soft_evict),
        (0, 3),
        "soft_evict_all closed kept ones: {m:?}"
    );

    open_three().await;
    keep_on_a_thread_that_exits(&pool, 3);
    let mut seen = Vec::new();
    let closed = pool.retain(|c, _| {
        seen.push(c.id);
        c.id % 2 == 0
    });
    assert_eq!(seen.len(), 3, "retain saw every kept connection");
    assert_eq!(closed, seen.iter().filter(|&&id| id % 2 != 0).count());

    open_three().await;
    keep_on_a_thread_that_exits(&pool, 3);
    pool.resize(1).unwrap();
    let m = pool.metrics();
    assert_eq!(
        (m.total, m.idle),
        (1, 1),
        "resize closed kept ones down to the bound: {m:?}"
    );
}
