//! The database URL a test needs, or a failure that says so.

/// The URL in `var`. A test that calls this is marked `#[ignore]` and runs
/// only when asked for (`--include-ignored`); asked for without the URL, it
/// fails here rather than passing without having run.
pub fn url(var: &str) -> String {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("{var} is not set: this test needs a database server (see scripts/test.sh)"),
    }
}
