//! What sqlx's own pool tests expect, shared by their port on the mock
//! (pool-core's `compat` tests) and on PostgreSQL (pool-sqlx's `sqlx`
//! tests).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pool_core::{ConnectionInfo, ManageConnection, Pool};

/// What a callback saw of the connection last.
pub type Seen = Arc<Mutex<Option<ConnectionInfo>>>;

/// `(connection, before_acquire calls, after_release calls)` seen by each
/// of eleven checkouts of a pool of one, as sqlx expects them: a new
/// connection is seen by neither hook at its first checkout; a rejection
/// closes it and the caller gets a new one.
pub const CALLBACK_PATTERN: [(u64, usize, usize); 11] = [
    (0, 0, 0),
    (0, 1, 1),
    (0, 2, 2),
    (1, 0, 0),
    (1, 1, 1),
    (1, 2, 2),
    (1, 3, 3),
    (2, 0, 0),
    (2, 1, 1),
    (2, 2, 2),
    (3, 0, 0),
];

/// `test_connection_maintenance`'s pool: `min_size` 3, connections
/// retired at one second, housekeeping every 100 ms. (sqlx retires at
/// 400 ms and takes its two connections whenever its sleep ends, which can
/// fall while the idle ones are being replaced: sqlx keeps the test
/// ignored. Here the checkouts wait for a set just renewed.)
pub fn maintained(config: pool_core::PoolConfigBuilder) -> pool_core::PoolConfigBuilder {
    config
        .min_size(3)
        .max_lifetime(Duration::from_secs(1))
        .max_lifetime_jitter(0.0)
        .housekeeping_period(Duration::from_millis(100))
}

/// Whether the idle connections are `min_size`'s three, all opened in the
/// last 300 ms (so 700 ms from retiring). Looks through `retain`, which
/// keeps them all.
pub fn renewed<M: ManageConnection>(pool: &Pool<M>) -> bool {
    let (mut young, mut old) = (0, 0);
    pool.retain(|_, info| {
        if info.age < Duration::from_millis(300) {
            young += 1;
        } else {
            old += 1;
        }
        true
    });
    (young, old) == (3, 0)
}
