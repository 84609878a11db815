//! What `get()` and the pool's constructors can fail with.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Which part of an acquisition ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Waiting for a connection to come back or to be opened.
    Wait,
    /// Opening a connection (`connect` plus the `after_connect` hook).
    Connect,
    /// Checking a connection at checkout (`is_valid` or the `before_acquire`
    /// hook).
    Validation,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Wait => "waiting for a connection",
            TimeoutPhase::Connect => "opening a connection",
            TimeoutPhase::Validation => "validating a connection",
        })
    }
}

/// The pool's counts at one moment, carried by [`PoolError::Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct PoolState {
    /// Open connections: idle, in use and being opened.
    pub total: u32,
    /// Connections ready in the pool.
    pub idle: u32,
    /// Connections held by callers.
    pub in_use: u32,
    /// Connections being opened.
    pub opening: u32,
    /// Callers waiting for a connection.
    pub waiting: u32,
    /// The pool's bound.
    pub max_size: u32,
}

impl PoolState {
    /// Makes a state from its counts (`total` is their sum).
    pub fn new(idle: u32, in_use: u32, opening: u32, waiting: u32, max_size: u32) -> Self {
        Self {
            total: idle + in_use + opening,
            idle,
            in_use,
            opening,
            waiting,
            max_size,
        }
    }
}

impl fmt::Display for PoolState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} open: {} idle, {} in use, {} opening; {} waiting",
            self.total, self.max_size, self.idle, self.in_use, self.opening, self.waiting
        )
    }
}

/// A `connect()` that did not finish within `connect_timeout`; seen as the
/// last error inside a [`PoolError::Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectTimedOut(pub Duration);

impl fmt::Display for ConnectTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connect did not finish within {:?}", self.0)
    }
}

impl Error for ConnectTimedOut {}

/// What acquiring a connection can fail with.
#[non_exhaustive]
pub enum PoolError<E> {
    /// No connection could be had in time.
    ///
    /// Display says how long it waited, what ran out of time, the pool's
    /// counts at that moment and, as context, the last connect or validation
    /// error; `source()` returns that error too.
    Timeout {
        /// How long the call waited in all.
        waited: Duration,
        /// What ran out of time.
        phase: TimeoutPhase,
        /// The pool's counts when it gave up.
        state: PoolState,
        /// The last error the pool saw opening or validating a connection,
        /// if any: a backend error (`E`, to downcast) or a
        /// [`ConnectTimedOut`].
        last_error: Option<Arc<dyn Error + Send + Sync>>,
    },
    /// The pool was closed.
    Closed,
    /// The backend failed (the first connect of `Pool::new`).
    Backend(E),
}

impl<E> PoolError<E> {
    /// Whether this is a [`PoolError::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, PoolError::Timeout { .. })
    }
}

impl<E: fmt::Debug> fmt::Debug for PoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Timeout {
                waited,
                phase,
                state,
                last_error,
            } => f
                .debug_struct("Timeout")
                .field("waited", waited)
                .field("phase", phase)
                .field("state", state)
                .field("last_error", &last_error.as_ref().map(|e| e.to_string()))
                .finish(),
            PoolError::Closed => f.write_str("Closed"),
            PoolError::Backend(e) => f.debug_tuple("Backend").field(e).finish(),
        }
    }
}

impl<E> fmt::Display for PoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Timeout {
                waited,
                phase,
                state,
                last_error,
            } => {
                write!(f, "timed out after {waited:?} {phase} ({state})")?;
                if let Some(e) = last_error {
                    write!(f, "; last error: {e}")?;
                }
                Ok(())
            }
            PoolError::Closed => f.write_str("pool is closed"),
            PoolError::Backend(_) => f.write_str("backend error"),
        }
    }
}

impl<E: Error + 'static> Error for PoolError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            PoolError::Timeout { last_error, .. } => {
                last_error.as_deref().map(|e| e as &(dyn Error + 'static))
            }
            PoolError::Closed => None,
            PoolError::Backend(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn timeout_display_has_wait_counts_and_last_error() {
        let err: PoolError<io::Error> = PoolError::Timeout {
            waited: Duration::from_millis(250),
            phase: TimeoutPhase::Wait,
            state: PoolState::new(0, 4, 0, 3, 4),
            last_error: Some(Arc::new(io::Error::other("connection refused"))),
        };
        assert_eq!(
            err.to_string(),
            "timed out after 250ms waiting for a connection \
             (4 of 4 open: 0 idle, 4 in use, 0 opening; 3 waiting); last error: connection refused"
        );
        assert_eq!(err.source().unwrap().to_string(), "connection refused");
        assert!(err.is_timeout());
    }

    #[test]
    fn backend_hands_cause_to_source_without_repeating_it() {
        let err: PoolError<io::Error> = PoolError::Backend(io::Error::other("boom"));
        assert_eq!(err.to_string(), "backend error");
        assert_eq!(err.source().unwrap().to_string(), "boom");
        let closed: PoolError<io::Error> = PoolError::Closed;
        assert_eq!(closed.to_string(), "pool is closed");
        assert!(closed.source().is_none());
    }
}
