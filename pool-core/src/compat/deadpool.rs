//! [`DeadpoolManager`]: runs any `deadpool::managed::Manager` in this pool
//! (feature `deadpool`).
//!
//! The pool hands out a [`DeadpoolObject`], which dereferences to the
//! manager's `Type` (for deadpool-postgres, its `ClientWrapper`, so
//! `prepare_cached` and the rest keep working).
//!
//! # How deadpool's calls map
//!
//! | deadpool | this pool |
//! |---|---|
//! | `create` | `connect` |
//! | `recycle` at checkout (deadpool's timing) | `is_valid`, with [`RecycleAt::Checkout`] (the default) |
//! | `recycle` at return | `needs_reset` (always `true`) and `reset`, with [`RecycleAt::Return`] |
//! | `detach` | called when the object is dropped: closed by the pool, or taken out with the pool's `detach` and then dropped |
//! | `Metrics` passed to `recycle` | kept per object by the adapter: `created` at `create`, `recycled` and `recycle_count` after each successful recycle |
//!
//! Where the semantics differ:
//!
//! - deadpool recycles on *every* checkout; this pool validates only when
//!   `validation_mode` is `IsValid` and the connection sat idle longer than
//!   `validation_bypass` (500 ms by default). For deadpool's behaviour set
//!   `validation_bypass(Duration::ZERO)`; with `ValidationMode::None`,
//!   [`RecycleAt::Checkout`] never recycles.
//! - With [`RecycleAt::Return`], recycling happens eagerly when a connection
//!   comes back (a reset in this pool's terms), so state is cleaned before
//!   the connection idles; this costs a background task per return.
//! - A `RecycleError` closes the connection in both modes, as in deadpool.
//! - deadpool's `Metrics::recycled` records the last successful recycle,
//!   which is not the last return; use the pool's `ConnectionInfo` in hooks
//!   for idle time.
//! - deadpool 0.13's three hooks, `post_create`, `pre_recycle` and
//!   `post_recycle` (there is no `pre_create`), map to
//!   `Hooks::after_connect`, `before_acquire` and `after_release`, written
//!   against this pool's trait.
//!
//! ```no_run
//! use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod};
//! use pool_core::compat::deadpool::DeadpoolManager;
//! use pool_core::{Pool, PoolConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pg: tokio_postgres::Config = "postgres://postgres@127.0.0.1:5432/test".parse()?;
//! let config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
//! let manager = Manager::from_config(pg, tokio_postgres::NoTls, config);
//! let pool = Pool::new(DeadpoolManager::new(manager), PoolConfig::default()).await?;
//! let conn = pool.get().await?;
//! conn.simple_query("SELECT 1").await?;
//! # Ok(())
//! # }
//! ```

use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Instant;

use deadpool::managed::{Manager, Metrics, RecycleError};
use pool_api::{async_trait, ManageConnection};

use pool_api::error_chain::{ConnectCause, ErrorChain};

/// When the adapter calls the deadpool manager's `recycle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum RecycleAt {
    /// At checkout, as this pool's `is_valid` (deadpool's own timing).
    #[default]
    Checkout,
    /// When the connection comes back, as this pool's `reset`.
    Return,
}

/// Runs the deadpool manager `M` in this pool.
pub struct DeadpoolManager<M> {
    inner: Arc<M>,
    recycle_at: RecycleAt,
    target: Option<String>,
}

impl<M: Manager> DeadpoolManager<M> {
    /// Wraps a deadpool manager; it recycles at checkout.
    pub fn new(manager: M) -> Self {
        Self {
            inner: Arc::new(manager),
            recycle_at: RecycleAt::default(),
            target: None,
        }
    }

    /// Where the deadpool manager connects (`127.0.0.1:5432`, a socket
    /// path, a host name): a failed `create` is then
    /// [`DeadpoolError::Connect`], which names it (`connect to
    /// 127.0.0.1:5432 failed: <cause>`), instead of
    /// [`DeadpoolError::Backend`], since a deadpool manager does not say
    /// where it connects.
    #[must_use]
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// When `recycle` runs. Defaults to [`RecycleAt::Checkout`].
    #[must_use]
    pub fn recycle_at(mut self, at: RecycleAt) -> Self {
        self.recycle_at = at;
        self
    }

    /// The wrapped manager.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    async fn recycle(&self, obj: &mut DeadpoolObject<M>) -> Result<(), DeadpoolError<M::Error>> {
        self.inner
            .recycle(&mut obj.value, &obj.metrics)
            .await
            .map_err(DeadpoolError::from_recycle)?;
        obj.metrics.recycle_count += 1;
        obj.metrics.recycled = Some(Instant::now());
        Ok(())
    }
}

impl<M: fmt::Debug> fmt::Debug for DeadpoolManager<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadpoolManager")
            .field("inner", &self.inner)
            .field("recycle_at", &self.recycle_at)
            .field("target", &self.target)
            .finish()
    }
}

