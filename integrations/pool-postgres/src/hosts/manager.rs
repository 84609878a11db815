//! [`HostManager`]: one host's manager, which reports what each connect
//! and each retired connection says about its server to the registry.

use std::fmt;
use std::sync::Arc;

use pool_api::{async_trait, ErrorClass, ManageConnection};

use super::registry::Registry;
use super::role::ServerRole;
use super::route;
use super::HostBackend;

/// The manager of one host's pool: the backend's manager for that host
/// alone, which tells the host pool what each connect and each retired
/// connection says about its server. Made by [`HostPoolBuilder::build`](super::HostPoolBuilder::build).
pub struct HostManager<M> {
    pub(super) inner: M,
    pub(super) registry: Arc<Registry>,
    pub(super) index: usize,
}

impl<M> HostManager<M> {
    /// The manager of this host's connections.
    pub fn backend(&self) -> &M {
        &self.inner
    }

    /// `host:port`.
    pub fn host(&self) -> &str {
        &self.registry.hosts[self.index].addr
    }
}

impl<M: HostBackend> HostManager<M> {
    /// Records `role` for this host, retiring its connections when it is
    /// no longer writable but was.
    fn observed(&self, role: ServerRole) {
        if self.registry.up(self.index, role) {
            self.inner.retire_all();
        }
    }
}

impl<M: fmt::Debug> fmt::Debug for HostManager<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostManager")
            .field("host", &self.host())
            .field("backend", &self.inner)
            .finish()
    }
}

#[async_trait]
impl<M: HostBackend> ManageConnection for HostManager<M> {
    type Connection = M::Connection;
    type Error = M::Error;

    async fn connect(&self) -> Result<M::Connection, M::Error> {
        let mut conn = match self.inner.connect().await {
            Ok(conn) => conn,
            Err(e) => {
                if route::connect_failure_marks_down(self.inner.classify_error(&e)) {
                    self.registry.down(self.index, &e);
                }
                return Err(e);
            }
        };
        match self.inner.startup_role(&mut conn).await {
            Ok(role) => {
                self.observed(role);
                Ok(conn)
            }
            Err(e) => {
                self.registry.down(self.index, &e);
                Err(e)
            }
        }
    }

    async fn is_valid(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
        self.inner.is_valid(conn).await
    }

    fn has_broken(&self, conn: &mut M::Connection) -> bool {
        if self.inner.saw_server_gone(conn) {
            self.registry.suspect(self.index);
        }
        self.inner.has_broken(conn)
    }

    /// The backend's capacity refusals stay capacity refusals; every
    /// other error is transient here, the backend's permanent ones too: a
    /// host's pool keeps retrying a host that refused, as it did before
    /// the classifier had a permanent class.
    fn classify_error(&self, error: &M::Error) -> ErrorClass {
        route::host_error_class(self.inner.classify_error(error))
    }

    fn check(&self) -> Result<(), M::Error> {
        self.inner.check()
    }

    /// This host's `host:port`.
    fn target(&self) -> Option<String> {
        Some(self.host().to_owned())
    }

    async fn close(&self, conn: M::Connection) {
        self.inner.close(conn).await;
    }

    fn awaits_close(&self) -> bool {
        self.inner.awaits_close()
    }

    fn needs_reset(&self, conn: &mut M::Connection) -> bool {
        self.inner.needs_reset(conn)
    }

    async fn reset(&self, conn: &mut M::Connection) -> Result<(), M::Error> {
        self.inner.reset(conn).await
    }
}
