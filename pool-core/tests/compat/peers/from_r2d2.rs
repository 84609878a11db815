//! r2d2's pool tests (`src/test.rs`), one test per scenario, named as there.
//! r2d2 is synchronous and its `min_idle` defaults to `max_size`: its
//! `build` returns with the pool full. Here the same pool is
//! `min_idle(max_size)`, filled in the background after `Pool::new`; its
//! threads become tasks and its sleeps run on tokio's paused clock.

use std::sync::atomic::Ordering;
use std::time::Duration;

use pool_core::{async_trait, Hooks, Pool, PoolError, TimeoutPhase};
use tokio::time::sleep;

use crate::peers::peer::{checked, Peer};
use crate::support;
use crate::support::{eventually, Behaviour, Conn, MockError};

/// r2d2's `build`: a pool opened full (`min_idle == max_size`).
async fn full(peer: &Peer, config: pool_core::PoolConfigBuilder, max: u32) -> Pool<Peer> {
    let pool = support::started(peer, config.max_size(max).min_idle(max)).await;
    eventually("the pool filled", || pool.state().idle == max).await;
    pool
}

/// Five connections held at once from a pool of five whose manager opens
/// exactly five.
#[tokio::test(start_paused = true)]
async fn test_max_size_ok() {
    let peer = Peer::connects(5);
    let pool = full(&peer, checked(5), 5).await;
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(pool.get().await.unwrap());
    }
    assert_eq!(pool.state().in_use, 5);
}

/// Take two, give one back, take it again.
#[tokio::test(start_paused = true)]
async fn test_acquire_release() {
    let peer = Peer::default();
    let pool = full(&peer, checked(2), 2).await;
    let one = pool.get().await.unwrap();
    let two = pool.get().await.unwrap();
    drop(one);
    let three = pool.get().await.unwrap();
    drop(two);
    drop(three);
    assert_eq!(pool.state().total, 2);
}

/// `try_get` hands out the idle connections and then `None`; one given
/// back can be taken again.
#[tokio::test(start_paused = true)]
async fn try_get() {
    let peer = Peer::default();
    let pool = full(&peer, checked(2), 2).await;
    let one = pool.try_get();
    let two = pool.try_get();
    let three = pool.try_get();
    assert!(one.is_some());
    assert!(two.is_some());
    assert!(three.is_none());
    drop(one);
    assert!(pool.try_get().is_some());
}

/// `get_timeout`: served at once; served when a holder gives it back
/// within the limit; an error when the holder keeps it past the limit.
#[tokio::test(start_paused = true)]
async fn get_timeout() {
    let peer = Peer::default();
    let pool = full(
        &peer,
        checked(1).acquire_timeout(Duration::from_millis(500)),
        1,
    )
    .await;
    let limit = Duration::from_millis(100);
    let first = pool.get_timeout(limit).await;
    assert!(first.is_ok());
    tokio::spawn(async move {
        sleep(Duration::from_millis(50)).await;
        drop(first);
    });
    let second = pool.get_timeout(limit).await;
    assert!(second.is_ok(), "given back within the limit");
    tokio::spawn(async move {
        sleep(Duration::from_millis(150)).await;
        drop(second);
    });
    let third = pool.get_timeout(limit).await;
    assert!(third.is_err(), "held past the limit");
}

/// `Pool` is `Send + Sync`.
#[test]
fn test_is_send_sync() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Pool<Peer>>();
}

/// While one caller's checkout check is stuck, another caller is served:
/// the pool holds no lock across `is_valid`.
#[tokio::test(start_paused = true)]
async fn test_issue_2_unlocked_during_is_valid() {
    let peer = Peer::default();
    let pool = full(
        &peer,
        checked(2).validation_timeout(Duration::from_secs(60)),
        2,
    )
    .await;
    // Past the first-checkout exemption: both are checked from now on.
    sleep(Duration::from_secs(2)).await;
    peer.plan.hold_first_check.store(true, Ordering::SeqCst);
    let stuck = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    peer.plan.check_entered.notified().await;
    drop(
        pool.get()
            .await
            .expect("served while the other check is stuck"),
    );
    peer.plan.check_release.notify_one();
    stuck.await.unwrap().unwrap();
}

