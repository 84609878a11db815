//! bb8's pool tests (`bb8/tests/test.rs`), one test per scenario, named as
//! there. bb8's `build` opens `min_idle` connections (none by default), so
//! a bb8 pool without `min_idle` is `Pool::new_lazy` here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pool_core::{async_trait, Hooks, Pool, PoolError, TimeoutPhase};
use tokio::time::sleep;

use crate::peers::peer::{checked, Peer};
use crate::support;
use crate::support::{eventually, until, Behaviour, Conn, MockError};

fn lazy(peer: &Peer, config: pool_core::PoolConfigBuilder) -> Pool<Peer> {
    Pool::new_lazy(peer.clone(), config.build().unwrap())
}

/// Five callers hold five connections of a pool of five whose manager can
/// open exactly five.
#[tokio::test(start_paused = true)]
async fn test_max_size_ok() {
    let peer = Peer::connects(5);
    let pool = support::started(&peer, checked(5)).await;
    let mut tasks = Vec::new();
    let (held_tx, mut held_rx) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    for _ in 0..5 {
        let pool = pool.clone();
        let held_tx = held_tx.clone();
        let release = release.clone();
        tasks.push(tokio::spawn(async move {
            let conn = pool.get().await.unwrap();
            held_tx.send(()).unwrap();
            release.notified().await;
            drop(conn);
        }));
    }
    for _ in 0..5 {
        held_rx.recv().await.unwrap();
    }
    assert_eq!(pool.state().in_use, 5);
    assert_eq!(peer.connects_started(), 5);
    release.notify_waiters();
    for t in tasks {
        t.await.unwrap();
    }
}

/// With both connections of a pool of two held, a third caller waits, and
/// the first release serves it.
#[tokio::test(start_paused = true)]
async fn test_acquire_release() {
    let peer = Peer::default();
    let pool = lazy(&peer, checked(2));
    let first = pool.get().await.unwrap();
    let second = pool.get().await.unwrap();
    let third = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(|c| c.id) }
    });
    until(|| pool.state().waiting == 1).await;
    assert!(!third.is_finished(), "the third caller waits");
    let first_id = first.id;
    drop(first);
    assert_eq!(third.await.unwrap().unwrap(), first_id);
    drop(second);
}

/// `Pool` is `Send + Sync`.
#[test]
fn test_is_send_sync() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Pool<Peer>>();
}

/// A manager that calls every connection broken: the one handed out is
/// dropped when it comes back, counted as broken once.
#[tokio::test(start_paused = true)]
async fn test_drop_on_broken() {
    let peer = Peer::default();
    peer.mock.script.on_has_broken.set(Behaviour::Err);
    let pool = lazy(&peer, checked(10));
    let conn = pool
        .get()
        .await
        .expect("a connection opened for the caller");
    assert_eq!(peer.closed(), 0);
    drop(conn);
    assert_eq!(peer.closed(), 1, "dropped at its return");
    assert_eq!(pool.metrics().evictions.broken, 1);
}

/// A database that refuses every connect fails the build with the connect
/// error (bb8 after retrying for `connection_timeout`; here at once).
#[tokio::test(start_paused = true)]
async fn test_initialization_failure() {
    let peer = Peer::connects(0);
    let config = checked(1)
        .min_idle(1)
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    match Pool::new(peer.clone(), config).await {
        Err(PoolError::Backend(e)) => assert_eq!(e.0, "no more connections"),
        other => panic!("expected the connect error, got {other:?}"),
    }
}

/// bb8: a lazy pool whose connects all fail times out (`RunError::TimedOut`).
/// Here the caller gets the connect error at once (fail fast); with
/// `fail_fast(false)` it waits out its timeout, as in bb8.
#[tokio::test(start_paused = true)]
async fn test_lazy_initialization_failure() {
    let peer = Peer::connects(0);
    let pool = lazy(&peer, checked(10).acquire_timeout(Duration::from_secs(1)));
    match pool.get().await {
        Err(PoolError::ConnectFailed(e)) => assert_eq!(e.0, "no more connections"),
        other => panic!("expected ConnectFailed, got {other:?}"),
    }

    let waiting = lazy(
        &peer,
        checked(10)
            .acquire_timeout(Duration::from_secs(1))
            .fail_fast(false),
    );
    let started = tokio::time::Instant::now();
    let err = waiting.get().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= Duration::from_secs(1));
}

/// bb8 with `retry_connection(false)` still times out; here, as above, the
/// caller gets the connect error at once (connects are always retried
/// inside the pool, so there is no switch).
#[tokio::test(start_paused = true)]
async fn test_lazy_initialization_failure_no_retry() {
    let peer = Peer::connects(0);
    let pool = lazy(&peer, checked(10).acquire_timeout(Duration::from_secs(1)));
    let err = pool.get().await.unwrap_err();
    assert!(matches!(err, PoolError::ConnectFailed(_)), "{err:?}");
    // Nothing was handed out and nothing is left open.
    assert_eq!(pool.state().total, 0);
}

