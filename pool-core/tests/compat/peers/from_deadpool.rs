//! deadpool's pool tests (`crates/deadpool/tests/*.rs`), one test per
//! scenario, named `<file>_<test>`. deadpool's `build` opens nothing, so a
//! deadpool pool is `Pool::new_lazy` here; its `recycle` runs at every
//! checkout, so validation has no bypass. Its unmanaged pool (objects made
//! elsewhere, no manager) is a pool whose manager opens nothing, filled with
//! `Pool::add`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pool_core::{
    async_trait, ConnectionInfo, Hooks, ManageConnection, Pool, PoolConfig, PoolError,
    PooledConnection, TimeoutPhase,
};
use tokio::time::sleep;

use crate::peers::peer::{checked, Peer};
use crate::support::{
    assert_bounds, config, eventually, until, Behaviour, Mock, MockError, Scripted,
};

fn lazy(peer: &Peer, config: pool_core::PoolConfigBuilder) -> Pool<Peer> {
    Pool::new_lazy(peer.clone(), config.build().unwrap())
}

/// `(total, idle, waiting)`: deadpool's `status()` as `(size, available,
/// waiting)`.
fn status<M: ManageConnection>(pool: &Pool<M>) -> (u32, u32, u32) {
    let s = pool.state();
    (s.total, s.idle, s.waiting)
}

// managed.rs

/// Counts as connections are taken and given back one by one.
#[tokio::test(start_paused = true)]
async fn managed_basic() {
    let pool = lazy(&Peer::default(), checked(16));
    assert_eq!(status(&pool), (0, 0, 0));
    let a = pool.get().await.unwrap();
    assert_eq!(status(&pool), (1, 0, 0));
    let b = pool.get().await.unwrap();
    assert_eq!(status(&pool), (2, 0, 0));
    let c = pool.get().await.unwrap();
    assert_eq!(status(&pool), (3, 0, 0));
    drop(a);
    assert_eq!(status(&pool), (3, 1, 0));
    drop(b);
    assert_eq!(status(&pool), (3, 2, 0));
    drop(c);
    assert_eq!(status(&pool), (3, 3, 0));
}

/// Closing fails the waiting caller and every later `get()` with `Closed`;
/// the connection in use is closed when it comes back. (Here `close()`
/// also waits for it, so it runs in a task of its own.)
#[tokio::test(start_paused = true)]
async fn managed_closing() {
    let pool = lazy(&Peer::default(), checked(1));
    let held = pool.get().await.unwrap();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    until(|| pool.state().waiting == 1).await;
    assert_eq!(pool.state().idle, 0);

    let closing = tokio::spawn({
        let pool = pool.clone();
        async move { pool.close().await }
    });
    until(|| pool.is_closed()).await;
    until(|| pool.state().waiting == 0).await;
    assert!(matches!(waiter.await.unwrap(), Err(PoolError::Closed)));
    assert!(matches!(pool.get().await, Err(PoolError::Closed)));
    assert!(matches!(
        pool.get_timeout(Duration::from_millis(1)).await,
        Err(PoolError::Closed)
    ));

    drop(held);
    closing.await.unwrap();
    assert_eq!(status(&pool), (0, 0, 0));
}

/// A hundred tasks on a pool of three, each using a connection once: three
/// connections open and idle at the end, having served a hundred uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_concurrent() {
    let pool = lazy(&Peer::default(), checked(3));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut conn = pool.get().await.unwrap();
                conn.uses.push(1);
                sleep(Duration::from_millis(1)).await;
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    eventually("all back", || pool.state().idle == 3).await;
    assert_eq!(status(&pool), (3, 3, 0));
    let three = [
        pool.get().await.unwrap(),
        pool.get().await.unwrap(),
        pool.get().await.unwrap(),
    ];
    assert_eq!(three.iter().map(|c| c.uses.len()).sum::<usize>(), 100);
}

