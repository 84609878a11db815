//! A scriptable in-memory manager for the pool's behaviour tests.
#![allow(dead_code, unreachable_pub)]

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pool_core::{async_trait, ManageConnection, PoolConfig, ValidationMode};

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
    pub connect_delay_ms: AtomicU64,
    pub fail_connect: AtomicBool,
    /// `connect` fails with a capacity refusal ("fleet budget exhausted"),
    /// which `is_capacity_refusal` recognises.
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
}

impl Script {
    pub fn alive(&self) -> i64 {
        self.alive.load(Ordering::SeqCst)
    }
    pub fn max_alive(&self) -> i64 {
        self.max_alive.load(Ordering::SeqCst)
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
        self.script.alive.fetch_sub(1, Ordering::SeqCst);
        let lived = self.opened_at.elapsed();
        if let Ok(mut lifetimes) = self.script.lifetimes.lock() {
            lifetimes.push(lived);
        }
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
        delay(&s.connect_delay_ms).await;
        if s.fail_connect.load(Ordering::SeqCst) {
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

    async fn is_valid(&self, _conn: &mut Conn) -> Result<(), MockError> {
        let s = &self.script;
        s.valid_calls.fetch_add(1, Ordering::SeqCst);
        delay(&s.valid_delay_ms).await;
        if s.fail_valid.load(Ordering::SeqCst) {
            return Err(MockError("ping failed"));
        }
        Ok(())
    }

    fn is_capacity_refusal(&self, e: &MockError) -> bool {
        e.0.contains("fleet budget")
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken
    }

    fn needs_reset(&self, conn: &mut Conn) -> bool {
        conn.dirty
    }

    async fn reset(&self, conn: &mut Conn) -> Result<(), MockError> {
        let s = &self.script;
        s.resets.fetch_add(1, Ordering::SeqCst);
        delay(&s.reset_delay_ms).await;
        if s.fail_reset.load(Ordering::SeqCst) {
            return Err(MockError("rollback failed"));
        }
        conn.dirty = false;
        Ok(())
    }
}

/// A config for tests: no validation, no housekeeping surprises.
pub fn config(max: u32) -> pool_core::PoolConfigBuilder {
    PoolConfig::builder()
        .max_size(max)
        .validation_mode(ValidationMode::None)
        .acquire_timeout(Duration::from_secs(5))
}

/// Checks the snapshot invariant.
pub fn assert_consistent(m: &pool_core::PoolMetrics) {
    assert_eq!(m.total, m.idle + m.in_use + m.opening, "{m:?}");
    assert!(m.total <= m.max_size, "{m:?}");
}

/// Yields until `cond` holds; panics after 10 000 rounds (bounded).
pub async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached after 10 000 yields");
}

/// Checks out `n` connections together and returns them, so none is fresh
/// any more: a fresh connection's first checkout skips validation and
/// `before_acquire` (SPEC 12), which tests of those checks must get past.
pub async fn use_each<M: ManageConnection>(pool: &pool_core::Pool<M>, n: usize) {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(pool.get().await.expect("warm-up checkout"));
    }
    drop(held);
    until(|| pool.state().in_use == 0).await;
}