/// With the only connection held, a `get()` fails once its timeout passes.
#[tokio::test(start_paused = true)]
async fn test_get_timeout() {
    let peer = Peer::default();
    let pool = support::started(
        &peer,
        checked(1).acquire_timeout(Duration::from_millis(100)),
    )
    .await;
    let held = pool.get().await.unwrap();
    match pool.get().await {
        Err(PoolError::Timeout { phase, waited, .. }) => {
            assert_eq!(phase, TimeoutPhase::Wait);
            assert!(waited >= Duration::from_millis(100));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    drop(held);
    drop(pool.get().await.expect("free again"));
}

/// 25 000 callers on a pool of three are all served within the timeout.
#[tokio::test(start_paused = true)]
async fn test_lots_of_waiters() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(3).acquire_timeout(Duration::from_secs(5))).await;
    let tasks: Vec<_> = (0..25_000)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.get().await.map(drop) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().expect("every caller is served");
    }
    assert!(pool.state().total <= 3);
}

/// A caller that gives up (its own timeout around `get()`) leaves the pool
/// whole: the next caller gets the connection once it is back.
#[tokio::test(start_paused = true)]
async fn test_timeout_caller() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(1).acquire_timeout(Duration::from_secs(5))).await;
    let one = pool.get().await.unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(100), pool.get()).await;
    assert!(gave_up.is_err(), "still waiting when the caller gave up");
    drop(one);
    drop(pool.get().await.expect("the connection came back"));
    assert_eq!(pool.state().waiting, 0);
}

/// The database goes away while both connections of the pool are in use:
/// once back and idle they fail validation, both are closed (counted as
/// invalid), and the caller gets an error because no new one can be opened.
#[tokio::test(start_paused = true)]
async fn test_now_invalid() {
    let peer = Peer::default();
    let pool = support::started(
        &peer,
        checked(2)
            .min_idle(2)
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await;
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    let s = &peer.mock.script;
    s.set(&s.fail_connect, true);
    s.set(&s.fail_valid, true);
    drop(a);
    drop(b);
    sleep(Duration::from_secs(3)).await;
    assert!(pool.get().await.is_err());
    assert_eq!(pool.metrics().evictions.validation, 2);
}

/// bb8 closes idle connections past `idle_timeout` even below `min_idle`
/// (4 of the 5, then the fifth once returned). Here `min_idle` survives
/// `idle_timeout`, as in HikariCP: none of the five is closed.
#[tokio::test(start_paused = true)]
async fn test_idle_timeout() {
    let peer = Peer::connects(5);
    let pool = support::started(
        &peer,
        checked(5)
            .min_idle(5)
            .idle_timeout(Duration::from_secs(1))
            .housekeeping_period(Duration::from_secs(1))
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await;
    eventually("min_idle filled", || pool.state().idle == 5).await;
    let held = pool.get().await.unwrap();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 0, "idle ones kept for min_idle");
    drop(held);
    sleep(Duration::from_secs(3)).await;
    assert_eq!(peer.closed(), 0);
    assert_eq!(pool.state().idle, 5);
    assert_eq!(pool.metrics().evictions.idle_timeout, 0);
}

/// Past `max_lifetime` the four idle connections are closed by the
/// housekeeper and the held one when it comes back: five closed for their
/// age (the manager can open no replacement).
#[tokio::test(start_paused = true)]
async fn test_max_lifetime() {
    let peer = Peer::connects(5);
    let pool = support::started(
        &peer,
        checked(5)
            .min_idle(5)
            .max_lifetime(Duration::from_secs(1))
            .max_lifetime_jitter(0.0)
            .housekeeping_period(Duration::from_secs(1))
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await;
    eventually("min_idle filled", || pool.state().idle == 5).await;
    let held = pool.get().await.unwrap();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 4);
    drop(held);
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 5);
    assert_eq!(pool.metrics().evictions.max_lifetime, 5);
}

/// A connection held past its lifetime, with no housekeeping in between,
/// is closed when it comes back.
#[tokio::test(start_paused = true)]
async fn test_max_lifetime_reap_on_drop() {
    let peer = Peer::default();
    let pool = support::started(
        &peer,
        checked(10)
            .max_lifetime(Duration::from_secs(1))
            .housekeeping_period(Duration::from_secs(999))
            .acquire_timeout(Duration::from_secs(1)),
    )
    .await;
    let conn = pool.get().await.unwrap();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(peer.closed(), 0);
    drop(conn);
    assert_eq!(peer.closed(), 1);
    assert_eq!(pool.metrics().evictions.max_lifetime, 1);
}

