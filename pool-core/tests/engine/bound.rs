//! The hard bound: never more than `max_size` connections open, whatever the
//! interleaving.

use crate::support;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{assert_bounds, assert_settled, config, Mock};
use pool_core::{Pool, PooledConnection};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_holds_under_64_tasks_by_hundreds_of_cycles() {
    let mock = Mock::with_connect_delay(1);
    let pool = Pool::new_lazy(
        mock.clone(),
        config(8).max_concurrent_connects(4).build().unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (pool, stop) = (pool.clone(), stop.clone());
        // Checks the bound and the accounting (see `assert_bounds`) while
        // the tasks run on the other worker; a failed check fails the test
        // through the join below.
        tokio::spawn(async move {
            let mut samples = 0u32;
            let mut saw_in_use = false;
            while !stop.load(Ordering::SeqCst) && samples < 1_000_000 {
                assert_bounds(&pool);
                saw_in_use |= pool.metrics().in_use > 0;
                samples += 1;
                tokio::task::yield_now().await;
            }
            (samples, saw_in_use)
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
                    0 => PooledConnection::discard(conn),
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
    let (samples, saw_in_use) = watcher.await.unwrap();
    assert!(samples > 0);
    assert!(saw_in_use, "the watcher never sampled the pool under load");
    assert!(
        mock.script.max_alive() <= 8,
        "max alive {}",
        mock.script.max_alive()
    );
    support::until(|| pool.metrics().opening == 0).await;
    assert_settled(&pool);
    let m = pool.metrics();
    assert_eq!(m.in_use, 0);
    assert_eq!(m.acquire_count, 64 * 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_holds_while_connects_fail_and_succeed() {
    let (mock, pool) = support::lazy(
        config(4)
            .acquire_timeout(Duration::from_millis(200))
            .max_concurrent_connects(3),
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
                assert_bounds(&pool);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    flipper.await.unwrap();
    assert!(mock.script.max_alive() <= 4);
    support::until(|| pool.metrics().opening == 0).await;
    assert_settled(&pool);
    let m = pool.metrics();
    assert_eq!(m.in_use, 0);
}

/// One connect per waiting caller, no more: three callers at once on a
/// pool with one idle connection (max 4), all holding on until each has
/// one, so no return can serve anyone. One takes the idle connection; the
/// other two cause exactly one connect each. Repeated, on a runtime of two
/// workers, because the extra connect was a race (a connector whose
/// connect served one caller opened another for the caller a second
/// connector was already serving) that showed in a few runs in a hundred.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_waiting_caller_causes_exactly_one_connect() {
    for round in 0..200 {
        let mock = Mock::default();
        if round % 2 == 1 {
            mock.script.connect_delay_ms.store(1, Ordering::SeqCst);
        }
        let pool = support::started(
            &mock,
            config(4)
                .max_concurrent_connects(2)
                .acquire_timeout(Duration::from_secs(30)),
        )
        .await;
        assert_eq!(mock.script.connects(), 1, "Pool::new opens one");
        let all_hold = Arc::new(tokio::sync::Barrier::new(3));
        let mut callers = Vec::new();
        for _ in 0..3 {
            let pool = pool.clone();
            let all_hold = all_hold.clone();
            callers.push(tokio::spawn(async move {
                let conn = pool.get().await.unwrap();
                all_hold.wait().await;
                drop(conn);
            }));
        }
        for caller in callers {
            caller.await.unwrap();
        }
        // Let any connector still deciding finish its decision.
        support::until(|| pool.metrics().opening == 0).await;
        assert_eq!(
            mock.script.connects(),
            3,
            "round {round}: two waiting callers caused {} connects",
            mock.script.connects() - 1
        );
        assert_eq!(pool.metrics().total, 3);
    }
}
