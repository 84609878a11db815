//! The public handle: documented one-line hand-offs to the engine
//! (`engine/`).

use std::future::Future;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use pool_api::{Holder, Hooks, ManageConnection, PoolConfig, PoolError, PoolMetrics, PoolState};

use crate::engine::Engine;
use crate::engine::PooledConnection;

/// A pool of connections made by a [`ManageConnection`].
///
/// `Pool` is a cheap handle: clone it freely; every clone shares one pool.
///
/// # Example
///
/// ```
/// use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
///
/// #[derive(Debug)]
/// struct Numbers;
///
/// #[async_trait]
/// impl ManageConnection for Numbers {
///     type Connection = Vec<u32>;
///     type Error = std::io::Error;
///     async fn connect(&self) -> Result<Vec<u32>, std::io::Error> {
///         Ok(Vec::new())
///     }
///     async fn is_valid(&self, _: &mut Vec<u32>) -> Result<(), std::io::Error> {
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = Pool::new(Numbers, PoolConfig::builder().max_size(4).build()?).await?;
/// let mut conn = pool.get().await?;
/// conn.push(1); // derefs to the connection
/// drop(conn); // back to the pool
/// assert_eq!(pool.metrics().idle, 1);
/// # Ok(())
/// # }
/// ```
///
/// # Memory ordering
///
/// Returning a connection *happens-before* the next checkout of that same
/// connection, whichever task or thread does it: everything written through
/// a `PooledConnection` before it was dropped is visible to the next holder.
/// (The return publishes the connection with a Release CAS on the idle stack,
/// a Release store and CAS of its slot's state when it parks it for its
/// thread (`thread_affinity`), or under the waiter's lock; the checkout
/// takes it with an Acquire CAS on the stack or on the slot's state, or
/// under that lock.)
///
/// # Dropping the pool
///
/// A `Pool` is a handle: clones share one pool. Dropping the last handle
/// closes the pool as [`close`](Self::close) does, without waiting: idle
/// connections are closed at once, and the ones still checked out when
/// their `PooledConnection`s drop. `close().await` also waits for them.
///
/// # Runtime
///
/// The pool runs on tokio: connects, resets, hooks and the housekeeper are
/// tokio tasks, and timeouts use tokio's clock (so `start_paused` tests
/// control it).
///
/// A pool may outlive the runtime it was built on (one pool in a `static`
/// used by one `#[tokio::test]` after another): its background tasks end
/// with that runtime and start again on the one that uses the pool next.
/// A connection may be returned on any thread, inside a runtime or not;
/// where a slot is freed outside any runtime, a caller waiting is woken to
/// ask for the connect from its own task.
pub struct Pool<M: ManageConnection> {
    pub(crate) shared: Arc<Engine<M>>,
}

/// A pool's identity ([`Pool::id`]): equal for clones of one pool, unequal
/// for two pools alive at the same time. A pool dropped for good may see
/// its identity reused by a later one, so hold a clone of the pool for as
/// long as its identity must stay its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PoolId(usize);

impl<M: ManageConnection> Pool<M> {
    /// Builds a pool and opens `max(min_size, 1)` connections before
    /// returning, so an unreachable database is reported now, not at the
    /// first `get()`.
    ///
    /// It returns within `acquire_timeout`: each connect is bounded by
    /// `connect_timeout` or by the time left, whichever is less; a first
    /// failed connect is retried once while time is left.
    ///
    /// # Errors
    ///
    /// [`PoolError::Backend`] with the connect error (or, before anything
    /// is opened, the error of the manager's
    /// [`check`](ManageConnection::check): settings that cannot work
    /// together), or [`PoolError::Timeout`] (phase `Connect`) when the
    /// connects ran out of time: `timed out after 5s opening a connection
    /// (0 of 2 open: 0 idle, 0 in use; 0 opening; 0 waiting); last error:
    /// connect to 10.0.0.7:5432 did not finish within 5s` (the host where
    /// the manager names it, [`ManageConnection::target`]). Nothing is left
    /// running after an error.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes whatever it had opened.
    pub async fn new(manager: M, config: PoolConfig) -> Result<Self, PoolError<M::Error>> {
        Self::build(manager, config, None).await
    }

