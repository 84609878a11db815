pub use super::{role_from_text, ROLE_SQL};

/// A host pool's builder over `hosts` (each `host:port` with its
/// manager), with the defaults; an empty list is refused when built.
pub fn builder<M: super::HostBackend>(
    hosts: Result<Vec<(std::sync::Arc<str>, M)>, super::HostConfigError>,
) -> super::HostPoolBuilder<M> {
    super::HostPoolBuilder::over(hosts)
}

use super::*;

/// The role checks of one kind of manager; not nameable outside the
/// crate, which seals [`HostBackend`].
#[async_trait]
pub trait Backend: ManageConnection {
    /// The role of the server a connection just opened talks to (from
    /// what it reported at startup where it can, else asked).
    async fn startup_role(&self, conn: &mut Self::Connection) -> Result<ServerRole, Self::Error>;

    /// Asks the server a connection talks to for its role now.
    async fn current_role(&self, conn: &mut Self::Connection) -> Result<ServerRole, Self::Error>;

    /// Whether a query on this connection itself saw its server turn
    /// read-only or go away.
    fn saw_server_gone(&self, _conn: &Self::Connection) -> bool {
        false
    }

    /// Whether this connection must not be handed out (retired).
    fn is_retired(&self, _conn: &Self::Connection) -> bool {
        false
    }

    /// Retires every connection opened so far.
    fn retire_all(&self) {}
}
