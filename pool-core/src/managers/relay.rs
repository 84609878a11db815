//! An in-process relay between a PostgreSQL driver and a transaction-mode
//! pooler that turns every prepared statement into the unnamed one.
//!
//! Behind a pooler in transaction mode, a named statement is left on
//! whichever server connection ran its `Parse`, where the next client
//! numbering its statements the same way meets it ("prepared statement
//! ... already exists"), and is missing from the server connection the next
//! transaction runs on ("... does not exist"). The unnamed statement has
//! neither problem: each `Parse` replaces it, and it lives only on the
//! server connection of the moment.
//!
//! The relay reads the frontend protocol the driver writes and sends every
//! statement name of `Parse`, `Bind`, `Describe` (statement) and `Close`
//! (statement) to the server as the unnamed statement (lengths recomputed).
//! It keeps each statement's `Parse` body by the driver's name, and follows
//! which of them the server's unnamed statement holds now. A `Bind` or
//! `Describe` of a statement the server may no longer hold (another
//! statement was parsed since, or a `ReadyForQuery` said "idle", after which
//! the pooler may move the client to another server connection) is preceded
//! by that statement's `Parse` again, in the same message batch, and the
//! server's `ParseComplete` for it is kept from the driver. So the driver's
//! own statement cache keeps working (one round trip per cached query),
//! while no name ever reaches the server.
//!
//! Only the plaintext protocol can be read: with TLS to the pooler nothing
//! can be rewritten, and the managers refuse that combination.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// `SSLRequest`'s code in the untyped first message.
const SSL_REQUEST: i32 = 80_877_103;
/// `GSSENCRequest`'s code.
const GSSENC_REQUEST: i32 = 80_877_104;
/// `CancelRequest`'s code.
const CANCEL_REQUEST: i32 = 80_877_102;
/// How large a startup packet may be (PostgreSQL's own limit is 10,000).
const MAX_STARTUP: usize = 10_000;
/// Bytes read at a time from either side.
const READ_CHUNK: usize = 16 * 1024;

/// Relays alive in this process (their tasks not yet ended).
static OPEN_RELAYS: AtomicUsize = AtomicUsize::new(0);

/// How many relays are running in this process: one per open connection of
/// a manager in transaction pooler mode, plus any whose connection is being
/// opened. Each ends when its connection (or its server) closes.
pub fn open_relays() -> usize {
    OPEN_RELAYS.load(Ordering::Relaxed)
}

/// One driver-side statement name, as bytes without the trailing NUL.
type Name = Vec<u8>;

/// A `Parse` the server will answer with `ParseComplete`, in order.
#[derive(Debug)]
enum Sent {
    /// The driver's own `Parse` of this name.
    Client(Name),
    /// A `Parse` the relay added before a `Bind` or `Describe`: its
    /// `ParseComplete` is not the driver's to see.
    Injected,
}

/// The `Parse` bodies (everything after the name) by the driver's names,
/// bounded: past `cap`, the least recently used goes.
#[derive(Debug)]
struct Statements {
    by_name: HashMap<Name, (u64, Vec<u8>)>,
    by_use: BTreeMap<u64, Name>,
    next: u64,
    cap: usize,
}

impl Statements {
    fn new(cap: usize) -> Self {
        Self {
            by_name: HashMap::new(),
            by_use: BTreeMap::new(),
            next: 0,
            cap: cap.max(1),
        }
    }

    fn insert(&mut self, name: &[u8], body: Vec<u8>) {
        let seq = self.next;
        self.next += 1;
        if let Some((old, _)) = self.by_name.insert(name.to_vec(), (seq, body)) {
            self.by_use.remove(&old);
        }
        self.by_use.insert(seq, name.to_vec());
        while self.by_name.len() > self.cap {
            match self.by_use.pop_first() {
                Some((_, evicted)) => {
                    self.by_name.remove(&evicted);
                }
                None => break,
            }
        }
    }

