//! The floor: the same task loop on a bare `tokio::sync::Semaphore` (one
//! permit per connection, FIFO-fair) and a crossbeam `ArrayQueue` holding the
//! idle connections. No creation, no expiry, no bookkeeping: the least a
//! bounded, fair, notified pool can do with these parts.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::fake::FakeConn;

/// A semaphore-plus-queue pool, filled up front.
#[derive(Debug, Clone)]
pub struct FloorPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    permits: Semaphore,
    idle: ArrayQueue<FakeConn>,
}

/// A permit and the connection it took; dropping it pushes the connection
/// back before releasing the permit.
#[derive(Debug)]
pub struct FloorGuard<'a> {
    conn: Option<FakeConn>,
    idle: &'a ArrayQueue<FakeConn>,
    _permit: SemaphorePermit<'a>,
}

impl FloorPool {
    /// `size` connections, all idle.
    pub fn new(size: usize) -> Self {
        let idle = ArrayQueue::new(size);
        for _ in 0..size {
            let pushed = idle.push(FakeConn::default());
            debug_assert!(pushed.is_ok());
        }
        Self {
            inner: Arc::new(Inner {
                permits: Semaphore::new(size),
                idle,
            }),
        }
    }

    /// Waits for a permit, then takes a connection.
    pub async fn get(&self) -> Result<FloorGuard<'_>, String> {
        let permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        // A permit guarantees a connection: there are as many of each.
        let conn = self
            .inner
            .idle
            .pop()
            .ok_or("floor: permit without a connection")?;
        Ok(FloorGuard {
            conn: Some(conn),
            idle: &self.inner.idle,
            _permit: permit,
        })
    }
}

impl FloorGuard<'_> {
    /// The connection held.
    pub fn conn(&mut self) -> &mut FakeConn {
        self.conn.as_mut().expect("present until drop")
    }
}

impl Drop for FloorGuard<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Cannot be full: this connection's place was freed by its pop.
            let _full = self.idle.push(conn);
        }
    }
}
