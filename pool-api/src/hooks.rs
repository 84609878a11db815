//! Application code the pool runs around connections.

use std::time::Duration;

use crate::ManageConnection;

/// What the pool knows about a connection, passed to the checkout and return
/// hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// Time since the connection was opened.
    pub age: Duration,
    /// At checkout: how long it sat idle. At return: how long it was held.
    pub since_last_use: Duration,
}

impl ConnectionInfo {
    /// Makes the info from its parts.
    pub fn new(age: Duration, since_last_use: Duration) -> Self {
        Self {
            age,
            since_last_use,
        }
    }
}

/// Application code run on every new connection, at checkout and at return.
///
/// Every method has a do-nothing default; implement the ones you need and
/// pass the hooks when building the pool. The checkout and return hooks are
/// bounded by `validation_timeout`, `after_connect` by `connect_timeout`.
///
/// # What each phase costs
///
/// A pool built without hooks pays nothing for them, and each hook costs
/// only in its own phase, once the pool knows which ones you use:
///
/// * `after_connect` runs inside each connect: checkouts and returns do not
///   see it.
/// * `before_acquire` is async, so while it is in use every checkout takes
///   the async path (a boxed future per checkout) instead of the
///   synchronous pop-and-go.
/// * `after_release` is async, so while it is in use every return goes
///   through a spawned task instead of being delivered inline.
///
/// Rust cannot tell whether a default method was overridden, so the pool
/// asks: [`uses_before_acquire`](Self::uses_before_acquire) and
/// [`uses_after_release`](Self::uses_after_release) say `true` unless you
/// say otherwise. Hooks that only set up new connections should return
/// `false` from both, as below; a hook the pool was told is unused is never
/// called.
///
/// ```
/// use pool_api::{async_trait, ConnectionInfo, Hooks, ManageConnection};
/// # #[derive(Debug)] struct Mgr;
/// # #[async_trait] impl ManageConnection for Mgr {
/// #     type Connection = Vec<String>; type Error = std::io::Error;
/// #     async fn connect(&self) -> Result<Vec<String>, std::io::Error> { Ok(vec![]) }
/// #     async fn is_valid(&self, _: &mut Vec<String>) -> Result<(), std::io::Error> { Ok(()) }
/// # }
///
/// #[derive(Debug)]
/// struct SearchPath;
///
/// #[async_trait]
/// impl Hooks<Mgr> for SearchPath {
///     async fn after_connect(&self, conn: &mut Vec<String>) -> Result<(), std::io::Error> {
///         conn.push("SET search_path = app".into());
///         Ok(())
///     }
///
///     // Only `after_connect`: checkouts and returns stay on the fast path.
///     fn uses_before_acquire(&self) -> bool {
///         false
///     }
///
///     fn uses_after_release(&self) -> bool {
///         false
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Hooks<M: ManageConnection>: Send + Sync + 'static {
    /// Runs once on every new connection before anyone gets it (`SET
    /// search_path`, session settings). An error counts as a failed connect.
    async fn after_connect(&self, _conn: &mut M::Connection) -> Result<(), M::Error> {
        Ok(())
    }

    /// Runs at checkout on connections that were idle in the pool, before
    /// validation (deadpool's `pre_recycle`, sqlx's `before_acquire`); not
    /// on a connection opened moments ago (within a second) and never
    /// checked out. `Ok(false)` or an error closes the
    /// connection and the caller is given another one. While the
    /// replacements keep being turned down too, the pool opens them with the
    /// connect back-off (5 ms, doubling, at most 1 s) rather than as fast as
    /// the server answers; one accepted connection resets it.
    async fn before_acquire(
        &self,
        _conn: &mut M::Connection,
        _info: ConnectionInfo,
    ) -> Result<bool, M::Error> {
        Ok(true)
    }

    /// Runs when a connection comes back, after any reset. `Ok(false)` or an
    /// error closes it instead of keeping it.
    async fn after_release(
        &self,
        _conn: &mut M::Connection,
        _info: ConnectionInfo,
    ) -> Result<bool, M::Error> {
        Ok(true)
    }

    /// Whether [`before_acquire`](Self::before_acquire) does anything. The
    /// pool asks once, when it is built; `false` keeps every checkout on
    /// the synchronous fast path and the hook is never called. Defaults to
    /// `true` (the pool cannot see whether you implemented the hook).
    fn uses_before_acquire(&self) -> bool {
        true
    }

    /// Whether [`after_release`](Self::after_release) does anything. The
    /// pool asks once, when it is built; `false` delivers clean returns
    /// inline (no task) and the hook is never called. Defaults to `true`.
    fn uses_after_release(&self) -> bool {
        true
    }
}

/// Hooks that do nothing, in any phase: a pool given `NoHooks` behaves and
/// costs exactly as one built without hooks (`Pool::new`). Useful where a
/// type needs some `Hooks`, say a generic wrapper's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl<M: ManageConnection> Hooks<M> for NoHooks {
    fn uses_before_acquire(&self) -> bool {
        false
    }

    fn uses_after_release(&self) -> bool {
        false
    }
}
