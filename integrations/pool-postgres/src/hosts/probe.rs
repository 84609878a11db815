//! The I/O of the role checks: one prober task per host, each check on
//! one of the host's pooled connections.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use pool_api::PoolError;
use tokio::time::Instant;

use crate::{Pool, PooledConnection};

use super::manager::HostManager;
use super::registry::Registry;
use super::role::Schedule;
use super::route;
use super::{HostBackend, Inner};

/// Clears host `index`'s `probing` flag however its prober ends: made
/// before the spawn and moved into the task's future, so a future dropped
/// midway or before its first poll (its runtime shut down) clears it too,
/// and the next checkout starts another prober.
pub(super) struct Probing {
    registry: Arc<Registry>,
    index: usize,
}

impl Drop for Probing {
    fn drop(&mut self) {
        // Relaxed: a flag only `ensure_probers` sets and this clears; a
        // checkout that reads it stale starts the prober at its next call.
        self.registry.hosts[self.index]
            .probing
            .store(false, Ordering::Relaxed);
    }
}

impl<M: HostBackend> Inner<M> {
    /// Starts a prober on the current runtime for every host that has none
    /// running (at the build; again after the runtime they ran on ended).
    /// Outside a tokio runtime nothing starts.
    pub(super) fn ensure_probers(self: &Arc<Self>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        for (index, host) in self.registry.hosts.iter().enumerate() {
            // Relaxed: see `Probing`; two checkouts racing see one `false`
            // from the swap.
            if host.probing.load(Ordering::Relaxed) || host.probing.swap(true, Ordering::Relaxed) {
                continue;
            }
            let guard = Probing {
                registry: Arc::clone(&self.registry),
                index,
            };
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                // The guard clears the flag.
                return;
            };
            runtime.spawn(prober(
                guard,
                Arc::downgrade(self),
                Arc::clone(&self.registry),
                index,
                self.schedule,
            ));
        }
    }
}

/// Checks host `i`'s role on one of its pool's connections (an idle one,
/// or a new one), all within `limit`; a host whose every connection is in
/// use is left as it is.
pub(super) async fn probe<M: HostBackend>(
    pool: &Pool<HostManager<M>>,
    registry: &Registry,
    i: usize,
    limit: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    let mut conn = match pool.try_get() {
        Some(conn) => conn,
        None => {
            let state = pool.state();
            if route::all_in_use(&state) {
                return Ok(());
            }
            // The pool's own wait is bounded by `limit` too; the outer
            // bound also covers what it runs before it starts waiting.
            match tokio::time::timeout_at(deadline, pool.get_timeout(limit)).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(PoolError::Timeout { state, .. })) if route::all_in_use(&state) => {
                    return Ok(());
                }
                Ok(Err(PoolError::Timeout { .. })) | Err(_) => {
                    return Err(no_answer(pool, registry, i, limit));
                }
                Ok(Err(e)) => {
                    registry.down(i, &e);
                    return Err(e.to_string());
                }
            }
        }
    };
    let manager = pool.manager();
    match tokio::time::timeout_at(deadline, manager.inner.current_role(&mut conn)).await {
        Ok(Ok(role)) => {
            if registry.up(i, role) {
                manager.inner.retire_all();
            }
            Ok(())
        }
        Ok(Err(e)) => {
            registry.down(i, &e);
            PooledConnection::discard(conn);
            Err(e.to_string())
        }
        Err(_) => {
            // Dropped mid-query: the manager marked the connection so
            // that its close does not wait for the answer.
            PooledConnection::discard(conn);
            Err(no_answer(pool, registry, i, limit))
        }
    }
}

/// Host `i` did not answer a check in time: it is down, and every
/// connection to it is retired (idle ones now, ones in use when they come
/// back), since they may sit on sockets that will never answer; the next
/// check opens a new one. Returns the error, as text.
pub(super) fn no_answer<M: HostBackend>(
    pool: &Pool<HostManager<M>>,
    registry: &Registry,
    i: usize,
    limit: Duration,
) -> String {
    let error = format!("no answer to the role check within {limit:?}");
    registry.down(i, &error);
    pool.soft_evict_all();
    error
}

/// Checks host `index` at each of its schedule's ticks, and when woken, at
/// most once per gap; each check bounded by the schedule's limit. Ends when
/// the host pool is dropped or closed; `_probing` clears the host's flag
/// however it ends.
pub(super) async fn prober<M: HostBackend>(
    _probing: Probing,
    pool: Weak<Inner<M>>,
    registry: Arc<Registry>,
    index: usize,
    mut schedule: Schedule,
) {
    let wake = &registry.hosts[index].wake;
    loop {
        let now = Instant::now();
        let tick = schedule.next_tick(now);
        if tick > now {
            // Woken before the tick: a check was asked for.
            let asked = tokio::time::timeout_at(tick, wake.notified()).await.is_ok();
            if asked {
                tokio::time::sleep_until(schedule.next_asked(Instant::now())).await;
            }
        }
        let Some(inner) = pool.upgrade() else { return };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        schedule.start(Instant::now());
        let _ = probe(&inner.pools[index], &registry, index, schedule.limit()).await;
        registry.checked(index);
        drop(inner);
    }
}