/// A manager that calls every connection broken: the one handed out is
/// dropped when it comes back.
#[tokio::test(start_paused = true)]
async fn test_drop_on_broken() {
    let peer = Peer::default();
    peer.mock.script.on_has_broken.set(Behaviour::Err);
    let pool = support::started(&peer, checked(10)).await;
    let conn = pool
        .get()
        .await
        .expect("a connection opened for the caller");
    let closed = peer.closed();
    drop(conn);
    assert_eq!(peer.closed(), closed + 1, "dropped at its return");
}

/// A build against a database that refuses every connect fails, with the
/// connect error's message.
#[tokio::test(start_paused = true)]
async fn test_initialization_failure() {
    let peer = Peer::connects(0);
    let err = Pool::new(
        peer.clone(),
        checked(10)
            .acquire_timeout(Duration::from_secs(1))
            .build()
            .unwrap(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no more connections"), "{err}");
}

/// A lazy pool against that database fails the first `get()`, with the
/// connect error's message.
#[tokio::test(start_paused = true)]
async fn test_lazy_initialization_failure() {
    let peer = Peer::connects(0);
    let pool = Pool::new_lazy(
        peer.clone(),
        checked(10)
            .acquire_timeout(Duration::from_secs(1))
            .build()
            .unwrap(),
    );
    let err = pool.get().await.unwrap_err();
    assert!(err.to_string().contains("no more connections"), "{err}");
}

/// With the only connection held, `get()` gives up after the pool's
/// `acquire_timeout`, no sooner.
#[tokio::test(start_paused = true)]
async fn test_get_global_timeout() {
    let peer = Peer::default();
    let pool = full(&peer, checked(1).acquire_timeout(Duration::from_secs(1)), 1).await;
    let _held = pool.get().await.unwrap();
    let started = tokio::time::Instant::now();
    match pool.get().await {
        Err(PoolError::Timeout { waited, phase, .. }) => {
            assert_eq!(phase, TimeoutPhase::Wait);
            assert!(waited >= Duration::from_secs(1), "{waited:?}");
            assert_eq!(started.elapsed().as_secs(), 1);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

/// r2d2's customizer: its `on_acquire` (here `after_connect`) fails until a
/// connection has been dropped, and sets the connection up after; its
/// `on_release` runs when a connection is closed.
#[derive(Debug)]
struct FailsUntilOneDropped(Peer);

#[async_trait]
impl Hooks<Peer> for FailsUntilOneDropped {
    async fn after_connect(&self, conn: &mut Conn) -> Result<(), MockError> {
        if self.0.closed() == 0 {
            return Err(MockError("blammo"));
        }
        conn.uses.push(1);
        Ok(())
    }
    fn uses_before_acquire(&self) -> bool {
        false
    }
    fn uses_after_release(&self) -> bool {
        false
    }
}

/// The first connection fails its set-up and is dropped; the retry is set
/// up and served; the caller's connection, broken, is closed when it comes
/// back and not before.
#[tokio::test(start_paused = true)]
async fn test_connection_customizer() {
    let peer = Peer::default();
    peer.mock.script.on_has_broken.set(Behaviour::Err);
    let pool = Pool::new_with_hooks(
        peer.clone(),
        checked(10).build().unwrap(),
        FailsUntilOneDropped(peer.clone()),
    )
    .await
    .expect("a set-up that fails once is retried");
    let conn = pool.get().await.unwrap();
    assert_eq!(conn.uses, [1], "set up");
    assert!(peer.closed() >= 1, "the first one was dropped");
    let closed = peer.closed();
    drop(conn);
    assert_eq!(peer.closed(), closed + 1, "released at its return");
}

/// r2d2 closes idle connections past `idle_timeout` though its `min_idle`
/// is the whole pool (4 of 5 closed while one is held). Here `min_idle`
/// survives `idle_timeout`, as in HikariCP: none is closed.
#[tokio::test(start_paused = true)]
async fn test_idle_timeout() {
    let peer = Peer::connects(5);
    let pool = full(
        &peer,
        checked(5)
            .idle_timeout(Duration::from_secs(1))
            .housekeeping_period(Duration::from_secs(1)),
        5,
    )
    .await;
    let conn = pool.get().await.unwrap();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 0);
    drop(conn);
    assert_eq!(peer.closed(), 0);
    assert_eq!(pool.metrics().evictions.idle_timeout, 0);
}

/// One connection used every 250 ms keeps itself warm; the four others
/// idle out. (r2d2's pool is full from `min_idle`; here it is filled by
/// five callers and `min_idle` is left at 0, which `test_idle_timeout`
/// shows would keep all five.)
#[tokio::test(start_paused = true)]
async fn idle_timeout_partial_use() {
    let peer = Peer::connects(5);
    let pool = support::started(
        &peer,
        checked(5)
            .idle_timeout(Duration::from_secs(1))
            .housekeeping_period(Duration::from_secs(1)),
    )
    .await;
    let mut five = Vec::new();
    for _ in 0..5 {
        five.push(pool.get().await.unwrap());
    }
    drop(five);
    for _ in 0..8 {
        sleep(Duration::from_millis(250)).await;
        drop(pool.get().await.unwrap());
    }
    assert_eq!(peer.closed(), 4);
    assert_eq!(pool.state().total, 1);
}

/// Past `max_lifetime`: the four idle ones are closed, the held one at its
/// return, and with the manager exhausted the next `get()` fails.
#[tokio::test(start_paused = true)]
async fn test_max_lifetime() {
    let peer = Peer::connects(5);
    let pool = full(
        &peer,
        checked(5)
            .max_lifetime(Duration::from_secs(1))
            .max_lifetime_jitter(0.0)
            .acquire_timeout(Duration::from_secs(1))
            .housekeeping_period(Duration::from_secs(1)),
        5,
    )
    .await;
    let conn = pool.get().await.unwrap();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 4);
    drop(conn);
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 5);
    assert!(pool.get().await.is_err());
}

/// `min_idle` two of five: two idle at rest; three held leaves two idle of
/// five open; all back, five idle.
#[tokio::test(start_paused = true)]
async fn min_idle() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(5).min_idle(2)).await;
    sleep(Duration::from_secs(1)).await;
    assert_eq!(pool.state().idle, 2);
    assert_eq!(pool.state().total, 2);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(pool.get().await.unwrap());
    }
    sleep(Duration::from_secs(1)).await;
    assert_eq!(pool.state().idle, 2);
    assert_eq!(pool.state().total, 5);
    drop(held);
    assert_eq!(pool.state().idle, 5);
    assert_eq!(pool.state().total, 5);
}

