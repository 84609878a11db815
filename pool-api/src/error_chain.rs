//! An error with its causes, in one line of text: what the pool's logs and
//! the managers' `Display` use, so the cause of a failure is in the text
//! even when it lives only in the `source()` chain. For managers that word
//! their own connect errors the same way ([`ConnectCause`]).

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
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

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
                !key.is_empty() && written.contains(&key)
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

/// The text that, found in what was written, shows that `e` was: the first
/// line of its `Display`, less a leading severity word (`FATAL: `, as
/// PostgreSQL's server errors print themselves before their message, and
/// any details on the lines below).
fn key_text(e: &(dyn Error + 'static)) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    server_message(first).unwrap_or(first).to_owned()
}

/// The message of a server error's first line, `SEVERITY: message`, where
/// the severity is one of PostgreSQL's (`ERROR`, `FATAL`, `PANIC`); `None`
/// for any other line.
fn server_message(line: &str) -> Option<&str> {
    let (severity, message) = line.split_once(": ")?;
    matches!(severity, "ERROR" | "FATAL" | "PANIC").then_some(message)
}

/// What a driver says around a failed connect that the words `connect to
/// <target> failed` already say (tokio-postgres's), left out when the
/// error has a cause to show instead.
const CONNECT_WRAPPERS: &[&str] = &["error connecting to server"];

/// The cause of a failed connect, for `connect to <target> failed: <cause>`:
/// a server's refusal as its message (`password authentication failed for
/// user "app"`, without the driver's `db error: FATAL: `), with its detail
/// and hint; else the error's chain, less a driver's own words for a failed
/// connect (`error connecting to server`) when it has a cause (`Connection
/// refused (os error 111)`).
pub struct ConnectCause<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ConnectCause<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut layer = Some(self.0);
        let mut depth = 0;
        while let Some(e) = layer {
            if depth == MAX_CAUSES {
                break;
            }
            let text = e.to_string();
            let mut lines = text.lines();
            if let Some(message) = lines.next().and_then(server_message) {
                f.write_str(message)?;
                for line in lines {
                    if let Some(detail) = line.strip_prefix("DETAIL: ") {
                        write!(f, "; detail: {detail}")?;
                    } else if let Some(hint) = line.strip_prefix("HINT: ") {
                        write!(f, "; hint: {hint}")?;
                    }
                }
                return Ok(());
            }
            layer = e.source();
            depth += 1;
        }
        match self.0.source() {
            Some(cause) if CONNECT_WRAPPERS.contains(&&*self.0.to_string()) => {
                fmt::Display::fmt(&ErrorChain(cause), f)
            }
            _ => fmt::Display::fmt(&ErrorChain(self.0), f),
        }
    }
}

impl fmt::Debug for ConnectCause<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
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
    fn a_server_refusal_reads_as_its_message() {
        let e = chain(&[
            "db error",
            "FATAL: password authentication failed for user \"app\"\nDETAIL: none\nHINT: ask",
        ]);
        assert_eq!(
            ConnectCause(&e).to_string(),
            "password authentication failed for user \"app\"; detail: none; hint: ask"
        );
        let e = chain(&[
            "error connecting to server",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            ConnectCause(&e).to_string(),
            "Connection refused (os error 111)"
        );
        let e = chain(&["io error", "Connection refused (os error 111)"]);
        assert_eq!(
            ConnectCause(&e).to_string(),
            "io error: Connection refused (os error 111)"
        );
        // A message already written is not written again.
        let e = chain(&[
            "connect to db:5432 failed: no such role",
            "db error",
            "FATAL: no such role",
        ]);
        assert_eq!(
            ErrorChain(&e).to_string(),
            "connect to db:5432 failed: no such role"
        );
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
