//! Passwords fetched per connect: [`SqlxManager::with_password_provider`]
//! and the error it fails with.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

pub use super::backend::BoxError;
use super::backend::SqlxPasswordConnection;
use super::SqlxManager;

/// A password provider failed, so a connect did not start.
///
/// The manager's connect returns it as `sqlx::Error::Configuration`, whose
/// source is this error; [`source`](StdError::source) then gives the
/// provider's own error. Find it with `downcast_ref` on the configuration
/// error's box.
#[derive(Debug)]
pub struct PasswordProviderError(pub BoxError);

impl fmt::Display for PasswordProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "password provider failed: {}", self.0)
    }
}

impl StdError for PasswordProviderError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

impl<C: SqlxPasswordConnection> SqlxManager<C> {
    /// Fetches the password anew for every new connection (rotated
    /// secrets, cloud IAM tokens): `provider` is called once per connect,
    /// and the password it returns replaces the one in the options for that
    /// connect only. Connections already open keep working; to move them all
    /// to new credentials, call `Pool::soft_evict_all` after the rotation.
    ///
    /// `provider` returns a future of `Result<String, BoxError>`; it runs
    /// inside the pool's `connect_timeout`.
    ///
    /// # Errors
    ///
    /// When the provider fails, the connect fails with
    /// `sqlx::Error::Configuration` holding a [`PasswordProviderError`] that
    /// holds the provider's error; the pool counts it as any failed connect
    /// (retried with back-off, kept as the last error of a timeout).
    ///
    /// # Example
    ///
    /// ```
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # fn demo() -> Result<(), sqlx::Error> {
    /// use pool_sqlx::{BoxError, SqlxManager};
    ///
    /// async fn fetch_token() -> Result<String, BoxError> {
    ///     Ok(std::env::var("DB_TOKEN")?)
    /// }
    ///
    /// let manager = SqlxManager::<sqlx::PgConnection>::from_url("postgres://app@db.internal/app")?
    ///     .with_password_provider(fetch_token);
    /// # Ok(())
    /// # }
    /// # #[cfg(feature = "sqlx-postgres")]
    /// # demo().unwrap();
    /// ```
    #[must_use]
    pub fn with_password_provider<F, Fut>(mut self, provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, BoxError>> + Send + 'static,
    {
        self.password_provider = Some(Arc::new(move || Box::pin(provider())));
        self
    }
}