#[async_trait]
impl<M> ManageConnection for DeadpoolManager<M>
where
    M: Manager + 'static,
    M::Type: 'static,
    M::Error: Error + Sync + 'static,
{
    type Connection = DeadpoolObject<M>;
    type Error = DeadpoolError<M::Error>;

    async fn connect(&self) -> Result<DeadpoolObject<M>, Self::Error> {
        let value = self
            .inner
            .create()
            .await
            .map_err(|error| match &self.target {
                Some(target) => DeadpoolError::Connect {
                    target: target.clone(),
                    error,
                },
                None => DeadpoolError::Backend(error),
            })?;
        Ok(DeadpoolObject {
            value,
            metrics: Metrics::default(),
            manager: Arc::clone(&self.inner),
        })
    }

    async fn is_valid(&self, conn: &mut DeadpoolObject<M>) -> Result<(), Self::Error> {
        match self.recycle_at {
            RecycleAt::Checkout => self.recycle(conn).await,
            RecycleAt::Return => Ok(()),
        }
    }

    fn needs_reset(&self, _conn: &mut DeadpoolObject<M>) -> bool {
        self.recycle_at == RecycleAt::Return
    }

    async fn reset(&self, conn: &mut DeadpoolObject<M>) -> Result<(), Self::Error> {
        match self.recycle_at {
            RecycleAt::Return => self.recycle(conn).await,
            RecycleAt::Checkout => Ok(()),
        }
    }
}

/// A deadpool manager's object, held by this pool.
///
/// Dereferences to the manager's `Type`. Keeps deadpool's per-object
/// [`Metrics`] for `recycle`, and calls the manager's `detach` when
/// dropped, so a manager that tracks its objects (deadpool-postgres's
/// statement caches) forgets this one.
///
/// [`DeadpoolObject::metrics`] is an associated function, as deadpool's
/// own `Object::metrics` is, so that it never hides a method of the
/// object.
pub struct DeadpoolObject<M: Manager> {
    value: M::Type,
    metrics: Metrics,
    manager: Arc<M>,
}

impl<M: Manager> DeadpoolObject<M> {
    /// deadpool's metrics for this object.
    pub fn metrics(this: &Self) -> &Metrics {
        &this.metrics
    }
}

impl<M: Manager> Deref for DeadpoolObject<M> {
    type Target = M::Type;

    fn deref(&self) -> &M::Type {
        &self.value
    }
}

impl<M: Manager> DerefMut for DeadpoolObject<M> {
    fn deref_mut(&mut self) -> &mut M::Type {
        &mut self.value
    }
}

impl<M: Manager> Drop for DeadpoolObject<M> {
    fn drop(&mut self) {
        self.manager.detach(&mut self.value);
    }
}

impl<M: Manager> fmt::Debug for DeadpoolObject<M>
where
    M::Type: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadpoolObject")
            .field("value", &self.value)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

/// An error from a deadpool manager.
#[derive(Debug)]
#[non_exhaustive]
pub enum DeadpoolError<E> {
    /// The backend failed (`create`, or `RecycleError::Backend`); the cause
    /// is the source.
    Backend(E),
    /// `create` failed, on a manager told where it connects
    /// ([`DeadpoolManager::with_target`]); the cause is the source.
    Connect {
        /// Where the connect went.
        target: String,
        /// The deadpool manager's error.
        error: E,
    },
    /// `recycle` refused the object with a message
    /// (`RecycleError::Message`).
    Recycle(Cow<'static, str>),
}

impl<E> DeadpoolError<E> {
    fn from_recycle(e: RecycleError<E>) -> Self {
        match e {
            RecycleError::Backend(e) => DeadpoolError::Backend(e),
            RecycleError::Message(msg) => DeadpoolError::Recycle(msg),
        }
    }
}

/// For [`Connect`](DeadpoolError::Connect): `connect to <target> failed:
/// <cause>`, the cause being the server's own message for a tokio-postgres
/// error the server sent (`connect to 127.0.0.1:5433 failed: password
/// authentication failed for user "app"`), else the cause's message and
/// those of its `source()` chain. Otherwise
/// `deadpool manager failed: <the cause's own message>` (followed by the
/// messages of the cause's own `source()` chain that its message leaves
/// out, as a driver that prints only `db error` does), or `deadpool
/// manager refused to recycle: <message>`; inside a
/// [`PoolError`](crate::PoolError) the pool adds what it was doing
/// (`connect failed: deadpool manager failed: connection refused`).
impl<E: Error + 'static> fmt::Display for DeadpoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadpoolError::Backend(e) => write!(f, "deadpool manager failed: {}", ErrorChain(e)),
            DeadpoolError::Connect { target, error } => {
                write!(f, "connect to {target} failed: {}", ConnectCause(error))
            }
            DeadpoolError::Recycle(msg) => write!(f, "deadpool manager refused to recycle: {msg}"),
        }
    }
}

impl<E: Error + 'static> Error for DeadpoolError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DeadpoolError::Backend(e) | DeadpoolError::Connect { error: e, .. } => Some(e),
            DeadpoolError::Recycle(_) => None,
        }
    }
}
