//! The shared mock manager with the scripts the peers' suites use on top of
//! its own: a budget of successful connects, "the next n connects (or
//! checks, or `has_broken` answers) fail", connects that wait for the test's
//! word, and a first check that blocks until released.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pool_core::{async_trait, ErrorClass, ManageConnection, PoolConfig, ValidationMode};
use tokio::sync::{mpsc, Notify};

use crate::support::{Conn, Mock, MockError};

/// What [`Peer`] does before handing a call to the mock.
#[derive(Debug, Default)]
pub struct Plan {
    /// Successful connects left; `None` is no limit. At zero every connect
    /// fails (bb8's and r2d2's `NthConnectionFailManager`).
    pub connects_left: Mutex<Option<u64>>,
    /// The next this-many connects fail, then they succeed again.
    pub failing_connects: AtomicU64,
    /// The next this-many `is_valid` calls fail.
    pub failing_checks: AtomicU64,
    /// The next this-many `has_broken` calls answer "broken".
    pub broken_answers: AtomicU64,
    /// `has_broken` calls so far.
    pub broken_calls: AtomicU64,
    /// When set, each connect waits for the test to send its outcome
    /// (`true`: it succeeds). Held across the wait, so connects queue.
    pub remote: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<bool>>>,
    /// The first `is_valid` call signals `check_entered` and waits for
    /// `check_release`.
    pub hold_first_check: AtomicBool,
    pub check_entered: Notify,
    pub check_release: Notify,
}

/// The support mock under a [`Plan`].
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub mock: Mock,
    pub plan: Arc<Plan>,
}

impl Peer {
    /// A manager whose first `n` connects succeed and every later one fails.
    pub fn connects(n: u64) -> Self {
        let peer = Self::default();
        *peer.plan.connects_left.lock().unwrap() = Some(n);
        peer
    }

    /// A manager whose connects wait for the outcomes sent on the returned
    /// channel.
    pub fn remote() -> (Self, mpsc::UnboundedSender<bool>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let peer = Self::default();
        *peer.plan.remote.try_lock().unwrap() = Some(rx);
        (peer, tx)
    }

    /// Connections closed so far (dropped by the pool).
    pub fn closed(&self) -> u64 {
        self.mock.script.closed()
    }

    /// `connect` calls so far.
    pub fn connects_started(&self) -> u64 {
        self.mock.script.connects()
    }

    /// A connection opened outside the pool (bb8's `dedicated_connection`).
    pub async fn dedicated(&self) -> Conn {
        self.mock.connect().await.expect("the mock connects")
    }
}

/// Takes one from `n` if it is above zero.
fn take_one(n: &AtomicU64) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
        .is_ok()
}

#[async_trait]
impl ManageConnection for Peer {
    type Connection = Conn;
    type Error = MockError;

    async fn connect(&self) -> Result<Conn, MockError> {
        let mut remote = self.plan.remote.lock().await;
        if let Some(rx) = remote.as_mut() {
            if !rx.recv().await.unwrap_or(false) {
                return Err(MockError("remote said fail"));
            }
        }
        drop(remote);
        if take_one(&self.plan.failing_connects) {
            return Err(MockError("blip"));
        }
        if let Some(left) = self.plan.connects_left.lock().unwrap().as_mut() {
            if *left == 0 {
                return Err(MockError("no more connections"));
            }
            *left -= 1;
        }
        self.mock.connect().await
    }

    async fn is_valid(&self, conn: &mut Conn) -> Result<(), MockError> {
        if self.plan.hold_first_check.swap(false, Ordering::SeqCst) {
            self.plan.check_entered.notify_one();
            self.plan.check_release.notified().await;
        }
        if take_one(&self.plan.failing_checks) {
            return Err(MockError("ping failed once"));
        }
        self.mock.is_valid(conn).await
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        self.plan.broken_calls.fetch_add(1, Ordering::SeqCst);
        take_one(&self.plan.broken_answers) || self.mock.has_broken(conn)
    }

    fn needs_reset(&self, conn: &mut Conn) -> bool {
        self.mock.needs_reset(conn)
    }

    async fn reset(&self, conn: &mut Conn) -> Result<(), MockError> {
        self.mock.reset(conn).await
    }

    fn classify_error(&self, e: &MockError) -> ErrorClass {
        self.mock.classify_error(e)
    }

    async fn close(&self, conn: Conn) {
        self.mock.close(conn).await;
    }

    fn awaits_close(&self) -> bool {
        self.mock.awaits_close()
    }
}

/// A config as the peers' defaults are: validation on every checkout
/// (bb8's `test_on_check_out`, sqlx's `test_before_acquire`), no bypass.
pub fn checked(max: u32) -> pool_core::PoolConfigBuilder {
    PoolConfig::builder()
        .max_size(max)
        .validation_mode(ValidationMode::IsValid)
        .validation_bypass(std::time::Duration::ZERO)
}