    /// The body of `name`, marked as just used.
    fn get(&mut self, name: &[u8]) -> Option<&[u8]> {
        let seq = self.next;
        let entry = self.by_name.get_mut(name)?;
        self.next += 1;
        self.by_use.remove(&entry.0);
        self.by_use.insert(seq, name.to_vec());
        entry.0 = seq;
        Some(&entry.1)
    }

    fn remove(&mut self, name: &[u8]) {
        if let Some((seq, _)) = self.by_name.remove(name) {
            self.by_use.remove(&seq);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_name.len()
    }
}

/// Which of the driver's statements the server's unnamed statement holds,
/// and in which message batch (counted by `Sync`s) it was parsed.
#[derive(Debug)]
struct Loaded {
    name: Name,
    batch: u64,
}

/// The relay's protocol state: a rewriter for each direction, sharing what
/// the server holds.
#[derive(Debug)]
pub(crate) struct Rewriter {
    /// The frontend bytes of a message not yet complete.
    from_client: Vec<u8>,
    /// The backend bytes of a message not yet complete.
    from_server: Vec<u8>,
    /// A message that breaks the framing was seen: bytes pass untouched
    /// from then on (the server closes such a connection).
    broken: bool,
    /// The first `ReadyForQuery` (end of the login) was seen.
    logged_in: bool,
    statements: Statements,
    loaded: Option<Loaded>,
    /// Batches the driver ended (`Sync`, `Query`, `FunctionCall`).
    batches_sent: u64,
    /// Batches the server answered (`ReadyForQuery` after login).
    batches_answered: u64,
    /// The last answered batch after which the session was idle.
    last_idle: Option<u64>,
    /// The `Parse`s of the batch being written.
    open_batch: Vec<Sent>,
    /// The `Parse`s of the batches sent and not answered yet, oldest first.
    sent_batches: VecDeque<VecDeque<Sent>>,
    /// `Parse`s added by the relay, for tests and logs.
    injected: u64,
}

impl Rewriter {
    /// A rewriter for one connection, keeping at most `cap` statements.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            from_client: Vec::new(),
            from_server: Vec::new(),
            broken: false,
            logged_in: false,
            statements: Statements::new(cap),
            loaded: None,
            batches_sent: 0,
            batches_answered: 0,
            last_idle: None,
            open_batch: Vec::new(),
            sent_batches: VecDeque::new(),
            injected: 0,
        }
    }

    /// Rewrites typed frontend messages (after the startup packet) into
    /// `out`; keeps an incomplete message for the next call.
    pub(crate) fn client_bytes(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.broken {
            out.extend_from_slice(input);
            return;
        }
        let mut pending = std::mem::take(&mut self.from_client);
        pending.extend_from_slice(input);
        let mut at = 0;
        while let Some((tag, len)) = header(&pending[at..]) {
            if len < 4 {
                self.broken = true;
                break;
            }
            let end = at + 1 + len;
            if pending.len() < end {
                break;
            }
            let body = &pending[at + 5..end];
            self.client_message(tag, body, &pending[at..end], out);
            at = end;
        }
        if self.broken {
            out.extend_from_slice(&pending[at..]);
        } else {
            pending.drain(..at);
            self.from_client = pending;
        }
    }

    /// Rewrites backend messages into `out`; keeps an incomplete message
    /// for the next call.
    pub(crate) fn server_bytes(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.broken {
            out.extend_from_slice(input);
            return;
        }
        let mut pending = std::mem::take(&mut self.from_server);
        pending.extend_from_slice(input);
        let mut at = 0;
        while let Some((tag, len)) = header(&pending[at..]) {
            if len < 4 {
                self.broken = true;
                break;
            }
            let end = at + 1 + len;
            if pending.len() < end {
                break;
            }
            if self.server_message(tag, &pending[at + 5..end]) {
                out.extend_from_slice(&pending[at..end]);
            }
            at = end;
        }
        if self.broken {
            out.extend_from_slice(&pending[at..]);
        } else {
            pending.drain(..at);
            self.from_server = pending;
        }
    }

    fn client_message(&mut self, tag: u8, body: &[u8], whole: &[u8], out: &mut Vec<u8>) {
        match tag {
            b'P' => match split_cstr(body) {
                Some((name, rest)) => {
                    self.statements.insert(name, rest.to_vec());
                    self.open_batch.push(Sent::Client(name.to_vec()));
                    self.loaded = Some(Loaded {
                        name: name.to_vec(),
                        batch: self.batches_sent,
                    });
                    write_message(out, b'P', &[b"\0", rest]);
                }
                None => self.pass_broken(whole, out),
            },
            b'B' => {
                let parsed = split_cstr(body)
                    .and_then(|(portal, rest)| split_cstr(rest).map(|(s, r)| (portal, s, r)));
                match parsed {
                    Some((portal, name, rest)) => {
                        if self.make_current(name, out) {
                            write_message(out, b'B', &[portal, b"\0\0", rest]);
                        } else {
                            out.extend_from_slice(whole);
                        }
                    }
                    None => self.pass_broken(whole, out),
                }
            }
            b'D' | b'C' if body.first() == Some(&b'S') => match split_cstr(&body[1..]) {
                Some((name, [])) => {
                    if tag == b'C' {
                        // Closing the unnamed statement is never an error;
                        // whichever statement it held is parsed again when
                        // needed.
                        self.statements.remove(name);
                        self.loaded = None;
                        write_message(out, b'C', &[b"S\0"]);
                    } else if self.make_current(name, out) {
                        write_message(out, b'D', &[b"S\0"]);
                    } else {
                        out.extend_from_slice(whole);
                    }
                }
                _ => self.pass_broken(whole, out),
            },
            b'S' | b'Q' | b'F' => {
                // Each ends a batch that the server answers with exactly
                // one `ReadyForQuery`.
                self.sent_batches
                    .push_back(std::mem::take(&mut self.open_batch).into());
                self.batches_sent += 1;
                out.extend_from_slice(whole);
            }
            _ => out.extend_from_slice(whole),
        }
    }

    /// A message whose body does not parse: sent as it is, and nothing
    /// rewritten from then on.
    fn pass_broken(&mut self, whole: &[u8], out: &mut Vec<u8>) {
        self.broken = true;
        out.extend_from_slice(whole);
    }

    /// Makes sure the server's unnamed statement holds `name` for the
    /// message that follows, adding its `Parse` if it may not. `false`: the
    /// relay does not know `name` (never parsed, closed, or failed), and the
    /// message goes with the name as it is, which the server refuses with
    /// its own error.
    fn make_current(&mut self, name: &[u8], out: &mut Vec<u8>) -> bool {
        let batch = self.batches_sent;
        let held = self.loaded.as_ref().is_some_and(|loaded| {
            loaded.name == name
                && (loaded.batch == batch
                    || (self.batches_answered >= batch
                        && self.last_idle.is_none_or(|idle| idle < loaded.batch)))
        });
        if held {
            return true;
        }
        let Some(body) = self.statements.get(name) else {
            return false;
        };
        write_message(out, b'P', &[b"\0", body]);
        self.open_batch.push(Sent::Injected);
        self.injected += 1;
        self.loaded = Some(Loaded {
            name: name.to_vec(),
            batch,
        });
        true
    }

    /// Whether the backend message goes on to the driver.
    fn server_message(&mut self, tag: u8, body: &[u8]) -> bool {
        match tag {
            b'1' => {
                let oldest = match self.sent_batches.front_mut() {
                    Some(batch) => batch.pop_front(),
                    None => (!self.open_batch.is_empty()).then(|| self.open_batch.remove(0)),
                };
                !matches!(oldest, Some(Sent::Injected))
            }
            b'E' if self.logged_in => {
                // The server skips the rest of the batch: its `Parse`s not
                // yet answered never ran.
                let skipped = match self.sent_batches.front_mut() {
                    Some(batch) => std::mem::take(batch),
                    None => std::mem::take(&mut self.open_batch).into(),
                };
                for sent in skipped {
                    if let Sent::Client(name) = sent {
                        self.statements.remove(&name);
                    }
                }
                self.loaded = None;
                true
            }
            b'Z' => {
                if !self.logged_in {
                    self.logged_in = true;
                    return true;
                }
                let answered = self.batches_answered;
                self.batches_answered += 1;
                self.sent_batches.pop_front();
                if body.first() == Some(&b'I') {
                    self.last_idle = Some(answered);
                }
                true
            }
            _ => true,
        }
    }

    /// `Parse`s the relay added so far.
    #[cfg(test)]
    fn injected(&self) -> u64 {
        self.injected
    }
}

