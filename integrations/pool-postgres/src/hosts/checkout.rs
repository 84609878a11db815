//! The I/O of a checkout: trying the hosts [`route`]
//! orders, and what each connect or role check tells the registry.

use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::PooledConnection;

use super::connection::HostConnection;
use super::error::HostPoolError;
use super::probe::{no_answer, probe};
use super::role::{HostStatus, SessionTarget};
use super::route::{self, AfterPoolError, Handout};
use super::{HostBackend, Inner};

impl<M: HostBackend> Inner<M> {
    /// The hosts to try for `target` on this pass, as
    /// [`route::order`] has them from every host's status now.
    fn order(&self, target: SessionTarget, second_pass: bool) -> Vec<usize> {
        let statuses: Vec<HostStatus> = (0..self.pools.len())
            .map(|i| self.registry.status(i))
            .collect();
        route::order(&statuses, target, second_pass, self.load_balance, |fit| {
            fastrand::shuffle(fit);
        })
    }

    pub(super) async fn get(
        &self,
        target: SessionTarget,
        site: &'static Location<'static>,
    ) -> Result<HostConnection<M>, HostPoolError<M::Error>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(HostPoolError::Closed);
        }
        let deadline = tokio::time::Instant::now() + self.acquire_timeout;
        let mut last_error = None;
        for &second_pass in route::passes(target) {
            for i in self.order(target, second_pass) {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let mut conn = match self.pools[i].get_for(left, site).await {
                    Ok(conn) => conn,
                    Err(error) => match route::after_pool_error(&error) {
                        AfterPoolError::Closed => return Err(HostPoolError::Closed),
                        AfterPoolError::GiveUp { busy } => {
                            if let Some(waited) = busy {
                                self.registry.exhausted(i, waited);
                            }
                            return Err(HostPoolError::Pool {
                                host: Arc::clone(&self.registry.hosts[i].addr),
                                error,
                            });
                        }
                        AfterPoolError::MarkDownAndTryNext => {
                            // The manager marked the host down when its
                            // connect failed; a fail-fast error may come
                            // without one.
                            self.registry.down(i, &error);
                            last_error = Some(error.to_string());
                            continue;
                        }
                    },
                };
                let manager = self.pools[i].manager();
                let (role, demoted) = match self.registry.status(i) {
                    HostStatus::Up(role) => (role, false),
                    // Unknown since the checkout began: ask this
                    // connection, within a check's limit.
                    _ => match tokio::time::timeout_at(
                        deadline.min(tokio::time::Instant::now() + self.schedule.limit()),
                        manager.inner.current_role(&mut conn),
                    )
                    .await
                    {
                        Err(_) => {
                            PooledConnection::discard(conn);
                            last_error = Some(no_answer(
                                &self.pools[i],
                                &self.registry,
                                i,
                                self.schedule.limit(),
                            ));
                            continue;
                        }
                        Ok(Ok(role)) => (role, self.registry.up(i, role)),
                        Ok(Err(error)) => {
                            self.registry.down(i, &error);
                            last_error = Some(error.to_string());
                            PooledConnection::discard(conn);
                            continue;
                        }
                    },
                };
                let retired = manager.inner.is_retired(&conn);
                match route::handout(target, role, second_pass, demoted, retired) {
                    Handout::Take => {
                        return Ok(HostConnection {
                            conn,
                            host: Arc::clone(&self.registry.hosts[i].addr),
                            role,
                        })
                    }
                    Handout::GiveBack => drop(conn),
                    Handout::RetireHost => {
                        manager.inner.retire_all();
                        PooledConnection::discard(conn);
                    }
                }
            }
        }
        self.registry.wake_all();
        Err(HostPoolError::NoHost {
            target,
            hosts: self.statuses(),
            last_error,
        })
    }

    pub(super) fn statuses(&self) -> Vec<(Arc<str>, HostStatus)> {
        (0..self.pools.len())
            .map(|i| {
                (
                    Arc::clone(&self.registry.hosts[i].addr),
                    self.registry.status(i),
                )
            })
            .collect()
    }

    /// Checks every host's role at once, each within a check's limit; the
    /// errors of the hosts that did not answer.
    pub(super) async fn probe_all(&self) -> Vec<(Arc<str>, String)> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let pool = pool.clone();
            let registry = Arc::clone(&self.registry);
            let limit = self.schedule.limit();
            tasks.spawn(async move { (i, probe(&pool, &registry, i, limit).await) });
        }
        let mut errors = Vec::new();
        while let Some(done) = tasks.join_next().await {
            if let Ok((i, Err(e))) = done {
                errors.push((Arc::clone(&self.registry.hosts[i].addr), e));
            }
        }
        errors
    }

    pub(super) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.registry.wake_all();
        for pool in &self.pools {
            pool.close().await;
        }
    }
}
