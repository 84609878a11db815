//! What a host pool hands out and lists.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use pool_api::PoolState;

use crate::PooledConnection;

use super::manager::HostManager;
use super::HostBackend;
use super::{HostStatus, ServerRole};

/// One host of a [`HostPool`](super::HostPool), as [`HostPool::hosts`](super::HostPool::hosts) lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// `host:port`.
    pub host: Arc<str>,
    /// What the host pool last learnt about it.
    pub status: HostStatus,
    /// Its pool's counts.
    pub state: PoolState,
}

/// A connection checked out of a [`HostPool`](super::HostPool): dereferences to the
/// manager's connection (a `PgClient`, a `PgConnection`); dropping it
/// returns it to its host's pool.
///
/// Its own operations are associated functions
/// (`HostConnection::host(&conn)`), so that they never hide the
/// connection's methods of the same name.
#[must_use = "dropping the guard returns the connection to its host's pool at once"]
pub struct HostConnection<M: HostBackend> {
    pub(super) conn: PooledConnection<HostManager<M>>,
    pub(super) host: Arc<str>,
    pub(super) role: ServerRole,
}

impl<M: HostBackend> HostConnection<M> {
    /// `host:port` of its server.
    pub fn host(this: &Self) -> &str {
        &this.host
    }

    /// Its server's role when it was checked out.
    pub fn role(this: &Self) -> ServerRole {
        this.role
    }

    /// The pooled connection itself.
    pub fn into_pooled(this: Self) -> PooledConnection<HostManager<M>> {
        this.conn
    }
}

impl<M: HostBackend> fmt::Debug for HostConnection<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostConnection")
            .field("host", &self.host)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl<M: HostBackend> Deref for HostConnection<M> {
    type Target = M::Connection;

    fn deref(&self) -> &M::Connection {
        &self.conn
    }
}

impl<M: HostBackend> DerefMut for HostConnection<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self.conn
    }
}