/// A typed message's tag and length field, once five bytes are there.
fn header(bytes: &[u8]) -> Option<(u8, usize)> {
    let head: [u8; 5] = bytes.get(..5)?.try_into().ok()?;
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    // A negative length breaks the framing, as one below 4 does.
    Some((head[0], usize::try_from(len).unwrap_or(0)))
}

/// A NUL-terminated string and what follows its NUL.
fn split_cstr(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = bytes.iter().position(|&b| b == 0)?;
    Some((&bytes[..nul], &bytes[nul + 1..]))
}

/// Appends one typed message made of `parts`.
fn write_message(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
    let len: usize = 4 + parts.iter().map(|p| p.len()).sum::<usize>();
    // The parts come from a message whose length fitted, plus at most two
    // bytes less: the length still fits.
    let len = i32::try_from(len).unwrap_or(i32::MAX);
    out.push(tag);
    out.extend_from_slice(&len.to_be_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
}

/// Where the relay reaches the pooler.
#[derive(Debug, Clone)]
pub(crate) enum Upstream {
    /// A TCP host and port.
    Tcp(String, u16),
    /// A Unix domain socket file.
    #[cfg_attr(not(unix), allow(dead_code))]
    Unix(PathBuf),
}

/// The pooler's end of a relay: one socket, either kind.
pub(crate) enum ServerStream {
    /// Over TCP.
    Tcp(tokio::net::TcpStream),
    /// Over a Unix domain socket.
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// TCP keepalive for the relay's socket to the pooler: the first probe
/// after `idle`, then every `interval`, giving up after `retries`.
#[cfg(feature = "tokio-postgres")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keepalive {
    pub(crate) idle: std::time::Duration,
    pub(crate) interval: Option<std::time::Duration>,
    pub(crate) retries: Option<u32>,
}

#[cfg(feature = "tokio-postgres")]
impl Keepalive {
    /// Turns keepalive on for `stream`.
    ///
    /// # Errors
    ///
    /// The socket option's error.
    fn apply(&self, stream: &tokio::net::TcpStream) -> io::Result<()> {
        let mut keepalive = socket2::TcpKeepalive::new().with_time(self.idle);
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "netbsd",
            windows
        ))]
        if let Some(interval) = self.interval {
            keepalive = keepalive.with_interval(interval);
        }
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_os = "macos",
            target_os = "ios",
            target_os = "freebsd",
            target_os = "netbsd"
        ))]
        if let Some(retries) = self.retries {
            keepalive = keepalive.with_retries(retries);
        }
        socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
    }
}