    /// [`Pool::new`] with hooks run on every new connection, at checkout and
    /// at return. Each phase costs only where it runs: hooks that say they
    /// do not use `before_acquire` ([`Hooks::uses_before_acquire`]) leave
    /// checkouts on the synchronous fast path, and hooks that do not use
    /// `after_release` ([`Hooks::uses_after_release`]) leave clean returns
    /// inline.
    ///
    /// # Errors
    ///
    /// As [`Pool::new`]; a failing `after_connect` hook fails it too.
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::new`].
    pub async fn new_with_hooks(
        manager: M,
        config: PoolConfig,
        hooks: impl Hooks<M>,
    ) -> Result<Self, PoolError<M::Error>> {
        Self::build(manager, config, Some(Box::new(hooks))).await
    }

    async fn build(
        manager: M,
        config: PoolConfig,
        hooks: Option<Box<dyn Hooks<M>>>,
    ) -> Result<Self, PoolError<M::Error>> {
        // Settings that cannot work together fail here, before any connect.
        manager.check().map_err(PoolError::Backend)?;
        // No housekeeper yet: it would start refilling `min_size` alongside
        // the initial connects.
        let pool = Self {
            shared: Arc::new(Engine::new(manager, config, hooks)),
        };
        if let Err(e) = pool.shared.open_initial().await {
            pool.shared.close().await;
            return Err(e);
        }
        pool.shared.ensure_housekeeper();
        Ok(pool)
    }

    /// Builds a pool that opens nothing until a connection is wanted (the
    /// first `get()`, or the housekeeper refilling `min_size`).
    pub fn new_lazy(manager: M, config: PoolConfig) -> Self {
        Self::lazy(manager, config, None)
    }

    /// [`Pool::new_lazy`] with hooks.
    pub fn new_lazy_with_hooks(manager: M, config: PoolConfig, hooks: impl Hooks<M>) -> Self {
        Self::lazy(manager, config, Some(Box::new(hooks)))
    }

    fn lazy(manager: M, config: PoolConfig, hooks: Option<Box<dyn Hooks<M>>>) -> Self {
        let shared = Arc::new(Engine::new(manager, config, hooks));
        shared.ensure_housekeeper();
        Self { shared }
    }

    /// Gets a connection, waiting up to `acquire_timeout`.
    ///
    /// The caller's source location is recorded with the checkout (this is
    /// a `#[track_caller]` function returning the future, for that): see
    /// [`holders`](Self::holders). It costs a pointer store.
    ///
    /// An idle connection is handed out at once (the most recently returned
    /// first). Otherwise the caller queues, first come first served, and is
    /// given whichever comes first: a returned connection or a newly opened
    /// one. A connection that fails validation or a `before_acquire` hook is
    /// closed and another one is tried within the same time limit.
    ///
    /// # Errors
    ///
    /// [`PoolError::Timeout`] after `acquire_timeout`, with the pool's
    /// counts, the sites holding the connections, the oldest connect still
    /// running (where it goes and how long it has run: `1 opening (to
    /// 10.0.0.7:5432, running 5s)`), and the last connect or validation
    /// error; [`PoolError::ConnectFailed`] at once when connecting failed and
    /// no connection is open that could come back (fail fast, see
    /// `PoolConfigBuilder::fail_fast`); [`PoolError::Closed`] once the pool
    /// is closed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future at any await point loses no slot and
    /// no connection. A connection already handed to it goes to the next
    /// waiter or back to the pool; one being validated is closed (it may be
    /// mid-ping) and its slot freed; a connect it asked for carries on and
    /// serves someone else.
    #[track_caller]
    pub fn get(
        &self,
    ) -> impl Future<Output = Result<PooledConnection<M>, PoolError<M::Error>>> + Send + '_ {
        let site = Location::caller();
        self.shared
            .acquire(self.shared.config().acquire_timeout(), site)
    }

    /// [`get`](Self::get) with its own time limit instead of
    /// `acquire_timeout`.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// # Cancel safety
    ///
    /// As [`get`](Self::get).
    #[track_caller]
    pub fn get_timeout(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<PooledConnection<M>, PoolError<M::Error>>> + Send + '_ {
        let site = Location::caller();
        self.shared.acquire(timeout, site)
    }

    /// [`get_timeout`](Self::get_timeout) on behalf of a caller elsewhere:
    /// `site` is what [`holders`](Self::holders) and leak reports show, for
    /// a wrapper whose own callers are the ones to name (a host pool, an
    /// ambient transaction scope: mark their methods `#[track_caller]` and
    /// pass `Location::caller()`).
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    ///
    /// # Cancel safety
    ///
    /// As [`get`](Self::get).
    pub fn get_for(
        &self,
        timeout: Duration,
        site: &'static Location<'static>,
    ) -> impl Future<Output = Result<PooledConnection<M>, PoolError<M::Error>>> + Send + '_ {
        self.shared.acquire(timeout, site)
    }

    /// This pool's identity, the same for every clone of it and different
    /// from every other pool alive at the same time: a key for wrappers that
    /// keep state per pool (an ambient transaction's scope keeps one
    /// transaction per pool).
    pub fn id(&self) -> PoolId {
        PoolId(Arc::as_ptr(&self.shared) as *const () as usize)
    }

    /// An idle connection now, or `None`. Never waits and never connects.
    /// It refuses expired connections like `get()` but, being synchronous,
    /// runs neither `is_valid` nor the `before_acquire` hook, and it never
    /// overtakes queued callers. Like `get()`, it records the caller's
    /// location; while the pool is [suspended](Self::suspend) it returns
    /// `None`.
    #[track_caller]
    pub fn try_get(&self) -> Option<PooledConnection<M>> {
        self.shared.try_acquire(Location::caller())
    }

    /// Every connection held by a caller now: where it was taken (the
    /// caller of [`get`](Self::get), [`get_timeout`](Self::get_timeout) or
    /// [`try_get`](Self::try_get)) and how long it has been held. Cheap
    /// enough for a health endpoint: a scan of the slots, no lock, no
    /// effect on checkouts. Connections being reset, pinged or opened are
    /// not held by anyone and are not listed.
    ///
    /// ```
    /// # use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
    /// # #[derive(Debug)]
    /// # struct Numbers;
    /// # #[async_trait]
    /// # impl ManageConnection for Numbers {
    /// #     type Connection = u32;
    /// #     type Error = std::io::Error;
    /// #     async fn connect(&self) -> Result<u32, std::io::Error> { Ok(0) }
    /// #     async fn is_valid(&self, _: &mut u32) -> Result<(), std::io::Error> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = Pool::new(Numbers, PoolConfig::builder().build()?).await?;
    /// let conn = pool.get().await?; let line = line!();
    /// let holders = pool.holders();
    /// assert_eq!(holders.len(), 1);
    /// assert_eq!((holders[0].location.file(), holders[0].location.line()), (file!(), line));
    /// drop(conn);
    /// assert!(pool.holders().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn holders(&self) -> Vec<Holder> {
        self.shared.holders()
    }

    /// Suspends the pool, as for maintenance or a planned failover: until
    /// [`resume`](Self::resume), `get()` waits (within its time limit, then
    /// fails with [`PoolError::Timeout`]), `try_get()` returns `None`, and
    /// no connection is opened or retired. Connections in use keep working
    /// and come back to the pool as usual, kept idle until the pool
    /// resumes. [`close`](Self::close) still works. Suspending a suspended
    /// pool does nothing.
    pub fn suspend(&self) {
        self.shared.suspend();
    }

    /// Resumes a [suspended](Self::suspend) pool: the waiting callers are
    /// served, the longest waiting first, from the idle connections and
    /// new ones. Resuming a pool that is not suspended does nothing.
    pub fn resume(&self) {
        self.shared.resume();
    }

    /// Whether the pool is [suspended](Self::suspend).
    pub fn is_suspended(&self) -> bool {
        self.shared.is_suspended()
    }

    /// A snapshot of counts and counters; lock-free.
    pub fn metrics(&self) -> PoolMetrics {
        self.shared.metrics()
    }

    /// The pool's counts now (a lighter [`metrics`](Self::metrics)).
    pub fn state(&self) -> PoolState {
        self.shared.state()
    }

    /// Retires every connection: idle ones now, in-use ones when they come
    /// back, ones being opened at their first checkout. Use it after rotating
    /// credentials or a failover; new connections are opened on demand.
    pub fn soft_evict_all(&self) {
        self.shared.soft_evict_all();
    }

    /// Changes `max_size` while the pool runs (deadpool's `resize`).
    /// Shrinking closes idle connections first and retires connections in
    /// use as they come back, never letting the open count pass the new
    /// bound; callers waiting keep their place. Growing lets connectors open
    /// more for the callers waiting, up to `max_size_ceiling`, the slots
    /// allocated when the pool was built. [`state`](Self::state) and
    /// [`metrics`](Self::metrics) report the bound in force;
    /// [`config`](Self::config) keeps the built one.
    ///
    /// # Errors
    ///
    /// A [`pool_api::ConfigError`] for 0, a size above `max_size_ceiling`,
    /// or one below `min_size` or `min_idle`; nothing changes then.
    pub fn resize(&self, max_size: u32) -> Result<(), pool_api::ConfigError> {
        self.shared.resize(max_size)
    }

    /// Closes the idle connections `keep` rejects and returns how many
    /// (deadpool's `retain`). `keep` sees each idle connection with its
    /// age and idle time; connections in use are not visited. The closed
    /// ones count as soft evictions in the metrics; new ones are opened on
    /// demand.
    ///
    /// ```
    /// # use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
    /// # #[derive(Debug)] struct Numbers;
    /// # #[async_trait] impl ManageConnection for Numbers {
    /// #     type Connection = u32; type Error = std::io::Error;
    /// #     async fn connect(&self) -> Result<u32, std::io::Error> { Ok(0) }
    /// #     async fn is_valid(&self, _: &mut u32) -> Result<(), std::io::Error> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let pool = Pool::new(Numbers, PoolConfig::builder().build()?).await?;
    /// let closed = pool.retain(|_conn, info| info.age < Duration::from_secs(3600));
    /// assert_eq!(closed, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn retain(
        &self,
        keep: impl FnMut(&M::Connection, pool_api::ConnectionInfo) -> bool,
    ) -> usize {
        self.shared.retain(keep)
    }

    /// Adds a connection opened elsewhere (bb8's `add`): it takes a free
    /// slot and goes to the longest waiting caller, else idle; it is
    /// validated (when validation is on) at its first checkout.
    ///
    /// # Errors
    ///
    /// The connection is given back when the pool is full (`max_size`
    /// connections open or being opened) or closed.
    pub fn add(&self, conn: M::Connection) -> Result<(), M::Connection> {
        self.shared.add(conn)
    }

    /// Closes the pool: new `get()`s and every waiting one fail with
    /// [`PoolError::Closed`], idle connections are closed now, and this
    /// returns once the connections in use have come back and been closed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the pool is closed as soon as this is first polled;
    /// dropping the future only stops waiting for connections in use.
    pub async fn close(&self) {
        self.shared.close().await;
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// A future that resolves once the pool is closed, by
    /// [`close`](Self::close) or by dropping its last handle (sqlx's
    /// `Pool::close_event`): for a task that should stop with the pool,
    /// `tokio::select!` on it beside the task's work. It does not wait for
    /// connections in use to come back (`close().await` does), and it does
    /// not keep the pool open: it holds no handle (only the pool's memory,
    /// until it is dropped).
    ///
    /// ```
    /// # use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};
    /// # #[derive(Debug)] struct Numbers;
    /// # #[async_trait] impl ManageConnection for Numbers {
    /// #     type Connection = u32; type Error = std::io::Error;
    /// #     async fn connect(&self) -> Result<u32, std::io::Error> { Ok(0) }
    /// #     async fn is_valid(&self, _: &mut u32) -> Result<(), std::io::Error> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = Pool::new(Numbers, PoolConfig::builder().build()?).await?;
    /// let closed = pool.close_event();
    /// let worker = tokio::spawn(async move {
    ///     closed.await; // or in a `tokio::select!` beside the work
    ///     "stopped"
    /// });
    /// pool.close().await;
    /// assert_eq!(worker.await?, "stopped");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping it only stops the wait.
    pub fn close_event(&self) -> impl Future<Output = ()> + Send + 'static {
        let shared = self.shared.clone();
        async move { shared.closed().await }
    }

    /// The pool's settings.
    pub fn config(&self) -> &PoolConfig {
        self.shared.config()
    }

    /// The connection manager.
    pub fn manager(&self) -> &M {
        self.shared.manager()
    }
}

