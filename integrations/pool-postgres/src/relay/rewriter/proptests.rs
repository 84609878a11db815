//! The rewriter against models: random driver batches, well formed (a
//! statement used only while the driver holds it), go through the
//! rewriter to a model of a server behind a transaction-mode pooler, which
//! holds only the unnamed statement and, after every idle
//! `ReadyForQuery`, may be another server connection holding another
//! client's statement. The driver must see exactly what a server holding
//! its named statements answers, and no statement name may reach the
//! server.

use std::collections::{HashMap, HashSet, VecDeque};

use proptest::prelude::*;

use crate::relay::testing::{bind, execute, logged_in, messages, msg, parse, query, sync};
use crate::relay::wire::split_cstr;

/// The driver's statement names.
const NAMES: [&str; 3] = ["s0", "s1", "s2"];
/// What a pooled server connection's unnamed statement holds when it
/// comes from another client.
const STALE: &[u8] = b"SELECT 'another client'";

/// One step of a batch, over [`NAMES`].
#[derive(Debug, Clone)]
enum Op {
    /// A `Parse`, failing or not.
    Parse { name: usize, fails: bool },
    /// A `Bind` and its `Execute`.
    Bind(usize),
    /// A statement's `Describe`.
    Describe(usize),
    /// A statement's `Close`.
    Close(usize),
}

/// One batch of the driver's, and the status its `ReadyForQuery` reports
/// (in a transaction, the pooler keeps the server connection).
#[derive(Debug, Clone)]
enum Batch {
    /// Extended-protocol messages ended by `Sync`.
    Extended { ops: Vec<Op>, in_transaction: bool },
    /// A simple `Query`.
    Query { in_transaction: bool },
}

/// The one error either server answers with.
fn error() -> Vec<u8> {
    msg(b'E', &[b"SERROR\0\0"])
}

/// A server answering the extended protocol in order: with named
/// statements (the reference), or only the unnamed one behind a pooler.
struct Server {
    named: bool,
    /// Statement texts by name (only `""` for the pooled server).
    statements: HashMap<Vec<u8>, Vec<u8>>,
    /// The statement of the portal bound last.
    portal: Vec<u8>,
    /// An error skips the rest of the batch.
    failed: bool,
    /// The status of each batch's `ReadyForQuery`, in order.
    statuses: VecDeque<u8>,
}

impl Server {
    fn new(named: bool) -> Self {
        let mut statements = HashMap::new();
        if !named {
            statements.insert(Vec::new(), STALE.to_vec());
        }
        Self {
            named,
            statements,
            portal: Vec::new(),
            failed: false,
            statuses: VecDeque::new(),
        }
    }

    /// A statement name as the server sees it.
    fn name<'a>(&self, name: &'a [u8]) -> &'a [u8] {
        assert!(
            self.named || name.is_empty(),
            "the name {:?} reached the pooled server",
            String::from_utf8_lossy(name)
        );
        name
    }

    fn fail(&mut self, out: &mut Vec<u8>) {
        self.failed = true;
        out.extend_from_slice(&error());
    }

    /// The batch ends: its status, and a pooled server connection that
    /// may be another one after an idle status.
    fn ready(&mut self, out: &mut Vec<u8>) {
        let planned = self.statuses.pop_front().expect("a status per batch");
        let status = if std::mem::take(&mut self.failed) {
            b'I'
        } else {
            planned
        };
        out.extend_from_slice(&msg(b'Z', &[&[status]]));
        if !self.named && status == b'I' {
            self.statements.insert(Vec::new(), STALE.to_vec());
        }
    }

    /// Answers whole frontend messages.
    fn answer(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (tag, body) in messages(bytes) {
            if self.failed && !matches!(tag, b'S' | b'Q') {
                continue;
            }
            match tag {
                b'P' => {
                    let (name, rest) = split_cstr(&body).expect("a name");
                    let name = self.name(name).to_vec();
                    let (sql, _) = split_cstr(rest).expect("a text");
                    if !self.named {
                        // A failed Parse has dropped the unnamed statement.
                        self.statements.remove(&name);
                    }
                    if sql.starts_with(b"FAIL") || self.statements.contains_key(&name) {
                        self.fail(&mut out);
                    } else {
                        self.statements.insert(name, sql.to_vec());
                        out.extend_from_slice(&msg(b'1', &[]));
                    }
                }
                b'B' => {
                    let (_portal, rest) = split_cstr(&body).expect("a portal");
                    let (name, _) = split_cstr(rest).expect("a name");
                    match self.statements.get(self.name(name)) {
                        Some(sql) => {
                            self.portal = sql.clone();
                            out.extend_from_slice(&msg(b'2', &[]));
                        }
                        None => self.fail(&mut out),
                    }
                }
                b'E' => out.extend_from_slice(&msg(b'C', &[&self.portal, b"\0"])),
                b'D' => {
                    let (name, _) = split_cstr(&body[1..]).expect("a name");
                    match self.statements.get(self.name(name)) {
                        Some(sql) => {
                            out.extend_from_slice(&msg(b't', &[&[0, 0]]));
                            out.extend_from_slice(&msg(b'T', &[sql]));
                        }
                        None => self.fail(&mut out),
                    }
                }
                b'C' => {
                    let (name, _) = split_cstr(&body[1..]).expect("a name");
                    let name = self.name(name).to_vec();
                    self.statements.remove(&name);
                    out.extend_from_slice(&msg(b'3', &[]));
                }
                b'S' => self.ready(&mut out),
                b'Q' => {
                    if !self.named {
                        // A simple query drops the unnamed statement.
                        self.statements.remove(&Vec::new());
                    }
                    out.extend_from_slice(&msg(b'C', &[b"SELECT 1\0"]));
                    self.ready(&mut out);
                }
                other => panic!("an unexpected message {}", char::from(other)),
            }
        }
        out
    }
}

