//! Failover: which errors say a server is no longer usable, and the
//! per-host epoch that retires every connection to such a server.
//!
//! Each connection remembers the epoch of its server when it connected. A
//! query error through the pooled client whose SQLSTATE says the server
//! turned read-only (`25006`) or is shutting down or gone (`57P01`,
//! `57P02`, `57P03`, class `08`) marks that connection and moves its
//! server's epoch on; every connection that remembers an older epoch is then
//! broken (`has_broken`) and fails its validation (`is_valid`), so the pool
//! replaces it, and a new connect picks a server again (with several hosts
//! and `target_session_attrs=read-write`, one that accepts writes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_postgres::error::SqlState;

/// Whether `error` says the server this connection talks to cannot take
/// further work: read-only (`25006`), shutting down or gone (`57P01`
/// admin shutdown, `57P02` crash shutdown, `57P03` cannot connect now), or a
/// connection exception (class `08`).
pub(super) fn is_server_gone(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(is_server_gone_code)
}

/// As [`is_server_gone`], for a SQLSTATE.
pub(super) fn is_server_gone_code(code: &SqlState) -> bool {
    *code == SqlState::READ_ONLY_SQL_TRANSACTION
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || code.code().starts_with("08")
}

/// The epochs of the servers a manager has connected to, by server key.
#[derive(Debug, Default)]
pub(super) struct HostEpochs {
    hosts: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl HostEpochs {
    /// The mark of a connection just opened to the server `key`.
    pub(super) fn mark(&self, key: String) -> HostMark {
        let epoch = {
            // A poisoned map is still a valid map: keep using it.
            let mut hosts = self
                .hosts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(hosts.entry(key).or_default())
        };
        // Relaxed: the epoch is a lone counter that publishes no other data;
        // a connection that reads an old value is retired one check later.
        let seen = epoch.load(Ordering::Relaxed);
        HostMark {
            epoch,
            seen,
            gone: AtomicBool::new(false),
        }
    }

    /// Moves every server's epoch on: every connection opened so far is
    /// retired.
    pub(super) fn retire_all(&self) {
        let hosts = self
            .hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for epoch in hosts.values() {
            // Relaxed: see `mark`.
            epoch.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What a connection knows about its server's epoch.
#[derive(Debug)]
pub(super) struct HostMark {
    epoch: Arc<AtomicU64>,
    seen: u64,
    /// This connection saw a server-gone error. Relaxed: read by the pool
    /// after the connection came back, which the return orders.
    gone: AtomicBool,
}

impl HostMark {
    /// Marks this connection and retires every connection to its server
    /// that connected before now (once per epoch: a second error from the
    /// same generation does not retire the connections opened since).
    pub(super) fn server_gone(&self) {
        self.gone.store(true, Ordering::Relaxed);
        // Relaxed: see `HostEpochs::mark`.
        let _ = self.epoch.compare_exchange(
            self.seen,
            self.seen.wrapping_add(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Whether a query on this connection itself saw a server-gone error.
    pub(super) fn saw_server_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// Whether this connection saw a server-gone error or its server's
    /// epoch moved on since it connected.
    pub(super) fn is_retired(&self) -> bool {
        self.gone.load(Ordering::Relaxed) || self.epoch.load(Ordering::Relaxed) != self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_that_retire_a_server() {
        for code in [
            "25006", "57P01", "57P02", "57P03", "08000", "08006", "08P01",
        ] {
            assert!(is_server_gone_code(&SqlState::from_code(code)), "{code}");
        }
        for code in ["23505", "40001", "57014", "42P01", "25P02"] {
            assert!(!is_server_gone_code(&SqlState::from_code(code)), "{code}");
        }
    }

    #[test]
    fn an_error_retires_the_older_connections_of_its_host_only() {
        let epochs = HostEpochs::default();
        let a1 = epochs.mark("a".into());
        let a2 = epochs.mark("a".into());
        let b1 = epochs.mark("b".into());
        assert!(!a1.is_retired() && !a2.is_retired() && !b1.is_retired());
        a1.server_gone();
        assert!(a1.is_retired());
        assert!(a2.is_retired(), "the host's other connection is retired");
        assert!(!b1.is_retired(), "another host is untouched");
        let a3 = epochs.mark("a".into());
        assert!(!a3.is_retired(), "a connection opened since is fine");
        // A late error from the old generation does not retire the new one.
        a2.server_gone();
        assert!(!a3.is_retired());
        a3.server_gone();
        assert!(a3.is_retired());
    }

    #[test]
    fn retire_all_retires_every_host_until_the_next_connect() {
        let epochs = HostEpochs::default();
        let a = epochs.mark("a".into());
        let b = epochs.mark("b".into());
        epochs.retire_all();
        assert!(a.is_retired() && b.is_retired());
        assert!(!epochs.mark("a".into()).is_retired());
    }
}
