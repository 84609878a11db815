//! An error with its causes, in one line of text: what the pool's logs and
//! the managers' `Display` use, so the cause of a failure is in the text
//! even when it lives only in the `source()` chain.

use std::error::Error;
use std::fmt;

/// How many causes are followed at most (a chain that loops or runs very
/// deep is cut there).
const MAX_CAUSES: usize = 16;

/// Displays an error, then `: ` and each cause of its `source()` chain
/// whose text is not already part of what was written (an error that
/// prints its cause and also returns it from `source()` shows it once).
/// When the error's text already holds a cause further down (as `connect
/// to 127.0.0.1:5433 failed: Connection refused (os error 111)` holds the
/// system's message under the driver's `error connecting to server`), the
/// causes above it are left out too: the error chose to show that one.
pub(crate) struct ErrorChain<'a>(pub(crate) &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut written = self.0.to_string();
        let mut causes = Vec::new();
        let mut cause = self.0.source();
        while let Some(e) = cause {
            if causes.len() == MAX_CAUSES {
                break;
            }
            causes.push(e);
            cause = e.source();
        }
        let shown = causes
            .iter()
            .rposition(|e| {
                let key = key_text(*e);
                !key.is_empty() && written.contains(&*key)
            })
            .map_or(0, |deepest| deepest + 1);
        for e in &causes[shown..] {
            let text = e.to_string();
            if !text.is_empty() && !written.contains(&text) {
                written.push_str(": ");
                written.push_str(&text);
            }
        }
        f.write_str(&written)
    }
}

/// The text that, found in what was written, shows that `e` was: its
/// message for a server's error of tokio-postgres (whose `Display` adds the
/// severity, `FATAL: `, and any detail), else its `Display`.
fn key_text<'a>(e: &'a (dyn Error + 'static)) -> std::borrow::Cow<'a, str> {
    #[cfg(feature = "tokio-postgres")]
    if let Some(db) = e.downcast_ref::<tokio_postgres::error::DbError>() {
        return std::borrow::Cow::Borrowed(db.message());
    }
    std::borrow::Cow::Owned(e.to_string())
}

/// The cause of a failed connect, for `connect to <target> failed: <cause>`:
/// for a tokio-postgres error, the server's message when the server
/// refused (`password authentication failed for user "app"`, without the
/// driver's `db error: FATAL: `), else the chain of its cause (`Connection
/// refused (os error 111)`, without `error connecting to server`, which the
/// words around it already say); any other error with its chain.
pub(crate) struct ConnectCause<'a>(pub(crate) &'a (dyn Error + 'static));

impl fmt::Display for ConnectCause<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        #[cfg(feature = "tokio-postgres")]
        if let Some(e) = self.0.downcast_ref::<tokio_postgres::Error>() {
            if let Some(db) = e.as_db_error() {
                f.write_str(db.message())?;
                if let Some(detail) = db.detail() {
                    write!(f, "; detail: {detail}")?;
                }
                if let Some(hint) = db.hint() {
                    write!(f, "; hint: {hint}")?;
                }
                return Ok(());
            }
            if let Some(cause) = e.source() {
                return fmt::Display::fmt(&ErrorChain(cause), f);
            }
        }
        fmt::Display::fmt(&ErrorChain(self.0), f)
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer {
        text: &'static str,
        cause: Option<Box<Layer>>,
    }

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.text)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.cause.as_deref().map(|e| e as _)
        }
    }

    fn chain(texts: &[&'static str]) -> Layer {
        let mut layer: Option<Box<Layer>> = None;
        for text in texts.iter().rev() {
            layer = Some(Box::new(Layer { text, cause: layer }));
        }
        *layer.expect("one layer at least")
    }

    #[test]
    fn each_cause_is_written_once() {
        let e = chain(&[
            "error connecting to server",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            ErrorChain(&e).to_string(),
            "error connecting to server: Connection refused (os error 111)"
        );
        // A layer that already prints its cause does not get it twice.
        let e = chain(&[
            "connect failed: db error",
            "db error",
            "FATAL: no such role",
        ]);
        assert_eq!(
            ErrorChain(&e).to_string(),
            "connect failed: db error: FATAL: no such role"
        );
        // A text that holds a deeper cause leaves out the causes above it.
        let e = chain(&[
            "connect to db:5432 failed: Connection refused (os error 111)",
            "error connecting to server",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            ErrorChain(&e).to_string(),
            "connect to db:5432 failed: Connection refused (os error 111)"
        );
        let alone = chain(&["pool is closed"]);
        assert_eq!(ErrorChain(&alone).to_string(), "pool is closed");
    }
}
