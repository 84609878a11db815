//! Dropping a `get()` future at any await point loses no slot and no
//! connection.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support;
use crate::support::{assert_settled, config, Mock};
use pool_core::Pool;

/// After the storm, every slot must still be usable: `max_size` connections
/// can be held at once, and everything is accounted for.
async fn assert_no_slot_lost(pool: &Pool<Mock>, mock: &Mock, max: u32) {
    // Let connects still in flight settle.
    for _ in 0..200 {
        if pool.metrics().opening == 0 && pool.metrics().in_use == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_settled(pool);
    let m = pool.metrics();
    assert_eq!(m.in_use, 0, "{m:?}");
    let mut held = Vec::new();
    for _ in 0..max {
        held.push(
            pool.get_timeout(Duration::from_secs(5))
                .await
                .expect("a slot was lost"),
        );
    }
    assert_eq!(pool.metrics().in_use, max);
    assert!(mock.script.max_alive() <= i64::from(max));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_random_timeouts_and_selects_lose_nothing() {
    let mock = Mock::with_connect_delay(2);
    let max = 4;
    let pool = Pool::new_lazy(
        mock.clone(),
        config(max).max_concurrent_connects(2).build().unwrap(),
    );
    let mut tasks = Vec::new();
    for t in 0..32u64 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(t);
            for _ in 0..100 {
                match rng.u8(0..4) {
                    // A get under a tiny timeout: often cancelled mid-wait.
                    0 => {
                        let limit = Duration::from_micros(rng.u64(1..3_000));
                        if let Ok(Ok(c)) = tokio::time::timeout(limit, pool.get()).await {
                            tokio::task::yield_now().await;
                            drop(c);
                        }
                    }
                    // The pool's own timeout.
                    1 => {
                        let limit = Duration::from_micros(rng.u64(1..3_000));
                        if let Ok(c) = pool.get_timeout(limit).await {
                            drop(c);
                        }
                    }
                    // Raced against another branch in select!.
                    2 => {
                        tokio::select! {
                            c = pool.get() => { drop(c); }
                            _ = tokio::task::yield_now() => {}
                        }
                    }
                    // Poll once, then drop.
                    _ => {
                        let fut = pool.get();
                        tokio::pin!(fut);
                        let polled = futures::poll!(fut.as_mut());
                        drop(polled);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_no_slot_lost(&pool, &mock, max).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_tasks_lose_nothing() {
    let mock = Mock::with_connect_delay(1);
    let max = 3;
    let pool = Pool::new_lazy(mock.clone(), config(max).build().unwrap());
    for round in 0..30u64 {
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let c = pool.get().await.unwrap();
                    tokio::task::yield_now().await;
                    drop(c);
                }
            }));
        }
        tokio::time::sleep(Duration::from_micros(200 + round * 50)).await;
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            assert!(t.await.unwrap_err().is_cancelled());
        }
    }
    assert_no_slot_lost(&pool, &mock, max).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_during_validation_closes_that_connection_only() {
    let mock = Mock::default();
    mock.script.valid_delay_ms.store(20, Ordering::SeqCst);
    let max = 2;
    let pool = support::started(
        &mock,
        config(max)
            .validation_mode(pool_core::ValidationMode::IsValid)
            .validation_bypass(Duration::ZERO),
    )
    .await;
    let mut cancelled = 0;
    for _ in 0..20 {
        // Times out while `is_valid` is running on a used connection; a
        // fresh one (the replacement) is handed over unchecked
        // and comes back used.
        match tokio::time::timeout(Duration::from_millis(5), pool.get()).await {
            Ok(conn) => drop(conn.unwrap()),
            Err(_) => cancelled += 1,
        }
    }
    mock.script.valid_delay_ms.store(0, Ordering::SeqCst);
    assert!(cancelled >= 5, "{cancelled} cancelled mid-check");
    assert!(pool.metrics().evictions.validation >= cancelled);
    assert_no_slot_lost(&pool, &mock, max).await;
}