impl Upstream {
    /// Connects to the pooler.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect (refused, unreachable, unknown host).
    pub(crate) async fn connect(&self) -> io::Result<ServerStream> {
        match self {
            Self::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Ok(ServerStream::Tcp(stream))
            }
            #[cfg(unix)]
            Self::Unix(path) => Ok(ServerStream::Unix(
                tokio::net::UnixStream::connect(path).await?,
            )),
            #[cfg(not(unix))]
            Self::Unix(path) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "Unix domain sockets ({}) need a Unix platform",
                    path.display()
                ),
            )),
        }
    }
}

/// A started relay: where the driver connects, and what stops the relay
/// if the driver never does.
#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "sqlx08-postgres")),
    allow(dead_code)
)]
#[derive(Debug)]
pub(crate) struct Relay {
    /// The directory holding the relay's socket file, for the driver's
    /// `socket` option.
    pub(crate) dir: PathBuf,
    /// The port the socket file is named after (`.s.PGSQL.<port>`).
    pub(crate) port: u16,
    /// Dropped once the driver's connect is over: a relay still waiting for
    /// its driver then ends.
    _armed: tokio::sync::oneshot::Sender<()>,
}

/// The port the relay's socket file is named after.
#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "sqlx08-postgres")),
    allow(dead_code)
)]
const RELAY_PORT: u16 = 5432;