/// bb8's `build` returns with `min_idle` connections open; here `Pool::new`
/// opens one and the rest of `min_idle` follows in the background. Then,
/// as in bb8: three checkouts leave two idle (five open), and their return
/// leaves five idle.
#[tokio::test(start_paused = true)]
async fn test_min_idle() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(5).min_idle(2)).await;
    eventually("min_idle filled", || pool.state().idle == 2).await;
    assert_eq!(pool.state().total, 2);
    let held: Vec<_> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(pool.get().await.unwrap());
        }
        v
    };
    eventually("min_idle refilled", || pool.state().idle == 2).await;
    assert_eq!(pool.state().total, 5);
    drop(held);
    eventually("all back", || pool.state().idle == 5).await;
    assert_eq!(pool.state().total, 5);
}

/// Dropping the pool closes its idle connections.
#[tokio::test(start_paused = true)]
async fn test_conns_drop_on_pool_drop() {
    let peer = Peer::default();
    let pool = support::started(
        &peer,
        checked(10)
            .min_idle(10)
            .max_lifetime(Duration::from_secs(10)),
    )
    .await;
    eventually("min_idle filled", || pool.state().idle == 10).await;
    drop(pool);
    eventually("all closed", || peer.closed() == 10).await;
    assert_eq!(peer.mock.script.alive(), 0);
}

/// A check that fails once costs the caller nothing: the pool opens
/// another connection.
#[tokio::test(start_paused = true)]
async fn test_retry() {
    let peer = Peer::default();
    peer.plan.failing_checks.store(1, Ordering::SeqCst);
    let pool = support::started(&peer, checked(1)).await;
    for _ in 0..2 {
        drop(pool.get().await.expect("served despite one failed check"));
    }
}

/// One failed connect, then they all work: the build and both checkouts
/// succeed, each caller using its connection. The same for a lazy pool's
/// first caller.
#[tokio::test(start_paused = true)]
async fn test_conn_fail_once() {
    let peer = Peer::default();
    peer.plan.failing_connects.store(1, Ordering::SeqCst);
    let lazily = lazy(&peer, checked(1));
    drop(
        lazily
            .get()
            .await
            .expect("one failed connect is retried before the caller sees it"),
    );
    drop(lazily);

    let peer = Peer::default();
    peer.plan.failing_connects.store(1, Ordering::SeqCst);
    let pool = Pool::new(peer.clone(), checked(1).build().unwrap())
        .await
        .expect("one failed connect is retried before the build fails");
    let mut used = 0;
    for _ in 0..2 {
        let mut conn = pool.get().await.unwrap();
        conn.uses.push(1);
        used += 1;
    }
    assert_eq!(used, 2);
}

/// `test_acquire_release` again, each task dropping its guard itself.
#[tokio::test(start_paused = true)]
async fn test_guard() {
    let peer = Peer::default();
    let pool = lazy(&peer, checked(2));
    let mut holders = Vec::new();
    let mut releases = Vec::new();
    for _ in 0..2 {
        let (got_tx, got_rx) = tokio::sync::oneshot::channel();
        let (rel_tx, rel_rx) = tokio::sync::oneshot::channel::<()>();
        let pool = pool.clone();
        holders.push(tokio::spawn(async move {
            let conn = pool.get().await;
            got_tx.send(()).unwrap();
            let _ = rel_rx.await;
            drop(conn);
        }));
        got_rx.await.unwrap();
        releases.push(rel_tx);
    }
    let (got_tx, mut got_rx) = tokio::sync::oneshot::channel();
    let third = tokio::spawn({
        let pool = pool.clone();
        async move {
            let conn = pool.get().await.unwrap();
            got_tx.send(()).unwrap();
            drop(conn);
        }
    });
    until(|| pool.state().waiting == 1).await;
    assert!(got_rx.try_recv().is_err(), "the third caller still waits");
    releases.remove(0).send(()).unwrap();
    third.await.unwrap();
    releases.remove(0).send(()).unwrap();
    for h in holders {
        h.await.unwrap();
    }
}

/// Numbers each new connection when it is opened (bb8's
/// `CustomizeConnection::on_acquire`, `Hooks::after_connect` here).
#[derive(Debug, Default)]
struct Numbering(AtomicU64);

#[async_trait]
impl Hooks<Peer> for Numbering {
    async fn after_connect(&self, conn: &mut Conn) -> Result<(), MockError> {
        conn.uses.push(1 + self.0.fetch_add(1, Ordering::SeqCst));
        Ok(())
    }
    fn uses_before_acquire(&self) -> bool {
        false
    }
    fn uses_after_release(&self) -> bool {
        false
    }
}

