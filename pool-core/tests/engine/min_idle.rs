//! `min_idle`: idle connections kept ready, topped up in the
//! background by checkouts and by the housekeeper, never above `max_size`;
//! the ones above it retire by `idle_timeout`. On tokio's paused clock.

use std::time::Duration;

use crate::support;
use crate::support::{assert_bounds, config, until};
use pool_core::PoolConfig;

#[tokio::test(start_paused = true)]
async fn checkouts_top_up_idle_connections_in_the_background() {
    let (mock, pool) = support::pool(
        config(6)
            .min_idle(2)
            .idle_timeout(Duration::from_secs(60))
            .housekeeping_period(Duration::from_secs(1)),
    )
    .await;
    // The housekeeper tops up to two idle.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(pool.state().idle, 2, "{:?}", pool.state());

    let mut held = Vec::new();
    for taken in 1..=4u32 {
        let connects = mock.script.connects();
        held.push(pool.get().await.unwrap());
        // Served from the idle ones: no connect on the caller's path.
        assert_eq!(mock.script.connects(), connects, "checkout {taken}");
        // Topped up in the background, within max_size.
        let want = 2.min(6 - taken);
        until(|| pool.state().idle == want && pool.state().opening == 0).await;
        let s = pool.state();
        assert_eq!(s.in_use, taken);
        assert_eq!(s.idle, 2.min(6 - taken), "{s:?}");
        assert_bounds(&pool);
    }
    // At max_size: in use 4 + idle 2; one more checkout cannot be topped up.
    held.push(pool.get().await.unwrap());
    until(|| pool.state().idle == 1 && pool.state().opening == 0).await;
    let s = pool.state();
    assert_eq!((s.in_use, s.idle, s.total), (5, 1, 6), "{s:?}");
    assert!(mock.script.max_alive() <= 6);

    // All back: the idle ones above min_idle retire by idle_timeout, the
    // last two stay.
    drop(held);
    assert_eq!(pool.state().idle, 6);
    tokio::time::sleep(Duration::from_secs(62)).await;
    let s = pool.state();
    assert_eq!((s.idle, s.total), (2, 2), "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn min_idle_above_max_size_is_a_config_error() {
    let err = PoolConfig::builder()
        .max_size(4)
        .min_idle(5)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "min_idle");
    assert_eq!(
        err.to_string(),
        "invalid pool config: `min_idle` must not exceed max_size"
    );
    assert_eq!(PoolConfig::default().min_idle(), 0);
    assert!(PoolConfig::default().fail_fast());
}
