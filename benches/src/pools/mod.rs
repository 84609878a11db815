//! Every pool wrapped as a [`Contestant`](crate::Contestant): the no-op ones
//! over [`FakeManager`](crate::fake::FakeManager), and the PostgreSQL ones
//! over tokio-postgres and sqlx. The peers, and sqlx (ours over a local sqlx
//! manager beside sqlx's own pool), build with the `peers` feature only.

pub mod floor;
pub mod noop;
#[cfg(feature = "peers")]
pub mod peers;
pub mod pg;
#[cfg(feature = "peers")]
pub mod sqlx;