/// Each new connection is set up once; one taken again is not set up again.
#[tokio::test(start_paused = true)]
async fn test_customize_connection_acquire() {
    let peer = Peer::default();
    let pool = Pool::new_lazy_with_hooks(
        peer.clone(),
        checked(2).build().unwrap(),
        Numbering::default(),
    );
    {
        let one = pool.get().await.unwrap();
        assert_eq!(one.uses, [1]);
        let two = pool.get().await.unwrap();
        assert_eq!(two.uses, [2]);
    }
    let again = pool.get().await.unwrap();
    assert!(again.uses == [1] || again.uses == [2], "{:?}", again.uses);
}

/// The first five `has_broken` answers say "broken": ten callers on a pool
/// of five are all still served.
#[tokio::test(start_paused = true)]
async fn test_broken_connections_dont_starve_pool() {
    let peer = Peer::default();
    peer.plan.broken_answers.store(5, Ordering::SeqCst);
    let pool = lazy(&peer, checked(5).acquire_timeout(Duration::from_secs(10)));
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.get().await.map(drop) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().expect("served");
    }
}

/// bb8 counts a checkout served at once and one that waited, with the wait.
/// Here: two checkouts, no timeout, and the waiting one's wait recorded.
#[tokio::test(start_paused = true)]
async fn test_state_get_contention() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(1).min_idle(1)).await;
    let held = pool.get().await.unwrap();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    until(|| pool.state().waiting == 1).await;
    sleep(Duration::from_millis(10)).await;
    drop(held);
    waiter.await.unwrap().unwrap();
    let m = pool.metrics();
    assert_eq!(m.acquire_count, 2);
    assert_eq!(m.timeout_count, 0);
    assert!(m.acquire_wait_max >= Duration::from_millis(10), "{m:?}");
}

/// A pool of one with `min_idle` one, used once, opened one connection.
#[tokio::test(start_paused = true)]
async fn test_statistics_connections_created() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(1).min_idle(1)).await;
    tokio::spawn({
        let pool = pool.clone();
        async move { drop(pool.get().await.unwrap()) }
    })
    .await
    .unwrap();
    assert_eq!(pool.metrics().creation_count, 1);
}

/// A pool that cannot connect serves a connection added to it from
/// outside. (bb8's first `get()` times out; here it fails at once, see
/// `test_lazy_initialization_failure`.)
#[tokio::test(start_paused = true)]
async fn test_can_use_added_connections() {
    let peer = Peer::connects(0);
    let pool = lazy(&peer, checked(10).acquire_timeout(Duration::from_millis(1)));
    let err = pool.get().await.unwrap_err();
    assert!(matches!(err, PoolError::ConnectFailed(_)), "{err:?}");
    pool.add(peer.dedicated().await)
        .expect("room for it in the pool");
    drop(pool.get().await.expect("the added connection"));
}

/// Connections can be added until the pool is full; the next one is given
/// back.
#[tokio::test(start_paused = true)]
async fn test_add_ok_until_max_size() {
    let peer = Peer::default();
    let pool = support::started(&peer, checked(3).min_idle(1)).await;
    for _ in 0..2 {
        pool.add(peer.dedicated().await).expect("room");
    }
    assert_eq!(pool.state().total, 3);
    let refused = pool.add(peer.dedicated().await);
    assert!(refused.is_err(), "a full pool gives the connection back");
}

/// bb8's `add` refuses a connection `has_broken` calls broken
/// (`AddError::Broken`). Here `add` takes it, and `has_broken` runs when it
/// is taken from idle: it is closed there and the caller gets a new one.
#[tokio::test(start_paused = true)]
async fn test_add_checks_broken_connections() {
    let peer = Peer::default();
    let pool = lazy(&peer, checked(3).min_idle(0));
    let mut conn = peer.dedicated().await;
    conn.broken = true;
    let broken_id = conn.id;
    pool.add(conn).expect("add does not check");
    let got = pool.get().await.unwrap();
    assert_ne!(got.id, broken_id, "the broken one was not handed out");
    assert_eq!(pool.metrics().evictions.broken, 1);
}

/// LIFO reuse: a connection returned is the next one handed out, and a
/// second concurrent caller opens exactly one more.
#[tokio::test(start_paused = true)]
async fn test_reuse_on_drop() {
    let peer = Peer::default();
    let pool = lazy(&peer, checked(100).min_idle(0));
    let first = pool.get().await.unwrap();
    let first_id = first.id;
    drop(first);
    let again = pool.get().await.unwrap();
    assert_eq!(again.id, first_id);
    let _other = pool.get().await.unwrap();
    assert_eq!(pool.state().total, 2);
    assert_eq!(peer.connects_started(), 2);
}
