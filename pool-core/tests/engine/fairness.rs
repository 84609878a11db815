//! Waiters are served first come, first served, by a direct handoff that
//! wakes them (no polling).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support;
use crate::support::{config, until};

#[tokio::test]
async fn waiters_are_served_in_arrival_order() {
    let (pool, held) = support::held_one().await;
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
    let (pool, held) = support::held_one().await;
    let waiter = support::spawn_get(&pool);
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
    let (pool, held) = support::held_one().await;
    let waiter = support::spawn_on(&pool, |pool| async move {
        let conn = pool.get().await.unwrap();
        (tokio::time::Instant::now(), conn.id)
    });
    until(|| pool.metrics().waiting == 1).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let released_at = tokio::time::Instant::now();
    drop(held);
    let (woke_at, _) = waiter.await.unwrap();
    assert_eq!(woke_at - released_at, Duration::ZERO);
}

/// Under exhaustion every task gets its turn in order: on one thread (no
/// scheduler noise) 64 tasks cycling through 2 connections for a fixed
/// number of handoffs end within one cycle of each other.
#[tokio::test]
async fn exhausted_pool_gives_every_task_the_same_share() {
    let (_, pool) = support::pool(config(2).min_size(2)).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (pool, stop) = (pool.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut turns = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && turns < 100_000 {
                let conn = pool.get().await.unwrap();
                tokio::task::yield_now().await;
                drop(conn);
                turns += 1;
            }
            turns
        }));
    }
    for _ in 0..1_000_000 {
        if pool.metrics().acquire_count >= 20_000 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(pool.metrics().acquire_count >= 20_000);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut turns = Vec::new();
    for t in tasks {
        turns.push(t.await.unwrap());
    }
    let (min, max) = (turns.iter().min().unwrap(), turns.iter().max().unwrap());
    assert!(max - min <= 1, "turns per task from {min} to {max}");
}