/// Taking a connection out of the pool (deadpool's `Object::take`,
/// `detach` here) frees its place: the pool opens new ones in its stead.
#[tokio::test(start_paused = true)]
async fn managed_object_take() {
    let pool = lazy(&Peer::default(), checked(2));
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_eq!(status(&pool), (2, 0, 0));
    let _taken = PooledConnection::detach(a);
    assert_eq!(status(&pool), (1, 0, 0));
    let _taken_too = PooledConnection::detach(b);
    assert_eq!(status(&pool), (0, 0, 0));
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_eq!(status(&pool), (2, 0, 0));
    drop(a);
    drop(b);
    assert_eq!(status(&pool), (2, 2, 0));
}

/// `retain` by age closes the idle connections its predicate rejects and
/// says how many.
#[tokio::test(start_paused = true)]
async fn managed_retain() {
    let pool = lazy(&Peer::default(), checked(4));
    {
        let _a = pool.get().await.unwrap();
        let _b = pool.get().await.unwrap();
        sleep(Duration::from_millis(6)).await;
        let _c = pool.get().await.unwrap();
        sleep(Duration::from_millis(6)).await;
    }
    assert_eq!(pool.state().total, 3);
    let young = |_: &_, info: ConnectionInfo| info.age <= Duration::from_millis(10);
    assert_eq!(pool.retain(young), 2);
    assert_eq!(pool.state().total, 1);
    sleep(Duration::from_millis(6)).await;
    assert_eq!(pool.retain(young), 1);
    assert_eq!(pool.state().total, 0);
}

/// `retain` takes an `FnMut`: it sees each idle connection once.
#[tokio::test(start_paused = true)]
async fn managed_retain_fnmut() {
    let pool = lazy(&Peer::default(), checked(4));
    {
        let _a = pool.get().await.unwrap();
        let _b = pool.get().await.unwrap();
        let _c = pool.get().await.unwrap();
        let _d = pool.get().await.unwrap();
    }
    let mut seen = 0;
    let closed = pool.retain(|_, _| {
        seen += 1;
        false
    });
    assert_eq!((closed, seen), (4, 4));
    assert_eq!(pool.state().total, 0);
}

// managed_cancellation.rs

/// Every combination of a connect, a checkout check and the three hooks
/// each succeeding, failing, slow or never finishing, under callers that
/// give up after a few microseconds: the pool never counts more than its
/// bound, nor has more open. (deadpool's `pre_recycle`/`post_recycle` are
/// `before_acquire`/`after_release` here; 4^5 = 1024 pools.)
#[tokio::test(start_paused = true)]
async fn managed_cancellation_test_cancellations() {
    let gates = [
        Behaviour::Ok,
        Behaviour::Err,
        Behaviour::Slow,
        Behaviour::Never,
    ];
    let mut combos = 0;
    for connect in gates {
        for check in gates {
            for after_connect in gates {
                for before_acquire in gates {
                    for after_release in gates {
                        let mock = Mock::default();
                        mock.script.on_connect.set(connect);
                        mock.script.on_is_valid.set(check);
                        let hooks = Scripted::default();
                        hooks.0.after_connect.set(after_connect);
                        hooks.0.before_acquire.set(before_acquire);
                        hooks.0.after_release.set(after_release);
                        let what = [connect, check, after_connect, before_acquire, after_release];
                        cancel_storm(mock, hooks, &what).await;
                        combos += 1;
                    }
                }
            }
        }
    }
    assert_eq!(combos, 1024);
}

async fn cancel_storm(mock: Mock, hooks: Scripted, what: &[Behaviour]) {
    let pool = Pool::new_lazy_with_hooks(
        mock,
        config(2)
            .validation_mode(pool_core::ValidationMode::IsValid)
            .validation_bypass(Duration::ZERO)
            .build()
            .unwrap(),
        hooks,
    );
    let tasks: Vec<_> = (1..=8u64)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for _ in 0..1_000 {
                    let _conn = tokio::time::timeout(Duration::from_micros(i), pool.get()).await;
                    sleep(Duration::from_micros(i)).await;
                }
            })
        })
        .collect();
    for _ in 0..10 {
        sleep(Duration::from_millis(1)).await;
        let s = pool.state();
        assert!(s.total <= s.max_size, "{s:?} with {what:?}");
        assert_bounds(&pool);
    }
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    let s = pool.state();
    assert!(s.total <= s.max_size, "{s:?} with {what:?}");
    assert!(s.idle <= s.max_size, "{s:?} with {what:?}");
    assert_bounds(&pool);
}