impl<M: ManageConnection> Clone for Pool<M> {
    fn clone(&self) -> Self {
        self.shared.handle_cloned();
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<M: ManageConnection> Drop for Pool<M> {
    /// Dropping the last handle closes the pool, as [`Pool::close`] does
    /// without waiting: idle connections are closed now, the ones still
    /// checked out when they come back. (Connections parked in their slots
    /// hold a count of the pool, so without this they would keep it alive.)
    fn drop(&mut self) {
        if self.shared.handle_dropped() {
            self.shared.shut();
        }
    }
}

impl<M: ManageConnection + std::fmt::Debug> std::fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.fmt(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A manager whose connections add one to the shared count when they
    /// are dropped (closed).
    #[derive(Debug)]
    struct Counted(Arc<AtomicU32>);

    #[derive(Debug)]
    struct Conn(Arc<AtomicU32>);

    impl Drop for Conn {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[async_trait::async_trait]
    impl ManageConnection for Counted {
        type Connection = Conn;
        type Error = std::io::Error;
        async fn connect(&self) -> Result<Conn, std::io::Error> {
            Ok(Conn(self.0.clone()))
        }
        async fn is_valid(&self, _: &mut Conn) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    fn config(max: u32) -> PoolConfig {
        PoolConfig::builder().max_size(max).build().unwrap()
    }

    #[tokio::test]
    async fn dropping_a_clone_keeps_the_pool_open_and_the_last_handle_closes_it() {
        let closed = Arc::new(AtomicU32::new(0));
        let pool = Pool::new(Counted(closed.clone()), config(2)).await.unwrap();
        let clone = pool.clone();
        drop(clone);
        assert!(!pool.is_closed(), "one handle is left");
        drop(pool.get().await.unwrap());
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        let held = pool.get().await.unwrap();
        let observer = pool.shared.clone();
        drop(pool);
        assert!(observer.is_closed(), "the last handle closes the pool");
        assert_eq!(
            closed.load(Ordering::SeqCst),
            0,
            "the connection in use is not closed under its holder"
        );
        drop(held);
        assert_eq!(
            closed.load(Ordering::SeqCst),
            1,
            "closed when it comes back to the closed pool"
        );
    }

    #[tokio::test]
    async fn close_event_resolves_once_closed_and_add_gives_back_what_does_not_fit() {
        let closed = Arc::new(AtomicU32::new(0));
        let pool = Pool::new(Counted(closed.clone()), config(1)).await.unwrap();
        let extra = Conn(closed.clone());
        let refused = pool.add(extra).expect_err("the pool is full");
        drop(refused);
        assert_eq!(closed.load(Ordering::SeqCst), 1, "given back, not kept");
        let event = pool.close_event();
        pool.close().await;
        tokio::time::timeout(std::time::Duration::from_secs(5), event)
            .await
            .expect("close_event resolves after close");
        assert!(
            pool.try_get().is_none(),
            "nothing is handed out once closed"
        );
        assert_eq!(closed.load(Ordering::SeqCst), 2, "the idle one was closed");
    }
}
