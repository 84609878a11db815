//! What the relay keeps of the driver's statements: their `Parse` bodies
//! by name ([`Statements`]), which of them the server's unnamed statement
//! holds ([`Loaded`]), and the `Parse`s the server has still to answer,
//! batch by batch ([`Ledger`]). Pure bookkeeping: no framing, no I/O.

use std::collections::{HashMap, VecDeque};

use super::wire::Broken;

/// One driver-side statement name, as bytes without the trailing NUL.
pub(super) type Name = Vec<u8>;

/// How many statements one relay holds for its driver, at most: past it the
/// connection fails (the relay never forgets a statement the driver has
/// not closed).
pub(super) const MAX_STATEMENTS: usize = 10_000;
/// How many bytes of `Parse` bodies one relay holds, at most.
pub(super) const MAX_STATEMENT_BYTES: usize = 32 * 1024 * 1024;

/// A `Parse` the server will answer with `ParseComplete`, in order.
#[derive(Debug)]
pub(super) enum Sent {
    /// The driver's own `Parse` of this name.
    Client(Name),
    /// A `Parse` the relay added before a `Bind` or `Describe`: its
    /// `ParseComplete` is not the driver's to see.
    Injected,
}

/// The `Parse` bodies (everything after the name) by the driver's names:
/// every statement the driver parsed and has not closed (nor failed to
/// parse), never evicted; bounded by failing the connection instead.
#[derive(Debug)]
pub(super) struct Statements {
    by_name: HashMap<Name, Vec<u8>>,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Statements {
    /// An empty store of at most `max_count` statements, of at most
    /// `max_bytes` of bodies in all.
    pub(super) fn new(max_count: usize, max_bytes: usize) -> Self {
        Self {
            by_name: HashMap::new(),
            bytes: 0,
            max_count,
            max_bytes,
        }
    }

    /// Keeps `body` as `name`'s, replacing what it held.
    ///
    /// # Errors
    ///
    /// Past either limit: the connection must fail (nothing is evicted).
    pub(super) fn insert(&mut self, name: &[u8], body: Vec<u8>) -> Result<(), Broken> {
        self.bytes += body.len();
        if let Some(old) = self.by_name.insert(name.to_vec(), body) {
            self.bytes -= old.len();
        }
        if self.by_name.len() > self.max_count || self.bytes > self.max_bytes {
            return Err(Broken(
                "the driver holds more statements than the relay keeps for one connection",
            ));
        }
        Ok(())
    }

    /// The body kept for `name`.
    pub(super) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.by_name.get(name).map(Vec::as_slice)
    }

    /// Forgets `name` (nothing if it is not held).
    pub(super) fn remove(&mut self, name: &[u8]) {
        if let Some(body) = self.by_name.remove(name) {
            self.bytes -= body.len();
        }
    }

    /// How many statements are held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_name.len()
    }
}

/// Which of the driver's statements the server's unnamed statement holds,
/// and in which message batch (counted by `Sync`s) it was parsed.
#[derive(Debug)]
pub(super) struct Loaded {
    pub(super) name: Name,
    pub(super) batch: u64,
}

/// The `Parse`s the server has still to answer with `ParseComplete`, in
/// the order it answers them: those of the batches sent and not answered
/// yet (a batch ends at `Sync`, `Query` or `FunctionCall`), oldest first,
/// then those of the batch being written.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// The `Parse`s of the batch being written.
    open: VecDeque<Sent>,
    /// The `Parse`s of the batches sent and not answered yet, oldest first.
    sent: VecDeque<VecDeque<Sent>>,
}

impl Ledger {
    /// A `Parse` written in the open batch.
    pub(super) fn parsed(&mut self, sent: Sent) {
        self.open.push_back(sent);
    }

    /// The open batch is sent: a new one opens.
    pub(super) fn end_batch(&mut self) {
        self.sent.push_back(std::mem::take(&mut self.open));
    }

    /// The last batch sent did not end after all (the server ignored its
    /// `Sync` in copy-in mode): it goes on as the open batch, its `Parse`s
    /// before the open batch's. `false` when no batch is sent and not
    /// answered.
    pub(super) fn reopen_last(&mut self) -> bool {
        let Some(mut ignored) = self.sent.pop_back() else {
            return false;
        };
        ignored.append(&mut self.open);
        self.open = ignored;
        true
    }

    /// A `ParseComplete` came: the `Parse` it answers, the oldest not yet
    /// answered (of the oldest batch sent, else of the open one).
    pub(super) fn parse_complete(&mut self) -> Option<Sent> {
        match self.sent.front_mut() {
            Some(batch) => batch.pop_front(),
            None => self.open.pop_front(),
        }
    }

    /// An `ErrorResponse` came: the server skips the rest of the batch it
    /// answers, whose `Parse`s not yet answered never ran. They are taken
    /// out.
    pub(super) fn skip_rest(&mut self) -> VecDeque<Sent> {
        match self.sent.front_mut() {
            Some(batch) => std::mem::take(batch),
            None => std::mem::take(&mut self.open),
        }
    }

