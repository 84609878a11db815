//! What a [`HostPool`](super::HostPool) knows about each host, and the
//! events its changes send.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{broadcast, watch, Notify};

use super::role::{HostRecord, HostStatus, ServerRole};

impl HostStatus {
    fn to_u8(self) -> u8 {
        match self {
            Self::Unknown => 0,
            Self::Down => 1,
            Self::Up(ServerRole::Primary) => 2,
            Self::Up(ServerRole::ReadOnlyPrimary) => 3,
            Self::Up(ServerRole::Standby) => 4,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Down,
            2 => Self::Up(ServerRole::Primary),
            3 => Self::Up(ServerRole::ReadOnlyPrimary),
            4 => Self::Up(ServerRole::Standby),
            _ => Self::Unknown,
        }
    }

    /// The role, when the host is up.
    pub fn role(self) -> Option<ServerRole> {
        match self {
            Self::Up(role) => Some(role),
            _ => None,
        }
    }
}

/// What happened to a host pool or one of its hosts, as sent to
/// [`HostPool::subscribe`](super::HostPool::subscribe) and logged through
/// `tracing` (target `pool_postgres::hosts`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostEvent {
    /// A host was reached (first contact, or back after being down), with
    /// its role. Logged at `INFO`.
    HostUp {
        /// `host:port`.
        host: Arc<str>,
        /// Its role now.
        role: ServerRole,
    },
    /// A connect or a check of a host failed. Logged at `WARN`.
    HostDown {
        /// `host:port`.
        host: Arc<str>,
        /// The error, as text.
        error: Arc<str>,
    },
    /// A host's role is not what it was last seen to be: a standby promoted
    /// ([`is_promotion`](Self::is_promotion)), a primary come back as a
    /// standby or made read-only ([`is_demotion`](Self::is_demotion)).
    /// Logged at `WARN`.
    RoleChanged {
        /// `host:port`.
        host: Arc<str>,
        /// The role it had.
        from: ServerRole,
        /// The role it has now.
        to: ServerRole,
    },
    /// Every host is down. Logged at `ERROR`.
    Unreachable {
        /// The last error, as text.
        error: Arc<str>,
    },
    /// A host is up again after every host was down. Logged at `INFO`.
    Recovered {
        /// The host that answered first.
        host: Arc<str>,
    },
    /// A checkout from a host waited out its time limit: every connection
    /// the host's bound allows was in use. Logged at `WARN`.
    Exhausted {
        /// `host:port`.
        host: Arc<str>,
        /// How long the checkout waited.
        waited: Duration,
    },
}

impl HostEvent {
    /// Whether this is a writable role reached from a read-only one.
    pub fn is_promotion(&self) -> bool {
        matches!(self, Self::RoleChanged { from, to, .. } if !from.is_writable() && to.is_writable())
    }

    /// Whether this is a read-only role reached from a writable one.
    pub fn is_demotion(&self) -> bool {
        matches!(self, Self::RoleChanged { from, to, .. } if from.is_writable() && !to.is_writable())
    }

    fn log(&self) {
        match self {
            Self::HostUp { host, role } => {
                tracing::info!(target: TARGET, %host, %role, "database host up");
            }
            Self::HostDown { host, error } => {
                tracing::warn!(target: TARGET, %host, %error, "database host down");
            }
            Self::RoleChanged { host, from, to } => {
                tracing::warn!(target: TARGET, %host, %from, %to, "database host changed role");
            }
            Self::Unreachable { error } => {
                tracing::error!(target: TARGET, %error, "every database host is down");
            }
            Self::Recovered { host } => {
                tracing::info!(target: TARGET, %host, "database reachable again");
            }
            Self::Exhausted { host, waited } => {
                tracing::warn!(
                    target: TARGET,
                    %host,
                    ?waited,
                    "database host pool exhausted: every connection in use"
                );
            }
        }
    }
}

/// The `tracing` target of the events.
const TARGET: &str = "pool_postgres::hosts";

/// How many events a subscriber may fall behind before it misses some.
pub(super) const EVENT_CAPACITY: usize = 256;

/// One host's status.
#[derive(Debug)]
pub(super) struct HostState {
    pub(super) addr: Arc<str>,
    /// A [`HostStatus`], read without the lock on every checkout.
    status: AtomicU8,
    /// What is known and was announced; changed under the lock so that
    /// events come out in the order of the changes.
    known: Mutex<Known>,
    /// Wakes this host's prober: a check is asked for.
    pub(super) wake: Notify,
    /// A prober task is running for this host. Set by the host pool when
    /// it spawns one; cleared by the guard in the task's future, however
    /// the task ends (a runtime shut down drops it midway, or before its
    /// first poll), so that the next checkout starts another.
    pub(super) probing: AtomicBool,
    /// A check of this host has ended (answered, failed or timed out).
    checked: AtomicBool,
}

