//! The hard bound: never more than `max_size` connections open, whatever the
//! interleaving.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pool_core::Pool;
use support::{assert_consistent, config, Mock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_holds_under_64_tasks_by_hundreds_of_cycles() {
    let mock = Mock::default();
    mock.script.connect_delay_ms.store(1, Ordering::SeqCst);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(8).max_concurrent_connects(4).build().unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (pool, stop) = (pool.clone(), stop.clone());
        tokio::spawn(async move {
            let mut samples = 0u32;
            while !stop.load(Ordering::SeqCst) && samples < 1_000_000 {
                assert_consistent(&pool.metrics());
                samples += 1;
                tokio::task::yield_now().await;
            }
            samples
        })
    };
    let mut tasks = Vec::new();
    for t in 0..64u64 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..300u64 {
                let mut conn = pool.get().await.expect("get within 5 s");
                conn.uses.push(t);
                match (t + i) % 17 {
                    0 => conn.discard(),
                    1 => {
                        conn.broken = true;
                    }
                    2 => {
                        conn.dirty = true;
                    }
                    3 => {
                        conn.dirty = true;
                        conn.broken = true;
                    }
                    _ => {
                        tokio::task::yield_now().await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    assert!(watcher.await.unwrap() > 0);
    assert!(
        mock.script.max_alive() <= 8,
        "max alive {}",
        mock.script.max_alive()
    );
    let m = pool.metrics();
    assert_consistent(&m);
    assert_eq!(m.in_use, 0);
    assert_eq!(m.acquire_count, 64 * 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_holds_while_connects_fail_and_succeed() {
    let mock = Mock::default();
    let pool = Pool::new_lazy(
        mock.clone(),
        config(4)
            .acquire_timeout(Duration::from_millis(200))
            .max_concurrent_connects(3)
            .build()
            .unwrap(),
    );
    let flipper = {
        let mock = mock.clone();
        tokio::spawn(async move {
            for i in 0..40 {
                mock.script.set(&mock.script.fail_connect, i % 2 == 0);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            mock.script.set(&mock.script.fail_connect, false);
        })
    };
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                if let Ok(c) = pool.get().await {
                    tokio::task::yield_now().await;
                    drop(c);
                }
                assert_consistent(&pool.metrics());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    flipper.await.unwrap();
    assert!(mock.script.max_alive() <= 4);
    let m = pool.metrics();
    assert_eq!(m.in_use, 0);
    assert!(m.total <= 4);
}