// managed_deadlock.rs

/// deadpool: two callers wait on a pool of one while its first connect is
/// in flight; that connect fails and the first caller gets the error, the
/// second is served by the next connect. Here one failed connect is retried
/// at once before any caller sees it: the first caller is served by the
/// retry, and the second by that connection when it comes back.
#[tokio::test(start_paused = true)]
async fn managed_deadlock_pool_drained() {
    let (peer, outcomes) = Peer::remote();
    let pool = lazy(
        &peer,
        checked(1)
            .connect_timeout(Duration::from_secs(60))
            .acquire_timeout(Duration::from_secs(60)),
    );
    let first = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await }
    });
    until(|| pool.state().waiting == 1).await;
    let second = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(|c| c.id) }
    });
    until(|| pool.state().waiting == 2).await;

    outcomes.send(false).unwrap();
    outcomes.send(true).unwrap();
    let conn = first
        .await
        .unwrap()
        .expect("the retry served the first caller");
    assert_eq!(pool.state().waiting, 1, "the second still waits");
    assert_eq!(pool.state().total, 1);
    let id = conn.id;
    drop(conn);
    assert_eq!(second.await.unwrap().unwrap(), id);
    assert_eq!(status(&pool), (1, 1, 0));
}

// managed_hooks.rs

/// An object that is a number (deadpool's hook tests' `Computer`).
#[derive(Debug)]
struct Numbers {
    next: AtomicU64,
}

#[derive(Debug)]
struct Number {
    value: u64,
    /// Checkouts (or returns) a hook let through.
    passed: u32,
}

impl Numbers {
    fn from(start: u64) -> Self {
        Self {
            next: AtomicU64::new(start),
        }
    }
}

#[async_trait]
impl ManageConnection for Numbers {
    type Connection = Number;
    type Error = MockError;
    async fn connect(&self) -> Result<Number, MockError> {
        Ok(Number {
            value: self.next.fetch_add(1, Ordering::SeqCst),
            passed: 0,
        })
    }
    async fn is_valid(&self, _: &mut Number) -> Result<(), MockError> {
        Ok(())
    }
}

/// What a hook does with a number.
#[derive(Debug, Clone, Copy)]
enum Do {
    /// Adds one.
    Increment,
    /// Rejects odd numbers.
    RejectOdd,
    /// Lets the first pass through, rejects the next.
    PassOnce,
}

impl Do {
    fn apply(self, n: &mut Number) -> Result<bool, MockError> {
        match self {
            Do::Increment => {
                n.value += 1;
                Ok(true)
            }
            Do::RejectOdd if n.value % 2 == 1 => Err(MockError("odd creation")),
            Do::RejectOdd => Ok(true),
            Do::PassOnce if n.passed > 0 => Err(MockError("fail!")),
            Do::PassOnce => {
                n.passed += 1;
                Ok(true)
            }
        }
    }
}

/// One hook doing one thing; the others do nothing.
#[derive(Debug, Clone, Copy)]
enum Hook {
    AfterConnect(Do),
    BeforeAcquire(Do),
    AfterRelease(Do),
}

#[async_trait]
impl Hooks<Numbers> for Hook {
    async fn after_connect(&self, n: &mut Number) -> Result<(), MockError> {
        match *self {
            Hook::AfterConnect(d) => d.apply(n).map(drop),
            _ => Ok(()),
        }
    }
    async fn before_acquire(&self, n: &mut Number, _: ConnectionInfo) -> Result<bool, MockError> {
        match *self {
            Hook::BeforeAcquire(d) => d.apply(n),
            _ => Ok(true),
        }
    }
    async fn after_release(&self, n: &mut Number, _: ConnectionInfo) -> Result<bool, MockError> {
        match *self {
            Hook::AfterRelease(d) => d.apply(n),
            _ => Ok(true),
        }
    }
    fn uses_before_acquire(&self) -> bool {
        matches!(self, Hook::BeforeAcquire(_))
    }
    fn uses_after_release(&self) -> bool {
        matches!(self, Hook::AfterRelease(_))
    }
}

fn numbers(start: u64, max: u32, hook: Hook) -> Pool<Numbers> {
    Pool::new_lazy_with_hooks(Numbers::from(start), checked(max).build().unwrap(), hook)
}

