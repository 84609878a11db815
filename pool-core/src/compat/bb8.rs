//! [`Bb8Manager`]: runs any `bb8::ManageConnection` in this pool (feature
//! `bb8`).
//!
//! bb8's manager trait is a subset of ours, so the mapping is one to one:
//!
//! | bb8 | this pool | when |
//! |---|---|---|
//! | `connect` | `connect` | opening a connection |
//! | `is_valid` | `is_valid` | at checkout, when `validation_mode` is `IsValid` and the connection was idle longer than `validation_bypass` (bb8: when `test_on_check_out` is set, on every checkout) |
//! | `has_broken` | `has_broken` | when a connection comes back |
//! | — | `needs_reset` / `reset` | never: bb8 managers have no reset step |
//!
//! For bb8's `test_on_check_out(true)` behaviour, build the pool with
//! `validation_bypass(Duration::ZERO)`; for `test_on_check_out(false)`, use
//! `ValidationMode::None`.
//!
//! bb8's `CustomizeConnection::on_acquire` corresponds to this pool's
//! `Hooks::after_connect`; its `ErrorSink` has no counterpart: errors go to
//! `tracing`, and a connect error reaches the caller of `get()` at once as
//! `PoolError::ConnectFailed` when no connection is open (fail fast), else
//! inside `PoolError::Timeout`.
//!
//! The bb8 manager's `Error` must be a `std::error::Error`, so that
//! [`Bb8Error`] can print its message and return it from `source()` (bb8
//! asks only for `Debug`, but its own `RunError` is an error only then, and
//! the managers in use, bb8-postgres and bb8-redis among them, have one).
//! For a manager whose error is only `Debug`, wrap it in a manager of yours
//! that maps the error, e.g. to `std::io::Error::other(format!("{e:?}"))`.
//!
//! A bb8 manager does not say where it connects; tell the adapter with
//! [`with_target`](Bb8Manager::with_target) and a failed connect names it:
//! `connect to 127.0.0.1:5433 failed: password authentication failed for
//! user "app"` instead of `bb8 manager failed: db error: FATAL: password
//! authentication failed for user "app"`.
//!
//! ```no_run
//! use bb8_postgres::PostgresConnectionManager;
//! use pool_core::compat::bb8::Bb8Manager;
//! use pool_core::{Pool, PoolConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pg = PostgresConnectionManager::new_from_stringlike(
//!     "postgres://postgres@127.0.0.1:5432/test",
//!     tokio_postgres::NoTls,
//! )?;
//! let manager = Bb8Manager::new(pg).with_target("127.0.0.1:5432");
//! let pool = Pool::new(manager, PoolConfig::default()).await?;
//! let conn = pool.get().await?;
//! conn.simple_query("SELECT 1").await?;
//! # Ok(())
//! # }
//! ```

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use pool_api::{async_trait, ManageConnection};

use pool_api::error_chain::{ConnectCause, ErrorChain};

/// Runs the bb8 manager `M` in this pool; its connections are handed out
/// unchanged.
pub struct Bb8Manager<M> {
    inner: M,
    target: Option<Arc<str>>,
}

impl<M: bb8::ManageConnection> Bb8Manager<M> {
    /// Wraps a bb8 manager.
    pub fn new(manager: M) -> Self {
        Self {
            inner: manager,
            target: None,
        }
    }

    /// Where the bb8 manager connects (`127.0.0.1:5432`, a socket path, a
    /// host name), as a failed connect's error names it: `connect to
    /// 127.0.0.1:5432 failed: <cause>`. Without it the error says `bb8
    /// manager failed: <cause>`, since a bb8 manager does not say where it
    /// connects. Only the text changes; the cause is the same.
    #[must_use]
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(Arc::from(target.into()));
        self
    }

    /// The wrapped manager.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// Unwraps the bb8 manager.
    pub fn into_inner(self) -> M {
        self.inner
    }
}

impl<M: fmt::Debug> fmt::Debug for Bb8Manager<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bb8Manager")
            .field("inner", &self.inner)
            .field("target", &self.target)
            .finish()
    }
}

#[async_trait]
impl<M> ManageConnection for Bb8Manager<M>
where
    M: bb8::ManageConnection,
    M::Error: Error + Sync,
{
    type Connection = M::Connection;
    type Error = Bb8Error<M::Error>;

    async fn connect(&self) -> Result<M::Connection, Self::Error> {
        self.inner.connect().await.map_err(|error| Bb8Error {
            error,
            target: self.target.clone(),
        })
    }

    async fn is_valid(&self, conn: &mut M::Connection) -> Result<(), Self::Error> {
        self.inner.is_valid(conn).await.map_err(Bb8Error::new)
    }

    fn has_broken(&self, conn: &mut M::Connection) -> bool {
        self.inner.has_broken(conn)
    }
}

/// An error from a bb8 manager.
///
/// `Display`, for a failed connect of a manager told where it connects
/// ([`Bb8Manager::with_target`]): `connect to <target> failed: <cause>`,
/// the cause being the server's own message for a tokio-postgres error the
/// server sent (`connect to 127.0.0.1:5433 failed: password authentication
/// failed for user "app"`), else the cause's message and those of its
/// `source()` chain (`connect to 127.0.0.1:5433 failed: Connection refused
/// (os error 111)`). Otherwise `bb8 manager failed: <the cause's own
/// message>`, followed by the messages of its `source()` chain that its
/// message leaves out (`bb8 manager failed: db error: FATAL: ...`, where a
/// driver prints only `db error`); inside a [`PoolError`](crate::PoolError)
/// the pool adds what it was doing (`connect failed: bb8 manager failed:
/// connection refused`). [`source`](Error::source) returns the cause. Take
/// the original back with [`into_inner`](Self::into_inner) or
/// [`get_ref`](Self::get_ref).
pub struct Bb8Error<E> {
    error: E,
    target: Option<Arc<str>>,
}

impl<E> Bb8Error<E> {
    /// The bb8 manager's `error`, from no connect of a known target.
    pub fn new(error: E) -> Self {
        Self {
            error,
            target: None,
        }
    }

    /// The bb8 manager's error.
    pub fn get_ref(&self) -> &E {
        &self.error
    }

    /// Unwraps the bb8 manager's error.
    pub fn into_inner(self) -> E {
        self.error
    }

    /// Where the failed connect went, when the manager was told
    /// ([`Bb8Manager::with_target`]); `None` for other errors.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }
}

impl<E: fmt::Debug> fmt::Debug for Bb8Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_tuple("Bb8Error");
        out.field(&self.error);
        if let Some(target) = &self.target {
            out.field(target);
        }
        out.finish()
    }
}

impl<E: Error + 'static> fmt::Display for Bb8Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Some(target) => write!(
                f,
                "connect to {target} failed: {}",
                ConnectCause(&self.error)
            ),
            None => write!(f, "bb8 manager failed: {}", ErrorChain(&self.error)),
        }
    }
}

impl<E: Error + 'static> Error for Bb8Error<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.error)
    }
}
