//! A fake connection and one manager for it, implementing every pool's
//! manager trait, so all no-op contestants create and check connections
//! through the same code.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a fake pool hands out. It carries a use counter so a scenario can
/// touch it like a real connection.
#[derive(Debug, Default)]
pub struct FakeConn {
    /// Times this connection was used.
    pub uses: u64,
}

/// How the fake pools are built.
#[derive(Debug, Clone)]
pub struct FakeSpec {
    /// Hard bound on connections (every pool's `max_size` equivalent).
    pub max_size: u32,
    /// Connections kept open (used by S4 only).
    pub min_size: u32,
    /// How long one connect takes.
    pub connect_delay: Duration,
    /// Acquire timeout, the same for every pool.
    pub acquire_timeout: Duration,
    /// Counts connects across the pool's life.
    pub opened: Arc<AtomicU64>,
}

impl FakeSpec {
    /// A no-op pool of `max_size`: instant connects, nothing kept open.
    pub fn noop(max_size: u32) -> Self {
        Self {
            max_size,
            min_size: 0,
            connect_delay: Duration::ZERO,
            acquire_timeout: Duration::from_secs(30),
            opened: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The manager every pool is given.
    pub fn manager(&self) -> FakeManager {
        FakeManager {
            connect_delay: self.connect_delay,
            opened: self.opened.clone(),
        }
    }

    /// Connects made so far.
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

/// Opens [`FakeConn`]s after `connect_delay`; checks always pass.
#[derive(Debug, Clone)]
pub struct FakeManager {
    connect_delay: Duration,
    opened: Arc<AtomicU64>,
}

impl FakeManager {
    pub(crate) async fn open(&self) -> FakeConn {
        if !self.connect_delay.is_zero() {
            tokio::time::sleep(self.connect_delay).await;
        }
        self.opened.fetch_add(1, Ordering::Relaxed);
        FakeConn::default()
    }
}

#[pool_core::async_trait]
impl pool_core::ManageConnection for FakeManager {
    type Connection = FakeConn;
    type Error = Infallible;

    async fn connect(&self) -> Result<FakeConn, Infallible> {
        Ok(self.open().await)
    }

    async fn is_valid(&self, _conn: &mut FakeConn) -> Result<(), Infallible> {
        Ok(())
    }
}