/// Counts relays for unique directory names.
#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "sqlx08-postgres")),
    allow(dead_code)
)]
static NEXT_RELAY: AtomicU64 = AtomicU64::new(0);

/// Removes the relay's socket file and directory when dropped.
#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "sqlx08-postgres")),
    allow(dead_code)
)]
struct SocketDir {
    dir: PathBuf,
    file: PathBuf,
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Counts a relay as open for as long as it lives.
struct OpenRelay;

impl OpenRelay {
    fn new() -> Self {
        OPEN_RELAYS.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for OpenRelay {
    fn drop(&mut self) {
        OPEN_RELAYS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Relay {
    #[cfg_attr(
        not(any(feature = "sqlx-postgres", feature = "sqlx08-postgres")),
        allow(dead_code)
    )]
    /// Connects to the pooler, then listens on a Unix socket in a new
    /// directory only this user can enter, and spawns the task that accepts
    /// the driver's one connection and relays it, rewriting statements with
    /// a [`Rewriter`] keeping at most `statements` of them.
    ///
    /// The task ends when either side closes, or, if the driver never
    /// connected, when the returned value is dropped. The socket file and
    /// its directory are removed as soon as the driver is connected.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect to the pooler or of the listener.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the drivers need one anyway).
    #[cfg(unix)]
    pub(crate) async fn start(upstream: &Upstream, statements: usize) -> io::Result<Relay> {
        use std::os::unix::fs::DirBuilderExt;

        let server = upstream.connect().await?;
        let dir = std::env::temp_dir().join(format!(
            "pool-core-relay-{}-{}-{:016x}",
            std::process::id(),
            NEXT_RELAY.fetch_add(1, Ordering::Relaxed),
            fastrand::u64(..),
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let file = dir.join(format!(".s.PGSQL.{RELAY_PORT}"));
        let socket = SocketDir {
            dir: dir.clone(),
            file,
        };
        let listener = tokio::net::UnixListener::bind(&socket.file)?;
        let (armed, disarmed) = tokio::sync::oneshot::channel::<()>();
        let open = OpenRelay::new();
        tokio::spawn(async move {
            let _open = open;
            let accepted = {
                let accept = std::pin::pin!(listener.accept());
                match futures_util::future::select(accept, disarmed).await {
                    futures_util::future::Either::Left((accepted, _)) => accepted,
                    futures_util::future::Either::Right(_) => return,
                }
            };
            drop(listener);
            drop(socket);
            match accepted {
                Ok((client, _)) => {
                    if let Err(error) = relay(client, server, Rewriter::new(statements)).await {
                        tracing::debug!(%error, "statement relay to the pooler ended");
                    }
                }
                Err(error) => tracing::debug!(%error, "statement relay could not accept"),
            }
        });
        Ok(Relay {
            dir,
            port: RELAY_PORT,
            _armed: armed,
        })
    }

    /// Connects to the pooler (with TCP `keepalive`, if given) and spawns
    /// a relay to it whose driver end is the returned stream, for drivers
    /// that take a stream (`tokio_postgres::Config::connect_raw`). The relay
    /// keeps at most `statements` statements and ends when either side
    /// closes.
    ///
    /// # Errors
    ///
    /// The I/O error of the connect to the pooler, of the keepalive option,
    /// or of the socket pair.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    #[cfg(all(unix, feature = "tokio-postgres"))]
    pub(crate) async fn pair(
        upstream: &Upstream,
        keepalive: Option<Keepalive>,
        statements: usize,
    ) -> io::Result<tokio::net::UnixStream> {
        let server = upstream.connect().await?;
        if let (ServerStream::Tcp(tcp), Some(keepalive)) = (&server, keepalive) {
            keepalive.apply(tcp)?;
        }
        let (driver, relayed) = tokio::net::UnixStream::pair()?;
        let open = OpenRelay::new();
        tokio::spawn(async move {
            let _open = open;
            if let Err(error) = relay(relayed, server, Rewriter::new(statements)).await {
                tracing::debug!(%error, "statement relay to the pooler ended");
            }
        });
        Ok(driver)
    }

    /// On platforms without Unix domain sockets there is no private place
    /// for the relay to listen.
    ///
    /// # Errors
    ///
    /// Always `Unsupported`: see [`Upstream`].
    #[cfg(not(unix))]
    pub(crate) async fn start(_upstream: &Upstream, _statements: usize) -> io::Result<Relay> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the transaction pooler mode's relay needs Unix domain sockets",
        ))
    }
}

/// Relays one connection: the startup packet as it is (an `SSLRequest` or
/// `GSSENCRequest` answered "no" here, the driver being told to speak
/// plaintext to the relay), then every message through `rewriter`, until
/// either side closes.
async fn relay<C>(client: C, server: ServerStream, rewriter: Rewriter) -> io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    match server {
        ServerStream::Tcp(server) => relay_with(client, server, rewriter).await,
        #[cfg(unix)]
        ServerStream::Unix(server) => relay_with(client, server, rewriter).await,
    }
}

async fn relay_with<C, S>(mut client: C, mut server: S, rewriter: Rewriter) -> io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let mut len = [0_u8; 4];
        client.read_exact(&mut len).await?;
        let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
        if !(8..=MAX_STARTUP).contains(&len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a startup packet of a bad length",
            ));
        }
        let mut packet = vec![0_u8; len];
        packet[..4].copy_from_slice(&(len as u32).to_be_bytes());
        client.read_exact(&mut packet[4..]).await?;
        let code = i32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]);
        match code {
            SSL_REQUEST | GSSENC_REQUEST => client.write_all(b"N").await?,
            CANCEL_REQUEST => {
                server.write_all(&packet).await?;
                tokio::io::copy_bidirectional(&mut client, &mut server).await?;
                return Ok(());
            }
            _ => {
                server.write_all(&packet).await?;
                break;
            }
        }
    }
    let rewriter = Mutex::new(rewriter);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, mut server_write) = tokio::io::split(server);
    let upstream = async {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut out = Vec::with_capacity(READ_CHUNK);
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                server_write.shutdown().await?;
                return Ok::<_, io::Error>(());
            }
            out.clear();
            rewriter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .client_bytes(&buf[..n], &mut out);
            server_write.write_all(&out).await?;
        }
    };
    let downstream = async {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut out = Vec::with_capacity(READ_CHUNK);
        loop {
            let n = server_read.read(&mut buf).await?;
            if n == 0 {
                client_write.shutdown().await?;
                return Ok::<_, io::Error>(());
            }
            out.clear();
            rewriter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .server_bytes(&buf[..n], &mut out);
            if !out.is_empty() {
                client_write.write_all(&out).await?;
            }
        }
    };
    // Either side closing ends the relay; the other side's socket closes as
    // its half is dropped here.
    let done =
        match futures_util::future::select(std::pin::pin!(upstream), std::pin::pin!(downstream))
            .await
        {
            futures_util::future::Either::Left((done, _))
            | futures_util::future::Either::Right((done, _)) => done,
        };
    done
}