    /// Whether a driver's `Parse` of `name` is still to be answered, in a
    /// batch sent or in the open one.
    pub(super) fn parses(&self, name: &[u8]) -> bool {
        self.sent
            .iter()
            .flatten()
            .chain(&self.open)
            .any(|sent| matches!(sent, Sent::Client(n) if n == name))
    }

    /// A `ReadyForQuery` came: the oldest batch sent is answered. `false`
    /// when no batch is sent and not answered.
    pub(super) fn answered(&mut self) -> bool {
        self.sent.pop_front().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str) -> Sent {
        Sent::Client(name.as_bytes().to_vec())
    }

    fn is_client(sent: Option<Sent>, name: &str) -> bool {
        matches!(sent, Some(Sent::Client(n)) if n == name.as_bytes())
    }

    #[test]
    fn the_store_counts_statements_and_bytes_and_fails_past_either_limit() {
        let mut store = Statements::new(2, 10);
        store.insert(b"a", vec![0; 4]).expect("a");
        store.insert(b"b", vec![0; 4]).expect("b");
        assert_eq!((store.len(), store.bytes), (2, 8));
        // Replacing a body is no new statement; its bytes are the new ones.
        store.insert(b"a", vec![0; 6]).expect("a again");
        assert_eq!((store.len(), store.bytes), (2, 10));
        assert_eq!(store.get(b"a"), Some(&[0; 6][..]));
        assert!(store.insert(b"c", vec![]).is_err(), "a third statement");
        let mut store = Statements::new(2, 10);
        store.insert(b"a", vec![0; 10]).expect("at the byte limit");
        assert!(store.insert(b"a", vec![0; 11]).is_err(), "past it");
    }

    #[test]
    fn a_removed_statement_gives_its_room_back() {
        let mut store = Statements::new(1, 10);
        store.insert(b"a", vec![0; 10]).expect("a");
        store.remove(b"a");
        store.remove(b"never held");
        assert_eq!((store.len(), store.bytes), (0, 0));
        assert_eq!(store.get(b"a"), None);
        store.insert(b"b", vec![0; 10]).expect("room again");
        assert_eq!(store.get(b"b").map(<[u8]>::len), Some(10));
    }

    #[test]
    fn parse_completes_answer_the_oldest_batch_first_then_the_open_one() {
        let mut ledger = Ledger::default();
        ledger.parsed(client("a"));
        ledger.end_batch();
        ledger.parsed(Sent::Injected);
        ledger.parsed(client("b"));
        assert!(is_client(ledger.parse_complete(), "a"));
        // The first batch has no Parse left, but is not answered yet.
        assert!(ledger.parse_complete().is_none());
        assert!(ledger.answered());
        assert!(matches!(ledger.parse_complete(), Some(Sent::Injected)));
        assert!(is_client(ledger.parse_complete(), "b"));
        assert!(ledger.parse_complete().is_none());
        assert!(!ledger.answered(), "the open batch is not sent");
    }

    #[test]
    fn an_error_skips_the_rest_of_the_batch_it_answers_only() {
        let mut ledger = Ledger::default();
        ledger.parsed(client("a"));
        ledger.parsed(client("b"));
        ledger.end_batch();
        ledger.parsed(client("b"));
        ledger.end_batch();
        ledger.parsed(client("c"));
        assert!(is_client(ledger.parse_complete(), "a"));
        let skipped = ledger.skip_rest();
        assert_eq!(skipped.len(), 1);
        // The later batches still parse "b" and "c"; "a" is answered.
        assert!(ledger.parses(b"b") && ledger.parses(b"c"));
        assert!(!ledger.parses(b"a"));
        assert!(ledger.answered());
        assert!(is_client(ledger.parse_complete(), "b"));
        assert!(!ledger.parses(b"b"));
        // With no batch sent, an error skips the open batch.
        assert!(ledger.answered());
        assert_eq!(ledger.skip_rest().len(), 1);
        assert!(!ledger.parses(b"c"));
    }

    #[test]
    fn a_reopened_batch_goes_on_before_the_open_one() {
        let mut ledger = Ledger::default();
        assert!(!ledger.reopen_last(), "nothing sent");
        ledger.parsed(client("a"));
        ledger.end_batch();
        ledger.parsed(client("b"));
        assert!(ledger.reopen_last());
        assert!(!ledger.answered(), "one open batch, none sent");
        ledger.end_batch();
        assert!(is_client(ledger.parse_complete(), "a"));
        assert!(is_client(ledger.parse_complete(), "b"));
        assert!(ledger.answered());
        assert!(!ledger.answered());
    }

    #[test]
    fn injected_parses_name_nothing() {
        let mut ledger = Ledger::default();
        ledger.parsed(Sent::Injected);
        ledger.end_batch();
        assert!(!ledger.parses(b""));
    }
}