/// Dropping the pool closes all ten connections.
#[tokio::test(start_paused = true)]
async fn conns_drop_on_pool_drop() {
    let peer = Peer::default();
    let pool = full(&peer, checked(10).max_lifetime(Duration::from_secs(10)), 10).await;
    drop(pool);
    for _ in 0..10 {
        if peer.closed() == 10 {
            return;
        }
        sleep(Duration::from_secs(1)).await;
    }
    panic!("{} of 10 connections closed", peer.closed());
}

/// r2d2 reports acquire, checkout, timeout, checkin and release events to a
/// handler. This pool has no event handler; the same sequence shows in its
/// counters: one opened and handed out, one timeout of the given length,
/// the broken one closed at its return, a new one opened and handed out.
#[tokio::test(start_paused = true)]
async fn events() {
    let peer = Peer::default();
    peer.mock.script.on_has_broken.set(Behaviour::Err);
    let pool = Pool::new_lazy(
        peer.clone(),
        checked(1)
            .acquire_timeout(Duration::from_millis(250))
            .build()
            .unwrap(),
    );
    let conn = pool.get().await.unwrap();
    let id = conn.id;
    let m = pool.metrics();
    assert_eq!((m.creation_count, m.acquire_count), (1, 1));

    match pool.get_timeout(Duration::from_millis(123)).await {
        Err(PoolError::Timeout { waited, .. }) => {
            assert_eq!(waited, Duration::from_millis(123));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(pool.metrics().timeout_count, 1);

    drop(conn);
    assert_eq!(pool.metrics().evictions.broken, 1, "checked in, released");

    let again = pool.get().await.unwrap();
    assert!(again.id > id, "a new connection");
    let m = pool.metrics();
    assert_eq!((m.creation_count, m.acquire_count), (2, 2));
}

/// r2d2's per-connection `extensions` survive the connection's return.
/// Here state lives in the connection itself, and LIFO hands the last
/// returned one out next, with its state.
#[tokio::test(start_paused = true)]
async fn extensions() {
    let peer = Peer::default();
    let pool = full(&peer, checked(2), 2).await;
    let mut one = pool.get().await.unwrap();
    let mut two = pool.get().await.unwrap();
    one.uses.push(1);
    two.uses.push(2);
    drop(one);
    let again = pool.get().await.unwrap();
    assert_eq!(again.uses, [1]);
}
