//! The one interface every pool is driven through.

use std::future::Future;

/// A pool under test, seen as the scenarios see it: get a guard, reach the
/// connection through it, drop it to give the connection back.
///
/// Implementations are thin: one call into the pool's own `get`, errors turned
/// into text. Every contestant pays the same wrapper cost.
pub trait Contestant: Clone + Send + Sync + 'static {
    /// The pooled connection.
    type Conn: Send;
    /// What the pool hands out; dropping it returns the connection.
    type Guard<'a>: Send + 'a
    where
        Self: 'a;

    /// Checks out a connection, within the pool's own acquire timeout.
    fn get(&self) -> impl Future<Output = Result<Self::Guard<'_>, String>> + Send + '_;

    /// The connection behind a guard.
    fn conn<'g>(guard: &'g mut Self::Guard<'_>) -> &'g mut Self::Conn;

    /// Closes the pool where it can be closed (database pools release their
    /// server connections before the next contestant starts).
    fn shutdown(self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The no-op contestants, in table order. `Floor` is the reference loop, not
/// a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// This pool (`pool-core`).
    Ours,
    /// deadpool, managed pool.
    #[cfg(feature = "peers")]
    Deadpool,
    /// bb8.
    #[cfg(feature = "peers")]
    Bb8,
    /// qp.
    #[cfg(feature = "peers")]
    Qp,
    /// mobc.
    #[cfg(feature = "peers")]
    Mobc,
    /// fastpool, bounded pool.
    #[cfg(feature = "peers")]
    Fastpool,
    /// A bare `tokio::sync::Semaphore` plus a crossbeam `ArrayQueue`.
    Floor,
    /// This pool with an `after_connect`-only hook: the check that a hook on
    /// connect costs nothing per checkout. Not in [`Kind::ALL`] (not a
    /// column of the full tables); `point` and the micro bench run it.
    OursAfterConnect,
}

impl Kind {
    /// Every no-op contestant, ours first, the floor last (without the
    /// `peers` feature: ours and the floor).
    pub const ALL: &'static [Kind] = &[
        Kind::Ours,
        #[cfg(feature = "peers")]
        Kind::Deadpool,
        #[cfg(feature = "peers")]
        Kind::Bb8,
        #[cfg(feature = "peers")]
        Kind::Qp,
        #[cfg(feature = "peers")]
        Kind::Mobc,
        #[cfg(feature = "peers")]
        Kind::Fastpool,
        Kind::Floor,
    ];

    /// Contestants run on request only, not in the full tables.
    pub const EXTRA: [Kind; 1] = [Kind::OursAfterConnect];

    /// The contestant labelled `name`, among [`Kind::ALL`] and
    /// [`Kind::EXTRA`] (a peer's label finds nothing in a build without the
    /// `peers` feature).
    pub fn from_label(name: &str) -> Option<Kind> {
        Kind::ALL
            .iter()
            .copied()
            .chain(Kind::EXTRA)
            .find(|k| k.label() == name)
    }

    /// The peers (neither ours nor the floor).
    pub fn is_peer(self) -> bool {
        !matches!(self, Kind::Ours | Kind::OursAfterConnect | Kind::Floor)
    }

    /// Column label.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            #[cfg(feature = "peers")]
            Kind::Deadpool => "deadpool",
            #[cfg(feature = "peers")]
            Kind::Bb8 => "bb8",
            #[cfg(feature = "peers")]
            Kind::Qp => "qp",
            #[cfg(feature = "peers")]
            Kind::Mobc => "mobc",
            #[cfg(feature = "peers")]
            Kind::Fastpool => "fastpool",
            Kind::Floor => "floor",
            Kind::OursAfterConnect => "ours-after-connect",
        }
    }
}
