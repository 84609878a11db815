//! What the pooled client's query methods take: the [`PgStatement`] trait
//! (query text or a prepared statement), and the refusal of text that sets
//! session state behind a transaction-mode pooler. Apart from `query.rs` so
//! that the client, its queries and its transactions all read it one way.

use tokio_postgres::{Statement, ToStatement};

use super::error::PgError;
use crate::pooler::SessionStatement;

/// Behind a pooler, for text that begins no transaction the pooled client
/// follows (prepared, or run in a [`PgTransaction`](super::PgTransaction)):
/// refuses session state.
///
/// # Errors
///
/// [`PgError::SessionStateBehindPooler`]: the text sets session state.
pub(super) fn refuse(sql: &str) -> Result<(), PgError> {
    match SessionStatement::in_text(sql) {
        Some(refused) => Err(PgError::SessionStateBehindPooler(refused)),
        None => Ok(()),
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for str {}
    impl Sealed for String {}
    impl Sealed for tokio_postgres::Statement {}
}

/// What [`PgClient::query`](super::PgClient::query) and its siblings take: query text (`str`,
/// `String`) or a prepared [`Statement`], as `Client::query` does.
///
/// Sealed: implemented for those three only.
pub trait PgStatement: ToStatement + sealed::Sealed {
    /// The query text, if this is text.
    #[doc(hidden)]
    fn text(&self) -> Option<&str>;
}

impl PgStatement for str {
    fn text(&self) -> Option<&str> {
        Some(self)
    }
}

impl PgStatement for String {
    fn text(&self) -> Option<&str> {
        Some(self)
    }
}

impl PgStatement for Statement {
    fn text(&self) -> Option<&str> {
        None
    }
}
