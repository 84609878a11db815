//! Every pool wrapped as a [`Contestant`](crate::Contestant): the no-op ones
//! over [`FakeManager`](crate::fake::FakeManager), and the PostgreSQL ones
//! over tokio-postgres and sqlx.

pub mod floor;
pub mod noop;
pub mod pg;
pub mod sqlx;
