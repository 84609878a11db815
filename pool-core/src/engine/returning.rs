//! A connection on its way back to the idle set: reset (or shown to the
//! `after_release` hook, or pinged) in a task of its own, and counted
//! meanwhile as supply for the callers waiting ([`Returning`]).
//!
//! A dirty return (or any, with an `after_release` hook) is reset in flight
//! by [`reset_then_deliver`], in a task of its own, and then delivered
//! (`delivery.rs`).
//!
//! # On the way back
//!
//! A connection in such a task (or in a keepalive ping) is not idle, yet
//! it is about to be: a caller that queues meanwhile, finding a free slot,
//! would open a second connection beside it, and the one coming back would
//! then sit idle (on two workers with a `before_acquire` hook, a `get()`
//! right after a return did so about once in sixty). A [`Returning`] counts
//! it as supply from before the task is spawned: the connectors' demand
//! (`Engine::demand`) is the callers waiting less the connections on their
//! way back, so the caller waits for this one, delivered to it as soon as
//! its step ends. Only for a short while ([`RETURN_GRACE`]): a step that
//! takes longer (a peer that stopped answering; each step is cut off only
//! at `validation_timeout`) stops counting, and the callers get connects
//! as if it were not there. When it stops counting (delivered, closed, past
//! the grace) the demand is looked at again: decrement, then the fence of
//! `request_connections`, a store-buffering pair with a caller queuing, as
//! for a leaving connector (`Connector` in `engine/demand.rs`).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use pool_api::{ConnectionInfo, ManageConnection};

use super::in_flight::Floating;
use super::Engine;
use crate::stats::Reason;

/// How long a connection on its way back counts as supply for the callers
/// waiting (see "On the way back"): about what a connect to a nearby
/// server takes. A reset or hook still running after it is more likely
/// stuck than slow, and waiting on it would cost the callers more than a
/// connect.
pub(crate) const RETURN_GRACE: Duration = Duration::from_millis(50);

/// A connection on its way back to the idle set, counted as supply (see
/// "On the way back"). Made before the task that carries the connection
/// is spawned and moved into it, so a task dropped unpolled stops counting
/// it too.
pub(crate) struct Returning<M: ManageConnection> {
    shared: Arc<Engine<M>>,
    /// Still counted.
    counted: bool,
}

impl<M: ManageConnection> Returning<M> {
    pub(crate) fn new(shared: Arc<Engine<M>>) -> Self {
        shared.connector.returning_started();
        Self {
            shared,
            counted: true,
        }
    }

    /// Stops counting the connection, and looks at the demand again: a
    /// caller that queued counting on it may need a connect now.
    fn end(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.shared.connector.returning_ended();
            self.shared.request_connections();
        }
    }

    /// Runs `step` (a reset, a hook, a ping), counting the connection as
    /// supply for at most [`RETURN_GRACE`] of it.
    pub(crate) async fn within_grace<F: Future>(&mut self, step: F) -> F::Output {
        let mut step = pin!(step);
        let mut grace = pin!(tokio::time::sleep(RETURN_GRACE));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = step.as_mut().poll(cx) {
                return Poll::Ready(out);
            }
            // The grace's timer only once the step had to wait.
            if self.counted && grace.as_mut().poll(cx).is_ready() {
                self.end();
            }
            Poll::Pending
        })
        .await
    }
}

impl<M: ManageConnection> Drop for Returning<M> {
    fn drop(&mut self) {
        self.end();
    }
}

/// Resets a returned connection and runs the `after_release` hook, then
/// delivers it; any failure drops `conn`, which closes it. `supply`
/// counts it for the callers waiting meanwhile, until it is delivered or
/// closed (or past the grace).
pub(super) async fn reset_then_deliver<M: ManageConnection>(
    conn: Floating<M>,
    mut supply: Returning<M>,
    dirty: bool,
    held_for: Duration,
) {
    let mut conn = conn;
    let kept = supply
        .within_grace(return_steps(&mut conn, dirty, held_for))
        .await;
    if kept {
        conn.shared().clone().deliver(conn.land());
    } else {
        drop(conn); // closes it, under the reason it carries
    }
    // Only now: a caller that queued while it came back was handed it, and
    // one that queues from here on sees no supply.
    drop(supply);
}

/// The return's steps, each within `validation_timeout`: the reset (when
/// `dirty`), then the `after_release` hook; whether the connection is kept.
async fn return_steps<M: ManageConnection>(
    conn: &mut Floating<M>,
    dirty: bool,
    held_for: Duration,
) -> bool {
    let shared = conn.shared().clone();
    let limit = shared.config.validation_timeout();
    let name = shared.config.name();
    if dirty {
        match tokio::time::timeout(limit, shared.manager.reset(conn.conn_mut())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(pool = name, error = %pool_api::error_chain::ErrorChain(&e), "reset failed; closing connection");
                return false; // `conn` closes it (ResetFailed)
            }
            Err(_) => {
                tracing::warn!(pool = name, timeout = ?limit, "reset timed out; closing connection");
                return false;
            }
        }
    }
    if let Some(hooks) = shared.return_hook() {
        let info = ConnectionInfo::new(shared.clock.now().since(conn.entry().created_at), held_for);
        conn.closes_as(Reason::Hook);
        match tokio::time::timeout(limit, hooks.after_release(conn.conn_mut(), info)).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return false,
            Ok(Err(e)) => {
                tracing::warn!(pool = name, error = %e, "after_release hook failed; closing connection");
                return false;
            }
            Err(_) => {
                tracing::warn!(
                    pool = name,
                    "after_release hook timed out; closing connection"
                );
                return false;
            }
        }
    }
    true
}
