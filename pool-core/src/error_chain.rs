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
pub(crate) struct ErrorChain<'a>(pub(crate) &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut written = self.0.to_string();
        let mut cause = self.0.source();
        for _ in 0..MAX_CAUSES {
            let Some(e) = cause else { break };
            let text = e.to_string();
            if !text.is_empty() && !written.contains(&text) {
                written.push_str(": ");
                written.push_str(&text);
            }
            cause = e.source();
        }
        f.write_str(&written)
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
        let alone = chain(&["pool is closed"]);
        assert_eq!(ErrorChain(&alone).to_string(), "pool is closed");
    }
}