/// Where a driver's options point, for [`Relay::start`]: a socket directory
/// (given, or as the host) holds `.s.PGSQL.<port>`.
#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "sqlx08-postgres")),
    allow(dead_code)
)]
pub(crate) fn upstream(socket_dir: Option<&Path>, host: &str, port: u16) -> Upstream {
    match socket_dir {
        Some(dir) => Upstream::Unix(dir.join(format!(".s.PGSQL.{port}"))),
        None if host.starts_with('/') => {
            Upstream::Unix(Path::new(host).join(format!(".s.PGSQL.{port}")))
        }
        None => Upstream::Tcp(host.to_owned(), port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        write_message(&mut out, tag, parts);
        out
    }

    fn parse(name: &str, sql: &str) -> Vec<u8> {
        msg(
            b'P',
            &[name.as_bytes(), b"\0", sql.as_bytes(), b"\0", &[0, 0]],
        )
    }

    fn bind(name: &str) -> Vec<u8> {
        msg(b'B', &[b"\0", name.as_bytes(), b"\0", &[0, 0, 0, 0, 0, 0]])
    }

    fn sync() -> Vec<u8> {
        msg(b'S', &[])
    }

    fn ready(status: u8) -> Vec<u8> {
        msg(b'Z', &[&[status]])
    }

    fn parse_complete() -> Vec<u8> {
        msg(b'1', &[])
    }

    /// The messages of a byte stream as (tag, body).
    fn messages(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some((tag, len)) = header(bytes) {
            out.push((tag, bytes[5..1 + len].to_vec()));
            bytes = &bytes[1 + len..];
        }
        assert!(bytes.is_empty(), "trailing bytes");
        out
    }

    fn logged_in() -> Rewriter {
        let mut rw = Rewriter::new(8);
        let mut out = Vec::new();
        rw.server_bytes(&ready(b'I'), &mut out);
        assert_eq!(out, ready(b'I'));
        rw
    }

    #[test]
    fn every_statement_name_reaches_the_server_unnamed() {
        let mut rw = logged_in();
        let mut input = parse("sqlx_s_1", "SELECT $1");
        input.extend(msg(b'D', &[b"Ssqlx_s_1\0"]));
        input.extend(sync());
        let mut out = Vec::new();
        rw.client_bytes(&input, &mut out);
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT $1\0\0\0".to_vec()));
        assert_eq!(sent[1], (b'D', b"S\0".to_vec()));
        assert_eq!(sent[2].0, b'S');
        // In a transaction ('T'), the next batch binds without a re-parse.
        let mut back = Vec::new();
        rw.server_bytes(&[parse_complete(), ready(b'T')].concat(), &mut back);
        assert_eq!(messages(&back).len(), 2);
        out.clear();
        rw.client_bytes(&[bind("sqlx_s_1"), sync()].concat(), &mut out);
        let sent = messages(&out);
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0], (b'B', b"\0\0\0\0\0\0\0\0".to_vec()));
        assert_eq!(rw.injected(), 0);
    }

    #[test]
    fn a_bind_after_an_idle_ready_parses_again_and_hides_its_parse_complete() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        rw.client_bytes(&[parse("s1", "SELECT 1"), sync()].concat(), &mut out);
        let mut back = Vec::new();
        rw.server_bytes(&[parse_complete(), ready(b'I')].concat(), &mut back);
        assert_eq!(messages(&back).len(), 2);
        out.clear();
        rw.client_bytes(&[bind("s1"), sync()].concat(), &mut out);
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT 1\0\0\0".to_vec()));
        assert_eq!(sent[1].0, b'B');
        assert_eq!(rw.injected(), 1);
        // The added Parse's reply is dropped; BindComplete and the rest pass.
        back.clear();
        let bind_complete = msg(b'2', &[]);
        rw.server_bytes(
            &[parse_complete(), bind_complete.clone(), ready(b'I')].concat(),
            &mut back,
        );
        assert_eq!(back, [bind_complete, ready(b'I')].concat());
    }

    #[test]
    fn a_nested_parse_in_between_makes_the_outer_bind_parse_again() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        // The outer statement, then one run to learn a type, then the
        // outer bind, all before any reply (pipelined).
        rw.client_bytes(&[parse("", "SELECT $1::mytype"), sync()].concat(), &mut out);
        rw.client_bytes(
            &[parse("s2", "SELECT typname"), bind("s2"), sync()].concat(),
            &mut out,
        );
        out.clear();
        rw.client_bytes(&[bind(""), sync()].concat(), &mut out);
        let sent = messages(&out);
        assert_eq!(sent[0], (b'P', b"\0SELECT $1::mytype\0\0\0".to_vec()));
        assert_eq!(rw.injected(), 1);
    }

    #[test]
    fn a_batch_not_yet_answered_counts_as_idle() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        rw.client_bytes(
            &[parse("s1", "SELECT 1"), sync(), bind("s1"), sync()].concat(),
            &mut out,
        );
        let sent = messages(&out);
        assert_eq!(
            sent.iter().map(|m| m.0).collect::<Vec<_>>(),
            b"PSPBS".to_vec()
        );
    }

    #[test]
    fn a_failed_parse_is_forgotten_and_close_is_unnamed() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        rw.client_bytes(&[parse("s1", "SELEC 1"), sync()].concat(), &mut out);
        let mut back = Vec::new();
        let error = msg(b'E', &[b"SERROR\0\0"]);
        rw.server_bytes(&[error.clone(), ready(b'I')].concat(), &mut back);
        assert_eq!(back, [error, ready(b'I')].concat());
        assert_eq!(rw.statements.len(), 0);
        // Unknown now: the bind keeps its name and the server refuses it.
        out.clear();
        rw.client_bytes(&[bind("s1"), sync()].concat(), &mut out);
        assert_eq!(out, [bind("s1"), sync()].concat());

        out.clear();
        rw.client_bytes(
            &[parse("s3", "SELECT 3"), msg(b'C', &[b"Ss3\0"])].concat(),
            &mut out,
        );
        let sent = messages(&out);
        assert_eq!(sent[1], (b'C', b"S\0".to_vec()));
        assert_eq!(rw.statements.len(), 0);
        // A portal's close is left alone.
        out.clear();
        let portal = msg(b'C', &[b"Pp1\0"]);
        rw.client_bytes(&portal, &mut out);
        assert_eq!(out, portal);
    }

    #[test]
    fn messages_split_anywhere_come_out_the_same() {
        let input = [
            parse("sqlx_s_7", "SELECT $1::int4"),
            msg(b'D', &[b"Ssqlx_s_7\0"]),
            sync(),
            bind("sqlx_s_7"),
            msg(b'E', &[b"\0", &[0, 0, 0, 0]]),
            sync(),
        ]
        .concat();
        let mut whole = Vec::new();
        logged_in().client_bytes(&input, &mut whole);
        for cut in 1..input.len() {
            let mut rw = logged_in();
            let mut out = Vec::new();
            rw.client_bytes(&input[..cut], &mut out);
            rw.client_bytes(&input[cut..], &mut out);
            assert_eq!(out, whole, "cut at {cut}");
        }
    }

    #[test]
    fn the_store_is_bounded() {
        let mut rw = Rewriter::new(2);
        let mut out = Vec::new();
        for i in 0..10 {
            rw.client_bytes(&parse(&format!("s{i}"), "SELECT 1"), &mut out);
        }
        assert_eq!(rw.statements.len(), 2);
    }

    #[test]
    fn a_broken_length_passes_everything_through() {
        let mut rw = logged_in();
        let mut out = Vec::new();
        let input = [b'P', 0, 0, 0, 1, 9, 9];
        rw.client_bytes(&input, &mut out);
        assert_eq!(out, input);
        out.clear();
        let more = parse("s1", "SELECT 1");
        rw.client_bytes(&more, &mut out);
        assert_eq!(out, more);
    }
}