/// Takes a number from the pool and gives it back at once.
async fn take(pool: &Pool<Numbers>) -> u64 {
    pool.get().await.unwrap().value
}

/// `post_create` (`after_connect`) changes the new object before anyone
/// gets it. deadpool's `post_create_ok` and `post_create_ok_async` are one
/// scenario here: every hook is async.
#[tokio::test(start_paused = true)]
async fn managed_hooks_post_create_ok() {
    let pool = numbers(42, 1, Hook::AfterConnect(Do::Increment));
    assert_eq!(take(&pool).await, 43);
}

/// deadpool: a failing `post_create` fails the `get()` that created it.
/// Here a failed `after_connect` is a failed connect, retried at once, so
/// no caller sees the odd numbers fail: they get 0, 2 and 4.
#[tokio::test(start_paused = true)]
async fn managed_hooks_post_create_err_abort() {
    let pool = numbers(0, 3, Hook::AfterConnect(Do::RejectOdd));
    let a = pool.get().await.unwrap();
    let b = pool.get().await.expect("the failed set-up is retried");
    let c = pool.get().await.expect("the failed set-up is retried");
    assert_eq!([a.value, b.value, c.value], [0, 2, 4]);
    assert_eq!(pool.metrics().creation_error_count, 2);
}

/// `pre_recycle` (`before_acquire`) runs on every checkout of an idle
/// object, not on the new one.
#[tokio::test(start_paused = true)]
async fn managed_hooks_pre_recycle_ok() {
    let pool = numbers(42, 1, Hook::BeforeAcquire(Do::Increment));
    for expected in [42, 43, 44, 45] {
        assert_eq!(take(&pool).await, expected);
    }
}

/// A `pre_recycle` that lets each object through once: every second
/// checkout throws the object away and the caller gets a new one; one
/// object open and idle after each.
#[tokio::test(start_paused = true)]
async fn managed_hooks_pre_recycle_err_continue() {
    let pool = numbers(0, 1, Hook::BeforeAcquire(Do::PassOnce));
    for expected in [0, 0, 1, 1, 2, 2] {
        assert_eq!(take(&pool).await, expected);
        assert_eq!((pool.state().total, pool.state().idle), (1, 1));
    }
}

/// deadpool's `post_recycle` runs at checkout after `recycle`; here
/// `after_release` runs at return. Counting from 42, the numbers handed out
/// are the same.
#[tokio::test(start_paused = true)]
async fn managed_hooks_post_recycle_ok() {
    let pool = numbers(42, 1, Hook::AfterRelease(Do::Increment));
    for expected in [42, 43, 44, 45] {
        assert_eq!(take(&pool).await, expected);
    }
}

/// A `post_recycle` that lets each object through once: deadpool throws it
/// away at the next checkout, so one object stays open. Here
/// `after_release` rejects it at its return: the numbers handed out are the
/// same, but after a rejected return the pool holds nothing until the next
/// `get()` opens a new one.
#[tokio::test(start_paused = true)]
async fn managed_hooks_post_recycle_err_continue() {
    let pool = numbers(0, 1, Hook::AfterRelease(Do::PassOnce));
    for (i, expected) in [0, 0, 1, 1, 2, 2].into_iter().enumerate() {
        assert_eq!(take(&pool).await, expected);
        let kept = if i % 2 == 0 { (1, 1) } else { (0, 0) };
        eventually("the return hook ran", || {
            (pool.state().total, pool.state().idle) == kept
        })
        .await;
    }
}

// managed_resize.rs

/// deadpool shrinks to 0 and grows back to 1 with two objects out; 0 is
/// not a size here (`resize(0)` is a `ConfigError` and changes nothing).
/// Growing and shrinking keeps the connections in use counted: at 1, the
/// first one back is closed, the second kept.
#[tokio::test(start_paused = true)]
async fn managed_resize_test_grow_reuse_existing() {
    let pool = lazy(&Peer::default(), checked(2));
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    assert_eq!((pool.state().total, pool.state().max_size), (2, 2));
    let err = pool.resize(0).unwrap_err();
    assert_eq!(err.field(), "max_size");
    assert_eq!((pool.state().total, pool.state().max_size), (2, 2));
    pool.resize(1).unwrap();
    assert_eq!((pool.state().total, pool.state().max_size), (2, 1));
    drop(a);
    assert_eq!((pool.state().total, pool.state().max_size), (1, 1));
    drop(b);
    assert_eq!((pool.state().total, pool.state().max_size), (1, 1));
}

