//! A scriptable in-memory manager for the pool's behaviour tests.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pool_core::{async_trait, ErrorClass, ManageConnection};

/// What the mock's connections and calls did, shared with the test.
#[derive(Debug, Default)]
pub struct Script {
    next_id: AtomicU64,
    /// `connect` calls started.
    pub connects: AtomicU64,
    /// Connections alive now (opened and not yet dropped).
    pub alive: AtomicI64,
    /// Highest `alive` ever seen.
    pub max_alive: AtomicI64,
    /// Connections closed (dropped) so far; counted after `alive` went down.
    pub closed: AtomicU64,
    /// `connect` calls in flight now, and the most ever in flight at once.
    pub connecting: AtomicI64,
    pub max_connecting: AtomicI64,
    /// Scripted behaviour of each manager call (all `Ok` by default); the
    /// flags and delays below still apply on top of an `Ok`.
    pub on_connect: Act,
    pub on_is_valid: Act,
    pub on_reset: Act,
    /// Synchronous checks: `Err` means "yes" (broken / needs a reset),
    /// `Panic` panics, `Slow` and `Never` do not apply.
    pub on_has_broken: Act,
    pub on_needs_reset: Act,
    pub connect_delay_ms: AtomicU64,
    pub fail_connect: AtomicBool,
    /// The next this many connects fail ("connection refused"), then
    /// connects work again (a blip).
    pub fail_next_connects: AtomicU64,
    /// Failed connects fail with a refused login, which
    /// `classify_error` calls permanent.
    pub permanent_failure: AtomicBool,
    /// `connect` fails with a capacity refusal ("fleet budget exhausted"),
    /// which `classify_error` calls a capacity refusal.
    pub refuse_capacity: AtomicBool,
    pub fail_valid: AtomicBool,
    pub valid_calls: AtomicU64,
    pub valid_delay_ms: AtomicU64,
    pub fail_reset: AtomicBool,
    pub resets: AtomicU64,
    pub reset_delay_ms: AtomicU64,
    /// How long each closed connection lived (tokio's clock), in closing
    /// order.
    pub lifetimes: Mutex<Vec<Duration>>,
    /// The "server" killed every connection with a smaller id: `is_valid`
    /// fails on them (set with [`Script::kill_all_open`]).
    pub killed_below: AtomicU64,
    /// `has_broken` says yes for every connection with a smaller id (the
    /// client noticed its socket closed).
    pub closed_below: AtomicU64,
    /// `awaits_close`: the pool awaits `close`, which plays `on_close`
    /// (`Slow` or `Never` hold the connection open) and then drops it.
    pub await_close: AtomicBool,
    pub on_close: Act,
    /// `close` calls started.
    pub close_calls: AtomicU64,
    /// What `target` says (`None`, the default: nothing).
    pub target: Mutex<Option<String>>,
}

