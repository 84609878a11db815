//! Waiters are served first come, first served, by a direct handoff that
//! wakes them (no polling).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pool_core::Pool;
use support::{config, until, Mock};

#[tokio::test]
async fn waiters_are_served_in_arrival_order() {
    let pool = Pool::new(Mock::default(), config(1).build().unwrap())
        .await
        .unwrap();
    let held = pool.get().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..10u32 {
        let (p, order) = (pool.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let conn = p.get().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::task::yield_now().await;
            drop(conn);
        }));
        // Let waiter i queue before waiter i+1 is spawned.
        until(|| pool.metrics().waiting == i + 1).await;
    }
    drop(held);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_newcomer_does_not_overtake_a_waiter() {
    let pool = Pool::new(Mock::default(), config(1).build().unwrap())
        .await
        .unwrap();
    let held = pool.get().await.unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.get().await.map(|c| c.id) })
    };
    until(|| pool.metrics().waiting == 1).await;
    drop(held);
    // The connection went straight to the waiter: nothing is idle for a
    // newcomer to grab.
    assert!(pool.try_get().is_none());
    assert!(waiter.await.unwrap().is_ok());
}

/// With tokio's clock paused, time only moves when every task sleeps. A
/// waiter woken by a sleep/poll loop would see the clock advance; one woken
/// by the handoff sees no time pass at all.
#[tokio::test(start_paused = true)]
async fn handoff_wakes_the_waiter_without_polling() {
    let pool = Pool::new(Mock::default(), config(1).build().unwrap())
        .await
        .unwrap();
    let held = pool.get().await.unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let conn = pool.get().await.unwrap();
            (tokio::time::Instant::now(), conn.id)
        })
    };
    until(|| pool.metrics().waiting == 1).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let released_at = tokio::time::Instant::now();
    drop(held);
    let (woke_at, _) = waiter.await.unwrap();
    assert_eq!(woke_at - released_at, Duration::ZERO);
}
