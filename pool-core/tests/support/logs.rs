//! `tracing` output captured into a buffer, for tests that check what the
//! pool logs. The subscriber is installed for the calling thread only, so
//! a test on a current-thread runtime sees the pool's tasks' records too.

use std::io;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// Everything the subscriber wrote.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// The text written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Log records (each starts with a level word after the timestamp) that
    /// contain `needle`, a record's continuation lines included.
    pub fn records_with(&self, needle: &str) -> Vec<String> {
        let text = self.text();
        let mut records: Vec<String> = Vec::new();
        for line in text.lines() {
            let starts_record = ["TRACE", "DEBUG", " INFO", " WARN", "ERROR"]
                .iter()
                .any(|l| line.get(..40).is_some_and(|head| head.contains(l)));
            match records.last_mut() {
                Some(last) if !starts_record => {
                    last.push('\n');
                    last.push_str(line);
                }
                _ => records.push(line.to_owned()),
            }
        }
        records.retain(|r| r.contains(needle));
        records
    }
}

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// Captures this thread's INFO and higher records until the guard drops.
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let out = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(out.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (out, guard)
}