impl Script {
    /// Kills every connection opened so far at the "server": their
    /// `is_valid` fails from now on (their `has_broken` does not know).
    pub fn kill_all_open(&self) {
        self.killed_below
            .store(self.next_id.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Every connection opened so far reports itself broken.
    pub fn close_all_open(&self) {
        self.closed_below
            .store(self.next_id.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

impl Script {
    pub fn alive(&self) -> i64 {
        self.alive.load(Ordering::SeqCst)
    }
    pub fn max_alive(&self) -> i64 {
        self.max_alive.load(Ordering::SeqCst)
    }
    pub fn closed(&self) -> u64 {
        self.closed.load(Ordering::SeqCst)
    }
    pub fn max_connecting(&self) -> i64 {
        self.max_connecting.load(Ordering::SeqCst)
    }
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::SeqCst)
    }
    pub fn set(&self, flag: &AtomicBool, on: bool) {
        flag.store(on, Ordering::SeqCst);
    }
    pub fn lifetimes(&self) -> Vec<Duration> {
        self.lifetimes.lock().unwrap().clone()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Mock {
    pub script: Arc<Script>,
}

impl Mock {
    /// A mock whose every connect takes `ms` milliseconds.
    pub fn with_connect_delay(ms: u64) -> Self {
        let mock = Self::default();
        mock.script.connect_delay_ms.store(ms, Ordering::SeqCst);
        mock
    }

    /// A mock whose every reset takes `ms` milliseconds.
    pub fn with_reset_delay(ms: u64) -> Self {
        let mock = Self::default();
        mock.script.reset_delay_ms.store(ms, Ordering::SeqCst);
        mock
    }
}

#[derive(Debug)]
pub struct MockError(pub &'static str);

impl fmt::Display for MockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for MockError {}

/// A mock connection; `broken` and `dirty` are what the return path checks.
pub struct Conn {
    pub id: u64,
    pub broken: bool,
    pub dirty: bool,
    /// Work done through this connection, to see state carried across uses.
    pub uses: Vec<u64>,
    /// When `connect` made it (tokio's clock, so paused tests control it).
    pub opened_at: tokio::time::Instant,
    script: Arc<Script>,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Conn#{}", self.id)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // `alive` first, `closed` last: `assert_bounds` relies on this order.
        self.script.alive.fetch_sub(1, Ordering::SeqCst);
        let lived = self.opened_at.elapsed();
        if let Ok(mut lifetimes) = self.script.lifetimes.lock() {
            lifetimes.push(lived);
        }
        self.script.closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a scripted call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Behaviour {
    /// Succeeds at once.
    Ok = 0,
    /// Fails at once.
    Err = 1,
    /// Succeeds after [`SLOW`].
    Slow = 2,
    /// Never finishes (only a timeout or a cancellation ends it).
    Never = 3,
    /// Panics.
    Panic = 4,
}

impl Behaviour {
    pub const ALL: [Behaviour; 5] = [Self::Ok, Self::Err, Self::Slow, Self::Never, Self::Panic];
}

/// How long a [`Behaviour::Slow`] call takes.
pub const SLOW: Duration = Duration::from_millis(30);

/// The message of a connect failure the mock calls permanent.
pub const PERMANENT: &str = "password authentication failed";

/// The message of every scripted panic (a test can recognise it).
pub const SCRIPTED_PANIC: &str = "scripted panic";

/// One call's scripted [`Behaviour`], changeable while the pool runs.
#[derive(Debug, Default)]
pub struct Act(AtomicU8);

impl Act {
    pub fn set(&self, b: Behaviour) {
        self.0.store(b as u8, Ordering::SeqCst);
    }
    pub fn get(&self) -> Behaviour {
        match self.0.load(Ordering::SeqCst) {
            0 => Behaviour::Ok,
            1 => Behaviour::Err,
            2 => Behaviour::Slow,
            3 => Behaviour::Never,
            _ => Behaviour::Panic,
        }
    }
    /// Plays the behaviour of an async call named `what`.
    pub async fn play(&self, what: &'static str) -> Result<(), MockError> {
        match self.get() {
            Behaviour::Ok => Ok(()),
            Behaviour::Err => Err(MockError(what)),
            Behaviour::Slow => {
                tokio::time::sleep(SLOW).await;
                Ok(())
            }
            Behaviour::Never => std::future::pending().await,
            Behaviour::Panic => panic!("{SCRIPTED_PANIC} in {what}"),
        }
    }
    /// Plays the behaviour of a synchronous yes/no check: `Err` answers
    /// yes, `Panic` panics, anything else defers to `otherwise`.
    pub fn check(&self, what: &'static str, otherwise: bool) -> bool {
        match self.get() {
            Behaviour::Err => true,
            Behaviour::Panic => panic!("{SCRIPTED_PANIC} in {what}"),
            _ => otherwise,
        }
    }
}

/// Counts a `connect` in flight, also when its future is dropped.
struct Connecting<'a>(&'a Script);

impl<'a> Connecting<'a> {
    fn start(s: &'a Script) -> Self {
        let now = s.connecting.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_connecting.fetch_max(now, Ordering::SeqCst);
        Self(s)
    }
}

impl Drop for Connecting<'_> {
    fn drop(&mut self) {
        self.0.connecting.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn delay(ms: &AtomicU64) {
    let ms = ms.load(Ordering::SeqCst);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

#[async_trait]
impl ManageConnection for Mock {
    type Connection = Conn;
    type Error = MockError;

    async fn connect(&self) -> Result<Conn, MockError> {
        let s = &self.script;
        s.connects.fetch_add(1, Ordering::SeqCst);
        let _in_flight = Connecting::start(s);
        s.on_connect.play("connect failed").await?;
        delay(&s.connect_delay_ms).await;
        let blip = s
            .fail_next_connects
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if s.fail_connect.load(Ordering::SeqCst) || blip {
            if s.permanent_failure.load(Ordering::SeqCst) {
                return Err(MockError(PERMANENT));
            }
            return Err(MockError("connection refused"));
        }
        if s.refuse_capacity.load(Ordering::SeqCst) {
            return Err(MockError("fleet budget exhausted"));
        }
        let alive = s.alive.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_alive.fetch_max(alive, Ordering::SeqCst);
        Ok(Conn {
            id: s.next_id.fetch_add(1, Ordering::SeqCst),
            broken: false,
            dirty: false,
            uses: Vec::new(),
            opened_at: tokio::time::Instant::now(),
            script: s.clone(),
        })
    }

    async fn is_valid(&self, conn: &mut Conn) -> Result<(), MockError> {
        let s = &self.script;
        s.valid_calls.fetch_add(1, Ordering::SeqCst);
        s.on_is_valid.play("ping failed").await?;
        delay(&s.valid_delay_ms).await;
        if s.fail_valid.load(Ordering::SeqCst) || conn.id < s.killed_below.load(Ordering::SeqCst) {
            return Err(MockError("ping failed"));
        }
        Ok(())
    }

    fn target(&self) -> Option<String> {
        self.script.target.lock().unwrap().clone()
    }

    fn classify_error(&self, e: &MockError) -> ErrorClass {
        if e.0 == PERMANENT {
            ErrorClass::Permanent
        } else if e.0.contains("fleet budget") {
            ErrorClass::CapacityRefusal
        } else {
            ErrorClass::Transient
        }
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        let closed = conn.id < self.script.closed_below.load(Ordering::SeqCst);
        self.script
            .on_has_broken
            .check("has_broken", conn.broken || closed)
    }

    async fn close(&self, conn: Conn) {
        self.script.close_calls.fetch_add(1, Ordering::SeqCst);
        // An error or a panic still drops the connection, as a real
        // manager's socket closes when its value is dropped.
        let _ = self.script.on_close.play("close failed").await;
        drop(conn);
    }

    fn awaits_close(&self) -> bool {
        self.script.await_close.load(Ordering::SeqCst)
    }

    fn needs_reset(&self, conn: &mut Conn) -> bool {
        self.script.on_needs_reset.check("needs_reset", conn.dirty)
    }

    async fn reset(&self, conn: &mut Conn) -> Result<(), MockError> {
        let s = &self.script;
        s.resets.fetch_add(1, Ordering::SeqCst);
        s.on_reset.play("rollback failed").await?;
        delay(&s.reset_delay_ms).await;
        if s.fail_reset.load(Ordering::SeqCst) {
            return Err(MockError("rollback failed"));
        }
        conn.dirty = false;
        Ok(())
    }
}
