//! [`KvError`]: everything the store can fail with.

use std::error::Error;
use std::fmt;

use pool_core::PoolError;

/// What a [`KvStore`](super::KvStore) operation can fail with.
///
/// Display describes this layer only; the underlying error (sqlx's, the
/// pool's, serde_json's) is in [`source()`](Error::source). No variant
/// carries a connection URL, so no password can leak through an error.
#[derive(Debug)]
#[non_exhaustive]
pub enum KvError {
    /// The URL's scheme names no supported backend (`sqlite:`,
    /// `postgres://`, `mysql://`).
    UnsupportedUrl {
        /// The scheme found, or `None` when the URL has none.
        scheme: Option<String>,
    },
    /// The driver refused the URL (bad syntax, unknown parameter).
    InvalidUrl(sqlx::Error),
    /// The table name is not a plain SQL identifier.
    InvalidTable {
        /// Why it was refused.
        reason: &'static str,
    },
    /// The key cannot be stored the same way on every backend.
    InvalidKey {
        /// Why it was refused.
        reason: &'static str,
    },
    /// No connection could be had (unreachable server, timeout, closed pool).
    Pool(PoolError<sqlx::Error>),
    /// A statement failed on the server or on the wire.
    Query(sqlx::Error),
    /// The value could not be serialized to JSON.
    Encode {
        /// The key being written.
        key: String,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// The stored JSON does not deserialize into the requested type.
    Decode {
        /// The key being read.
        key: String,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// A copy read back from the target something other than what it wrote;
    /// the target's transaction was rolled back.
    CopyMismatch {
        /// The first key that differed, or `None` when the counts differed.
        key: Option<String>,
        /// What differed.
        detail: String,
    },
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedUrl { scheme: Some(s) } => write!(
                f,
                "unsupported url scheme `{s}` (expected sqlite:, postgres:// or mysql://)"
            ),
            Self::UnsupportedUrl { scheme: None } => {
                f.write_str("url has no scheme (expected sqlite:, postgres:// or mysql://)")
            }
            Self::InvalidUrl(_) => f.write_str("invalid database url"),
            Self::InvalidTable { reason } => write!(f, "invalid table name: {reason}"),
            Self::InvalidKey { reason } => write!(f, "invalid key: {reason}"),
            Self::Pool(_) => f.write_str("could not get a database connection"),
            Self::Query(_) => f.write_str("database statement failed"),
            Self::Encode { key, .. } => write!(f, "could not serialize the value for key {key:?}"),
            Self::Decode { key, .. } => {
                write!(f, "could not deserialize the value stored at key {key:?}")
            }
            Self::CopyMismatch {
                key: Some(key),
                detail,
            } => {
                write!(f, "copy verification failed at key {key:?}: {detail}")
            }
            Self::CopyMismatch { key: None, detail } => {
                write!(f, "copy verification failed: {detail}")
            }
        }
    }
}

impl Error for KvError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::InvalidUrl(e) | Self::Query(e) => Some(e),
            Self::Pool(e) => Some(e),
            Self::Encode { source, .. } | Self::Decode { source, .. } => Some(source),
            Self::UnsupportedUrl { .. }
            | Self::InvalidTable { .. }
            | Self::InvalidKey { .. }
            | Self::CopyMismatch { .. } => None,
        }
    }
}

impl From<sqlx::Error> for KvError {
    fn from(e: sqlx::Error) -> Self {
        Self::Query(e)
    }
}

impl From<PoolError<sqlx::Error>> for KvError {
    fn from(e: PoolError<sqlx::Error>) -> Self {
        Self::Pool(e)
    }
}