/// Shrinking with both out: the first one back is closed.
#[tokio::test(start_paused = true)]
async fn managed_resize_resize_pool_shrink() {
    let pool = lazy(&Peer::default(), checked(2));
    let a = pool.get().await.unwrap();
    let b = pool.get().await.unwrap();
    pool.resize(1).unwrap();
    assert_eq!((pool.state().total, pool.state().max_size), (2, 1));
    drop(b);
    assert_eq!((pool.state().total, pool.state().max_size), (1, 1));
    drop(a);
    assert_eq!((pool.state().total, pool.state().max_size), (1, 1));
}

/// Growing lets a second caller in; both are kept at their return.
#[tokio::test(start_paused = true)]
async fn managed_resize_resize_pool_grow() {
    let pool = lazy(&Peer::default(), checked(1));
    let a = pool.get().await.unwrap();
    pool.resize(2).unwrap();
    assert_eq!((pool.state().total, pool.state().max_size), (1, 2));
    let b = pool.get().await.unwrap();
    assert_eq!((pool.state().total, pool.state().max_size), (2, 2));
    drop(b);
    drop(a);
    assert_eq!((pool.state().total, pool.state().max_size), (2, 2));
}

/// Grow, shrink, grow with one out: it is kept. deadpool goes through 0
/// and has no ceiling; here 0 is refused and growing past
/// `max_size_ceiling` (4 x `max_size` unless set) is too.
#[tokio::test(start_paused = true)]
async fn managed_resize_resize_pool_shrink_grow() {
    let pool = lazy(&Peer::default(), checked(1).max_size_ceiling(8));
    let a = pool.get().await.unwrap();
    pool.resize(2).unwrap();
    assert!(pool.resize(0).is_err());
    pool.resize(5).unwrap();
    assert!(pool.resize(9).is_err(), "above the ceiling");
    assert_eq!((pool.state().total, pool.state().max_size), (1, 5));
    drop(a);
    assert_eq!((pool.state().total, pool.state().max_size), (1, 5));
}

/// deadpool builds a pool of size 0 and grows it under a waiting caller;
/// a pool of 0 is a `ConfigError` here. The same scenario from a full pool
/// of one: growing serves the caller waiting, with a new connection.
#[tokio::test(start_paused = true)]
async fn managed_resize_resize_pool_grow_concurrent() {
    let zero = PoolConfig::builder().max_size(0).build();
    assert_eq!(zero.unwrap_err().field(), "max_size");

    let pool = lazy(&Peer::default(), checked(1));
    let held = pool.get().await.unwrap();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await }
    });
    until(|| pool.state().waiting == 1).await;
    assert_eq!(status(&pool), (1, 0, 1));
    pool.resize(2).unwrap();
    let conn = waiter.await.unwrap().expect("served after the resize");
    assert_ne!(conn.id, held.id);
    assert_eq!(status(&pool), (2, 0, 0));
    drop(conn);
    assert_eq!(status(&pool), (2, 1, 0));
}

/// A closed pool opens nothing when resized: it stays empty and closed.
/// (deadpool also reports its bound as 0 once closed; here `resize` is
/// accepted and `state()` reports the bound in force, as for an open pool.)
#[tokio::test(start_paused = true)]
async fn managed_resize_close_resize() {
    let pool = lazy(&Peer::default(), checked(4));
    pool.close().await;
    pool.resize(16).unwrap();
    sleep(Duration::from_millis(10)).await;
    assert_eq!((pool.state().total, pool.state().max_size), (0, 16));
    assert!(matches!(pool.get().await, Err(PoolError::Closed)));
}

// managed_timeout.rs

