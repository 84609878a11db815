//! A failed connect's `sqlx::Error`, naming where the connect went: the
//! same variant with the same parts (a `Database` error keeps its
//! SQLSTATE, its kind and its driver type for a downcast; an `Io` error
//! keeps its kind), whose text gains `connect to 127.0.0.1:5433 failed: `
//! in front of the driver's own message.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::io;

use super::driver::Error;
use super::driver_core::error::{DatabaseError, ErrorKind};

/// `error`, from a connect to `target`, with `target` in its text where
/// the variant has a text of the driver's (`Database`, `Io`, `Tls`,
/// `Protocol`); other variants (the manager's own `Configuration` errors
/// among them) and a connect without a target stay as they are.
pub(crate) fn at_target(error: Error, target: Option<String>) -> Error {
    let Some(target) = target else {
        return error;
    };
    match error {
        Error::Database(error) => Error::Database(Box::new(DatabaseAt { target, error })),
        Error::Io(error) => Error::Io(io::Error::new(
            error.kind(),
            CauseAt {
                target,
                error: Box::new(error),
            },
        )),
        Error::Tls(error) => Error::Tls(Box::new(CauseAt { target, error })),
        Error::Protocol(text) => Error::Protocol(format!("connect to {target} failed: {text}")),
        other => other,
    }
}

/// The driver's error of a failed connect (I/O, TLS), shown after where
/// the connect went; `source()` is the driver's error.
#[derive(Debug)]
struct CauseAt {
    target: String,
    error: Box<dyn StdError + Send + Sync + 'static>,
}

impl fmt::Display for CauseAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connect to {} failed: {}", self.target, self.error)
    }
}

impl StdError for CauseAt {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.error)
    }
}

/// The server's error of a failed connect (a refused login, a database
/// that does not exist), shown after where the connect went. Everything
/// else is the server's error's own: `message()`, `code()`, `kind()`,
/// `constraint()`, `table()`, and `as_error()` / `into_error()`, so a
/// downcast to the driver's type (`PgDatabaseError`, `MySqlDatabaseError`)
/// finds it.
struct DatabaseAt {
    target: String,
    error: Box<dyn DatabaseError>,
}

impl fmt::Debug for DatabaseAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseAt")
            .field("target", &self.target)
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for DatabaseAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connect to {} failed: {}", self.target, self.error)
    }
}

impl StdError for DatabaseAt {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.error.as_error())
    }
}

impl DatabaseError for DatabaseAt {
    fn message(&self) -> &str {
        self.error.message()
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        self.error.code()
    }

    // The driver's own error, not this one, so that sqlx's downcasts
    // (`try_downcast_ref::<PgDatabaseError>()` and the like) find it.
    fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self.error.as_error()
    }

    fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
        self.error.as_error_mut()
    }

    fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
        self.error.into_error()
    }

    fn is_transient_in_connect_phase(&self) -> bool {
        self.error.is_transient_in_connect_phase()
    }

    fn constraint(&self) -> Option<&str> {
        self.error.constraint()
    }

    fn table(&self) -> Option<&str> {
        self.error.table()
    }

    fn kind(&self) -> ErrorKind {
        self.error.kind()
    }
}