/// The driver: turns the generated batches into well-formed messages,
/// following the reference server message by message.
struct Driver {
    /// What the reference server holds and answers.
    reference: Server,
    replies: Vec<u8>,
    /// The names the driver holds: parsed, not closed, not failed.
    held: HashSet<usize>,
    /// Statement texts told apart.
    next_text: u32,
}

impl Driver {
    /// Sends `message` to the reference server; returns it.
    fn send(&mut self, message: Vec<u8>) -> Vec<u8> {
        let answer = self.reference.answer(&message);
        self.replies.extend_from_slice(&answer);
        message
    }

    /// The messages of one batch.
    fn batch(&mut self, batch: &Batch) -> Vec<u8> {
        let mut out = Vec::new();
        self.reference.statuses.push_back(planned(batch));
        let ops = match batch {
            Batch::Query { .. } => return self.send(query("SELECT 1")),
            Batch::Extended { ops, .. } => ops,
        };
        // The batch's Parses, and whether each stood.
        let mut parsed = Vec::new();
        for op in ops {
            match *op {
                Op::Parse { name, fails } => {
                    if self.held.contains(&name)
                        || self
                            .reference
                            .statements
                            .contains_key(NAMES[name].as_bytes())
                    {
                        // A driver closes a name before parsing it again.
                        out.extend(self.send(close(name)));
                        self.held.remove(&name);
                    }
                    self.next_text += 1;
                    let sql = if fails {
                        format!("FAIL {}", self.next_text)
                    } else {
                        format!("SELECT {}", self.next_text)
                    };
                    out.extend(self.send(parse(NAMES[name], &sql)));
                    self.held.insert(name);
                    parsed.push((name, !self.reference.failed));
                }
                Op::Bind(name) if self.held.contains(&name) => {
                    out.extend(self.send(bind(NAMES[name])));
                    out.extend(self.send(execute()));
                }
                Op::Describe(name) if self.held.contains(&name) => {
                    let describe = msg(b'D', &[b"S", NAMES[name].as_bytes(), b"\0"]);
                    out.extend(self.send(describe));
                }
                Op::Close(name) => {
                    out.extend(self.send(close(name)));
                    self.held.remove(&name);
                }
                // A statement the driver does not hold is not used.
                Op::Bind(_) | Op::Describe(_) => {}
            }
        }
        // A Parse that failed, or that the server skipped after an
        // error, is not held once the driver reads the batch's error.
        for (name, stood) in parsed {
            if !stood {
                self.held.remove(&name);
            }
        }
        out.extend(self.send(sync()));
        out
    }
}

/// The status a batch's `ReadyForQuery` reports unless it fails.
fn planned(batch: &Batch) -> u8 {
    match batch {
        Batch::Extended { in_transaction, .. } | Batch::Query { in_transaction } => {
            if *in_transaction {
                b'T'
            } else {
                b'I'
            }
        }
    }
}

/// A statement's `Close`.
fn close(name: usize) -> Vec<u8> {
    msg(b'C', &[b"S", NAMES[name].as_bytes(), b"\0"])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..NAMES.len(), prop::bool::weighted(0.25))
            .prop_map(|(name, fails)| Op::Parse { name, fails }),
        (0..NAMES.len()).prop_map(Op::Bind),
        (0..NAMES.len()).prop_map(Op::Describe),
        (0..NAMES.len()).prop_map(Op::Close),
    ]
}

fn batch() -> impl Strategy<Value = Batch> {
    prop_oneof![
        4 => (prop::collection::vec(op(), 0..6), any::<bool>())
            .prop_map(|(ops, in_transaction)| Batch::Extended { ops, in_transaction }),
        1 => any::<bool>().prop_map(|in_transaction| Batch::Query { in_transaction }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Batches are written in runs (pipelined), each run's replies read
    /// back in pieces cut anywhere before the next run is written.
    #[test]
    fn the_driver_sees_what_a_server_of_named_statements_answers(
        batches in prop::collection::vec((batch(), any::<bool>()), 1..12),
        cuts in prop::collection::vec(any::<usize>(), 12),
    ) {
        let mut driver = Driver {
            reference: Server::new(true),
            replies: Vec::new(),
            held: HashSet::new(),
            next_text: 0,
        };
        let mut pooled = Server::new(false);
        let mut rw = logged_in();
        let (mut pending, mut seen) = (Vec::new(), Vec::new());
        let mut cuts = cuts.iter().cycle();
        for (i, (batch, read_after)) in batches.iter().enumerate() {
            let written = driver.batch(batch);
            pooled.statuses.push_back(planned(batch));
            let mut sent = Vec::new();
            rw.client_bytes(&written, &mut sent).expect("a well-formed batch");
            pending.extend(pooled.answer(&sent));
            if *read_after || i + 1 == batches.len() {
                let cut = cuts.next().expect("cycled") % (pending.len() + 1);
                for piece in [&pending[..cut], &pending[cut..]] {
                    rw.server_bytes(piece, &mut seen).expect("replies placed");
                }
                pending.clear();
            }
        }
        prop_assert_eq!(messages(&seen), messages(&driver.replies));
        prop_assert_eq!(rw.batches_sent, rw.batches_answered);
    }
}
