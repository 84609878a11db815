//! Database faults on PostgreSQL clusters the tests own: terminate, stop
//! and start, kill -9, a blackholing proxy, failover. Apart from the other
//! real-database tests so that their load does not blur the timings.
#![cfg(feature = "tokio-postgres")]

#[path = "../../../../pool-core/tests/support/mod.rs"]
mod support;

mod fault_failover;
mod fault_pg;