/// A connect and a check that never finish: `get()` times out. deadpool
/// sets every timeout to zero; a zero timeout is a `ConfigError` here, so
/// the scenario runs with a millisecond.
#[tokio::test(start_paused = true)]
async fn managed_timeout_rt_tokio_1() {
    let zero = PoolConfig::builder()
        .acquire_timeout(Duration::ZERO)
        .build();
    assert_eq!(zero.unwrap_err().field(), "acquire_timeout");

    let peer = Peer::default();
    peer.mock.script.on_connect.set(Behaviour::Never);
    peer.mock.script.on_is_valid.set(Behaviour::Never);
    let pool = lazy(
        &peer,
        checked(16)
            .acquire_timeout(Duration::from_millis(1))
            .connect_timeout(Duration::from_millis(1))
            .validation_timeout(Duration::from_millis(1)),
    );
    let err = pool.get().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
}

// managed_unreliable_manager.rs

/// Every connect fails: `get()` fails, at once (well within 10 ms), and the
/// pool holds nothing.
#[tokio::test(start_paused = true)]
async fn managed_unreliable_manager_create() {
    let peer = Peer::default();
    peer.mock.script.set(&peer.mock.script.fail_connect, true);
    let pool = lazy(&peer, checked(16));
    assert!(pool.get().await.is_err());
    assert_eq!((pool.state().total, pool.state().idle), (0, 0));
    let second = tokio::time::timeout(Duration::from_millis(10), pool.get())
        .await
        .expect("fails before 10 ms");
    assert!(second.is_err());
    assert_eq!((pool.state().total, pool.state().idle), (0, 0));
}

/// Every check fails: the two idle connections are closed at the next
/// checkout (deadpool detaches them) and the caller gets a new one; one
/// left, idle once back.
#[tokio::test(start_paused = true)]
async fn managed_unreliable_manager_recycle() {
    let peer = Peer::default();
    peer.mock.script.set(&peer.mock.script.fail_valid, true);
    let pool = lazy(&peer, checked(16));
    {
        let _a = pool.get().await.unwrap();
        let _b = pool.get().await.unwrap();
    }
    assert_eq!((pool.state().total, pool.state().idle), (2, 2));
    assert_eq!(pool.metrics().evictions.validation, 0);
    {
        let _c = pool.get().await.unwrap();
        assert_eq!((pool.state().total, pool.state().idle), (1, 0));
        assert_eq!(pool.metrics().evictions.validation, 2);
    }
    assert_eq!((pool.state().total, pool.state().idle), (1, 1));
}

// unmanaged.rs and unmanaged_timeout.rs

/// deadpool's unmanaged pool: objects made elsewhere and added, a manager
/// that opens none.
async fn unmanaged(max: u32, objects: usize) -> (Peer, Pool<Peer>) {
    let peer = Peer::connects(0);
    let pool = lazy(&peer, checked(max));
    for _ in 0..objects {
        pool.add(peer.dedicated().await).expect("room");
    }
    (peer, pool)
}

/// Three added objects, taken one by one.
#[tokio::test(start_paused = true)]
async fn unmanaged_basic() {
    let (_peer, pool) = unmanaged(3, 3).await;
    assert_eq!((pool.state().total, pool.state().idle), (3, 3));
    let _a = pool.get().await.unwrap();
    assert_eq!((pool.state().total, pool.state().idle), (3, 2));
    let _b = pool.get().await.unwrap();
    assert_eq!((pool.state().total, pool.state().idle), (3, 1));
    let _c = pool.get().await.unwrap();
    assert_eq!((pool.state().total, pool.state().idle), (3, 0));
}

/// Closing an unmanaged pool of one with the object out and a caller
/// waiting: the caller and every later `get()` get `Closed`, `try_get`
/// nothing; the object is closed when it comes back.
#[tokio::test(start_paused = true)]
async fn unmanaged_closing() {
    let (_peer, pool) = unmanaged(1, 1).await;
    let held = pool.get().await.unwrap();
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move { pool.get().await.map(drop) }
    });
    assert!(!pool.is_closed());
    assert_eq!(pool.state().idle, 0);
    until(|| pool.state().waiting == 1).await;
    let closing = tokio::spawn({
        let pool = pool.clone();
        async move { pool.close().await }
    });
    until(|| pool.is_closed()).await;
    assert!(matches!(waiter.await.unwrap(), Err(PoolError::Closed)));
    assert!(matches!(pool.get().await, Err(PoolError::Closed)));
    assert!(pool.try_get().is_none());
    drop(held);
    closing.await.unwrap();
    assert!(pool.is_closed());
    assert!(pool.try_get().is_none());
    assert_eq!(pool.state().idle, 0);
}

