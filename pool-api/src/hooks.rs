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
/// pass the hooks when building the pool. A pool built without hooks pays
/// nothing for them. The checkout and return hooks are bounded by
/// `validation_timeout`, `after_connect` by `connect_timeout`.
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
/// }
/// ```
#[async_trait::async_trait]
pub trait Hooks<M: ManageConnection>: Send + Sync + 'static {
    /// Runs once on every new connection before anyone gets it (`SET
    /// search_path`, session settings). An error counts as a failed connect.
    async fn after_connect(&self, _conn: &mut M::Connection) -> Result<(), M::Error> {
        Ok(())
    }

    /// Runs at checkout, after validation. `Ok(false)` or an error closes the
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
}

/// Hooks that do nothing; what `Pool::new` uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl<M: ManageConnection> Hooks<M> for NoHooks {}