#[derive(Debug)]
struct Known {
    record: HostRecord,
    /// The error of the last failed connect or check, as text.
    last_error: Option<Arc<str>>,
}

/// Every host's status, the event channel, and the check signals.
#[derive(Debug)]
pub(super) struct Registry {
    pub(super) hosts: Vec<HostState>,
    events: broadcast::Sender<HostEvent>,
    /// Whether `Unreachable` was sent and no host came up since.
    unreachable: Mutex<bool>,
    /// Counts the checks that ended, for whoever waits on the first ones.
    progress: watch::Sender<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    pub(super) fn new(addrs: Vec<Arc<str>>) -> Self {
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Self {
            hosts: addrs
                .into_iter()
                .map(|addr| HostState {
                    addr,
                    status: AtomicU8::new(HostStatus::Unknown.to_u8()),
                    known: Mutex::new(Known {
                        record: HostRecord::new(),
                        last_error: None,
                    }),
                    wake: Notify::new(),
                    probing: AtomicBool::new(false),
                    checked: AtomicBool::new(false),
                })
                .collect(),
            events,
            unreachable: Mutex::new(false),
            progress: watch::Sender::new(0),
        }
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<HostEvent> {
        self.events.subscribe()
    }

    /// Host `i`'s status now.
    pub(super) fn status(&self, i: usize) -> HostStatus {
        // Relaxed: a lone value; a checkout that reads a stale one checks
        // again after it got its connection.
        HostStatus::from_u8(self.hosts[i].status.load(Ordering::Relaxed))
    }

    fn send(&self, event: HostEvent) {
        event.log();
        // No subscriber is not an error.
        let _ = self.events.send(event);
    }

    /// Host `i` answered with `role`. Returns whether that is a demotion:
    /// the host was last seen writable and is not now.
    pub(super) fn up(&self, i: usize, role: ServerRole) -> bool {
        let host = &self.hosts[i];
        let mut known = lock(&host.known);
        let t = known.record.answered(role);
        host.status
            .store(known.record.routing.to_u8(), Ordering::Relaxed);
        if let Some(role) = t.up {
            self.send(HostEvent::HostUp {
                host: Arc::clone(&host.addr),
                role,
            });
        }
        if let Some((from, to)) = t.role_changed {
            self.send(HostEvent::RoleChanged {
                host: Arc::clone(&host.addr),
                from,
                to,
            });
        }
        drop(known);
        let mut unreachable = lock(&self.unreachable);
        if *unreachable {
            *unreachable = false;
            self.send(HostEvent::Recovered {
                host: Arc::clone(&host.addr),
            });
        }
        t.demoted
    }

    /// A connect to or a check of host `i` failed with `error` (or ran out
    /// of time).
    pub(super) fn down(&self, i: usize, error: &dyn std::fmt::Display) {
        let host = &self.hosts[i];
        let error: Arc<str> = error.to_string().into();
        let mut known = lock(&host.known);
        let t = known.record.failed();
        known.last_error = Some(Arc::clone(&error));
        host.status
            .store(known.record.routing.to_u8(), Ordering::Relaxed);
        drop(known);
        if !t.down {
            return;
        }
        self.send(HostEvent::HostDown {
            host: Arc::clone(&host.addr),
            error: Arc::clone(&error),
        });
        let all_down = self
            .hosts
            .iter()
            .all(|h| lock(&h.known).record.announced == HostStatus::Down);
        let mut unreachable = lock(&self.unreachable);
        if all_down && !*unreachable {
            *unreachable = true;
            self.send(HostEvent::Unreachable { error });
        }
    }

    /// A connection to host `i` saw an error that says its server changed:
    /// its role is unknown until checked again. Announces nothing (the
    /// check will), and wakes the host's prober.
    pub(super) fn suspect(&self, i: usize) {
        let host = &self.hosts[i];
        {
            let mut known = lock(&host.known);
            known.record.suspected();
            host.status
                .store(known.record.routing.to_u8(), Ordering::Relaxed);
        }
        host.wake.notify_one();
    }

    /// Asks every host's prober for a check (each runs on its own: none
    /// waits for another).
    pub(super) fn wake_all(&self) {
        for host in &self.hosts {
            host.wake.notify_one();
        }
    }

    /// A check of host `i` ended, whatever it found.
    pub(super) fn checked(&self, i: usize) {
        // Relaxed: read after the progress signal, whose channel orders it.
        self.hosts[i].checked.store(true, Ordering::Relaxed);
        self.progress.send_modify(|n| *n += 1);
    }

    /// Whether a check of host `i` has ended.
    pub(super) fn was_checked(&self, i: usize) -> bool {
        self.hosts[i].checked.load(Ordering::Relaxed)
    }

    /// The error of host `i`'s last failed connect or check.
    pub(super) fn last_error(&self, i: usize) -> Option<Arc<str>> {
        lock(&self.hosts[i].known).last_error.clone()
    }

    /// A receiver that sees each check end.
    pub(super) fn progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    /// A checkout from host `i` waited `waited` and found every connection
    /// in use.
    pub(super) fn exhausted(&self, i: usize, waited: Duration) {
        self.send(HostEvent::Exhausted {
            host: Arc::clone(&self.hosts[i].addr),
            waited,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(n: usize) -> Registry {
        Registry::new((0..n).map(|i| Arc::from(format!("h{i}:5432"))).collect())
    }

    fn drain(rx: &mut broadcast::Receiver<HostEvent>) -> Vec<HostEvent> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn status_round_trips_through_its_byte() {
        for s in [
            HostStatus::Unknown,
            HostStatus::Down,
            HostStatus::Up(ServerRole::Primary),
            HostStatus::Up(ServerRole::ReadOnlyPrimary),
            HostStatus::Up(ServerRole::Standby),
        ] {
            assert_eq!(HostStatus::from_u8(s.to_u8()), s);
        }
    }

    #[test]
    fn a_failover_reads_as_down_promoted_unreachable_recovered() {
        let r = registry(2);
        let mut rx = r.subscribe();
        r.up(0, ServerRole::Primary);
        r.up(1, ServerRole::Standby);
        r.up(1, ServerRole::Standby);
        let first = drain(&mut rx);
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(matches!(
            first[0],
            HostEvent::HostUp {
                role: ServerRole::Primary,
                ..
            }
        ));

        r.down(0, &"connection refused");
        r.down(0, &"connection refused");
        r.up(1, ServerRole::Primary);
        let failover = drain(&mut rx);
        assert_eq!(failover.len(), 2, "{failover:?}");
        assert!(matches!(&failover[0], HostEvent::HostDown { host, .. } if &**host == "h0:5432"));
        assert!(failover[1].is_promotion(), "{failover:?}");
        assert_eq!(r.status(1), HostStatus::Up(ServerRole::Primary));

        r.down(1, &"gone");
        let lost = drain(&mut rx);
        assert!(
            matches!(
                lost[..],
                [HostEvent::HostDown { .. }, HostEvent::Unreachable { .. }]
            ),
            "{lost:?}"
        );

        // The old primary comes back as a standby: up, demoted, recovered.
        r.up(0, ServerRole::Standby);
        let back = drain(&mut rx);
        assert!(
            matches!(
                back[0],
                HostEvent::HostUp {
                    role: ServerRole::Standby,
                    ..
                }
            ),
            "{back:?}"
        );
        assert!(back[1].is_demotion(), "{back:?}");
        assert!(matches!(&back[2], HostEvent::Recovered { host } if &**host == "h0:5432"));
        assert_eq!(back.len(), 3);
    }

    #[test]
    fn a_suspect_host_is_woken_for_a_check_and_the_last_error_is_kept() {
        let r = registry(2);
        r.down(1, &"refused");
        assert_eq!(r.last_error(1).as_deref(), Some("refused"));
        assert_eq!(r.last_error(0), None);
        r.suspect(0);
        // The permit waits for the prober: its next wait ends at once.
        let woken = r.hosts[0].wake.notified();
        let mut woken = std::pin::pin!(woken);
        assert!(woken.as_mut().enable(), "host 0 was woken");
        let other = r.hosts[1].wake.notified();
        let mut other = std::pin::pin!(other);
        assert!(!other.as_mut().enable(), "host 1 was not");
        let progress = r.progress();
        assert!(!r.was_checked(1));
        r.checked(1);
        assert!(r.was_checked(1));
        assert!(progress.has_changed().unwrap());
    }

    #[test]
    fn a_suspect_host_is_unknown_until_checked_and_announces_nothing() {
        let r = registry(1);
        r.up(0, ServerRole::Primary);
        let mut rx = r.subscribe();
        r.suspect(0);
        assert_eq!(r.status(0), HostStatus::Unknown);
        assert!(drain(&mut rx).is_empty());
        r.up(0, ServerRole::ReadOnlyPrimary);
        let events = drain(&mut rx);
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].is_demotion());
        // A down host stays down when suspected.
        r.down(0, &"x");
        r.suspect(0);
        assert_eq!(r.status(0), HostStatus::Down);
    }
}