/// A hundred tasks share three added objects: a hundred uses among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmanaged_concurrent() {
    let (_peer, pool) = unmanaged(3, 3).await;
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.get().await.unwrap().uses.push(1) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    eventually("all back", || pool.state().idle == 3).await;
    assert_eq!((pool.state().total, pool.state().idle), (3, 3));
    let three = [
        pool.get().await.unwrap(),
        pool.get().await.unwrap(),
        pool.get().await.unwrap(),
    ];
    assert_eq!(three.iter().map(|c| c.uses.len()).sum::<usize>(), 100);
}

/// deadpool's `add` waits for room in a full pool and `remove` takes an
/// object out. Here `add` never waits: a full pool gives the connection
/// back at once; taking one out (`get` + `detach`) makes room.
#[tokio::test(start_paused = true)]
async fn unmanaged_test_unmanaged_add_remove() {
    let (peer, pool) = unmanaged(2, 0).await;
    pool.add(peer.dedicated().await).unwrap();
    assert_eq!(pool.state().total, 1);
    pool.add(peer.dedicated().await).unwrap();
    assert_eq!(pool.state().total, 2);
    assert!(pool.add(peer.dedicated().await).is_err(), "full");
    let _out = PooledConnection::detach(pool.get().await.unwrap());
    assert_eq!(pool.state().total, 1);
    pool.add(peer.dedicated().await).expect("room again");
    assert_eq!(pool.state().total, 2);
    let _out = PooledConnection::detach(pool.get().await.unwrap());
    let _out = PooledConnection::detach(pool.get().await.unwrap());
    assert_eq!(pool.state().total, 0);
}

/// `try_add` and `try_remove`: `add` and `try_get` + `detach` here.
#[tokio::test(start_paused = true)]
async fn unmanaged_try_add_try_remove() {
    let (peer, pool) = unmanaged(2, 0).await;
    pool.add(peer.dedicated().await).unwrap();
    pool.add(peer.dedicated().await).unwrap();
    assert_eq!(pool.state().total, 2);
    assert!(pool.add(peer.dedicated().await).is_err());
    let _out = PooledConnection::detach(pool.try_get().unwrap());
    assert_eq!(pool.state().total, 1);
    assert!(pool.add(peer.dedicated().await).is_ok());
    let _out = PooledConnection::detach(pool.try_get().unwrap());
    let _out = PooledConnection::detach(pool.try_get().unwrap());
    assert_eq!(pool.state().total, 0);
    assert!(pool.try_get().is_none());
}

/// deadpool: an `add` to a full pool waits until an object is taken out.
/// Here it is refused at once, and succeeds once one is out; the added one
/// is then what the next caller gets.
#[tokio::test(start_paused = true)]
async fn unmanaged_add_timeout() {
    let (peer, pool) = unmanaged(1, 1).await;
    let late = peer.dedicated().await;
    let late = pool.add(late).expect_err("full: given back at once");
    let late_id = late.id;
    let _out = PooledConnection::detach(pool.try_get().unwrap());
    pool.add(late).expect("room now");
    assert_eq!(pool.state().total, 1);
    assert_eq!(pool.try_get().unwrap().id, late_id);
}

/// An empty pool whose manager cannot make anything in time: a `get()` with
/// a millisecond's limit times out. (deadpool's `no_runtime` and
/// `no_runtime_from_config` have no counterpart: the pool runs on tokio.)
#[tokio::test(start_paused = true)]
async fn unmanaged_timeout_rt_tokio_1() {
    let peer = Peer::default();
    peer.mock.script.on_connect.set(Behaviour::Never);
    let pool = lazy(&peer, checked(16).acquire_timeout(Duration::from_millis(1)));
    match pool.get_timeout(Duration::from_millis(1)).await {
        Err(PoolError::Timeout { phase, .. }) => assert_ne!(phase, TimeoutPhase::Validation),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(pool.get().await.unwrap_err().is_timeout());
}
