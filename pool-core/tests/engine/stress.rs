//! Everything at once, on the production clock, for a bounded time: tasks
//! on several runtime workers, plain threads, threads that return a
//! connection and exit, `try_get`, `block_in_place`, `resize` up and
//! down, `soft_evict_all`, `retain`, a housekeeper sweeping every few
//! milliseconds, and `close` while callers still run; and the cold paths:
//! connections returned (dropped or discarded) on a thread outside any
//! runtime, and short-lived second runtimes that use the same pool and are
//! dropped with callers waiting and connects in flight (the tasks they
//! spawn while shutting down are dropped unpolled).
//!
//! Asserted: no connection is ever held by two callers at once, never
//! more connections open than the largest bound, no caller times out (the
//! timeout is far above any wait this load causes), every caller after
//! `close` gets `Closed`, and once the last handle is gone the engine is
//! freed (the manager is dropped): no count of the pool is leaked by any
//! interleaving of parking, claiming and closing.
//!
//! `scripts/test.sh` runs it in a debug build, on tokio's clock and on the
//! production clock; a release build fits far more interleavings in the
//! same time (`cargo test --release -p pool-core --test engine stress`).
//! `STRESS_MS` sets how long the load runs (default 1500).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pool_core::{async_trait, ManageConnection, Pool, PoolConfig, PoolError, PooledConnection};

const MAX: u32 = 8;

/// What the manager saw, shared with the test.
#[derive(Debug, Default)]
struct Seen {
    alive: AtomicI64,
    max_alive: AtomicI64,
    opened: AtomicU64,
    /// Set when the manager itself is dropped (the engine was freed).
    manager_dropped: AtomicBool,
}

#[derive(Debug)]
struct Manager {
    seen: Arc<Seen>,
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.seen.manager_dropped.store(true, Ordering::SeqCst);
    }
}

/// A connection that knows whether a caller holds it.
#[derive(Debug)]
struct Conn {
    id: u64,
    held: AtomicBool,
    seen: Arc<Seen>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        assert!(
            !self.held.load(Ordering::SeqCst),
            "connection {} closed while a caller held it",
            self.id
        );
        self.seen.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = std::io::Error;

    async fn connect(&self) -> Result<Conn, std::io::Error> {
        if self.seen.opened.load(Ordering::Relaxed).is_multiple_of(5) {
            // A connect that takes a while (before anything is counted, so
            // one cut off here leaves nothing behind): some are in flight
            // when a short-lived runtime is dropped.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let id = self.seen.opened.fetch_add(1, Ordering::SeqCst);
        let alive = self.seen.alive.fetch_add(1, Ordering::SeqCst) + 1;
        self.seen.max_alive.fetch_max(alive, Ordering::SeqCst);
        // Made before the yield: a connect cut off there (its runtime
        // dropped) drops the connection, counted out like any other.
        let conn = Conn {
            id,
            held: AtomicBool::new(false),
            seen: self.seen.clone(),
        };
        if id.is_multiple_of(7) {
            tokio::task::yield_now().await;
        }
        Ok(conn)
    }

    async fn is_valid(&self, _: &mut Conn) -> Result<(), std::io::Error> {
        tokio::task::yield_now().await;
        Ok(())
    }
}

/// Marks the connection held for the duration of `work`, failing if
/// another caller holds it too.
fn hold(conn: &Conn, work: impl FnOnce()) {
    assert!(
        !conn.held.swap(true, Ordering::SeqCst),
        "connection {} handed to two callers at once",
        conn.id
    );
    work();
    conn.held.store(false, Ordering::SeqCst);
}

/// A `get()` outcome: a connection, or `Closed` once the pool closes;
/// anything else (a timeout above all) fails the test.
fn expect_conn_or_closed<T>(
    r: Result<T, PoolError<std::io::Error>>,
    closing: &AtomicBool,
) -> Option<T> {
    match r {
        Ok(conn) => Some(conn),
        Err(PoolError::Closed) if closing.load(Ordering::SeqCst) => None,
        Err(e) => panic!("a caller failed under load: {e}"),
    }
}

#[test]
fn everything_at_once_keeps_the_bound_and_frees_the_engine() {
    let run_for = Duration::from_millis(
        std::env::var("STRESS_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500),
    );
    let seen = Arc::new(Seen::default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let config = PoolConfig::builder()
        .name("stress")
        .max_size(MAX)
        .min_idle(2)
        .max_concurrent_connects(3)
        .acquire_timeout(Duration::from_secs(60))
        .housekeeping_period(Duration::from_millis(5))
        .idle_timeout(Duration::from_millis(40))
        .max_lifetime(Duration::from_millis(200))
        .validation_bypass(Duration::from_millis(1))
        .build()
        .unwrap();
    let pool = runtime.block_on(async {
        Pool::new(Manager { seen: seen.clone() }, config)
            .await
            .unwrap()
    });
    let closing = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + run_for;
    let cycles = Arc::new(AtomicU64::new(0));

    // Tasks on the workers: get, hold across a yield, sometimes block in
    // place, drop; every fifth turn a `try_get`.
    let mut tasks = Vec::new();
    for t in 0..24u64 {
        let pool = pool.clone();
        let closing = closing.clone();
        let cycles = cycles.clone();
        tasks.push(runtime.spawn(async move {
            let mut turn = 0u64;
            loop {
                turn += 1;
                if pool.is_closed() {
                    // One more, which must fail with `Closed`.
                    assert!(matches!(pool.get().await, Err(PoolError::Closed)));
                    break;
                }
                if turn % 5 == t % 5 {
                    if let Some(conn) = pool.try_get() {
                        hold(&conn, || {});
                    }
                    continue;
                }
                let Some(conn) = expect_conn_or_closed(pool.get().await, &closing) else {
                    break;
                };
                assert!(!conn.held.swap(true, Ordering::SeqCst), "held twice");
                tokio::task::yield_now().await;
                if turn.is_multiple_of(11) {
                    tokio::task::block_in_place(std::thread::yield_now);
                }
                conn.held.store(false, Ordering::SeqCst);
                drop(conn);
                cycles.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    // Plain threads, outside the runtime: long-lived ones, and short-lived
    // ones that return a connection (parking it for a thread about to
    // exit) and end.
    let handle = runtime.handle().clone();
    let mut threads = Vec::new();
    for kind in 0..3u64 {
        let pool = pool.clone();
        let closing = closing.clone();
        let handle = handle.clone();
        threads.push(std::thread::spawn(move || {
            while Instant::now() < deadline {
                if kind == 0 {
                    let pool = pool.clone();
                    let closing = closing.clone();
                    let handle = handle.clone();
                    std::thread::spawn(move || {
                        if let Some(conn) =
                            expect_conn_or_closed(handle.block_on(pool.get()), &closing)
                        {
                            hold(&conn, || {});
                        }
                    })
                    .join()
                    .unwrap();
                } else if let Some(conn) =
                    expect_conn_or_closed(handle.block_on(pool.get()), &closing)
                {
                    hold(&conn, std::thread::yield_now);
                }
            }
        }));
    }

    // Returns outside any runtime: tasks hand their connection to a plain
    // thread, which drops it (delivered from there) or discards it (its
    // slot freed there, where no connect can start).
    let (to_plain, plain_rx) = std::sync::mpsc::channel::<pool_core::PooledConnection<Manager>>();
    let plain = std::thread::spawn(move || {
        let mut n = 0u64;
        while let Ok(conn) = plain_rx.recv() {
            n += 1;
            hold(&conn, || {});
            if n.is_multiple_of(3) {
                PooledConnection::discard(conn);
            } else {
                drop(conn);
            }
        }
    });
    for _ in 0..4 {
        let pool = pool.clone();
        let closing = closing.clone();
        let to_plain = to_plain.clone();
        tasks.push(runtime.spawn(async move {
            while Instant::now() < deadline {
                let Some(conn) = expect_conn_or_closed(pool.get().await, &closing) else {
                    break;
                };
                to_plain.send(conn).expect("the plain thread runs");
                tokio::task::yield_now().await;
            }
        }));
    }
    drop(to_plain);

    // Second runtimes: each uses the pool for a few milliseconds and is
    // dropped with its callers mid-wait and its connects mid-flight.
    let visitor = {
        let pool = pool.clone();
        let closing = closing.clone();
        std::thread::spawn(move || {
            let mut rounds = 0u32;
            while Instant::now() < deadline {
                rounds += 1;
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    for _ in 0..6 {
                        let pool = pool.clone();
                        let closing = closing.clone();
                        tokio::spawn(async move {
                            if let Some(conn) = expect_conn_or_closed(pool.get().await, &closing) {
                                hold(&conn, || {});
                                tokio::task::yield_now().await;
                            }
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                });
                drop(rt);
            }
            assert!(rounds > 1, "the second runtimes ran");
        })
    };

    // The operator: resize, evict, retain, while the load runs.
    let operator = {
        let pool = pool.clone();
        runtime.spawn(async move {
            let mut round = 0u32;
            while Instant::now() < deadline {
                round += 1;
                let size = if round.is_multiple_of(2) {
                    MAX
                } else {
                    2 + round % 5
                };
                pool.resize(size).expect("a size within the ceiling");
                match round % 3 {
                    0 => pool.soft_evict_all(),
                    1 => {
                        pool.retain(|conn, _| conn.id % 3 != 0);
                    }
                    _ => {}
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            pool.resize(MAX).expect("the ceiling");
        })
    };

    runtime.block_on(async {
        operator.await.unwrap();
        for t in threads {
            t.join().unwrap();
        }
        visitor.join().unwrap();
        // Close while the tasks still call `get()`.
        closing.store(true, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(30), pool.close())
            .await
            .expect("close returned once every connection came back");
        for task in tasks {
            task.await.unwrap();
        }
    });
    plain.join().unwrap();
    let m = pool.metrics();
    assert_eq!(m.total, 0, "every connection closed: {m:?}");
    assert_eq!(m.timeout_count, 0, "no caller timed out");
    assert!(
        seen.max_alive.load(Ordering::SeqCst) <= i64::from(MAX),
        "more than {MAX} connections were open at once"
    );
    assert!(
        cycles.load(Ordering::Relaxed) > 100,
        "the load ran (cycles: {})",
        cycles.load(Ordering::Relaxed)
    );
    drop(pool);
    // The engine is freed once nothing holds a count of it; a background
    // task may still be finishing its last step, so wait for the event
    // itself, bounded.
    let until = Instant::now() + Duration::from_secs(10);
    while !seen.manager_dropped.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        seen.manager_dropped.load(Ordering::SeqCst),
        "the last handle is gone but the engine was never freed: a count of the pool leaked"
    );
    assert_eq!(seen.alive.load(Ordering::SeqCst), 0, "a connection leaked");
    runtime.shutdown_timeout(Duration::from_secs(5));
}

/// The cold paths over and over, then a check that the pool still works:
/// round after round a runtime of its own (one worker or several) uses
/// one pool, with callers handing connections to a plain thread that
/// drops or discards them outside any runtime, and is dropped with callers
/// waiting and connects in flight. Afterwards, on a fresh runtime: every
/// slot can still be opened (no connector place was lost to a task dropped
/// unpolled), a caller waiting on a full pool times out at its limit (the
/// deadline task runs on this runtime), and a slot freed on a plain
/// thread serves the caller waiting.
#[test]
fn runtimes_that_come_and_go_leave_the_pool_working() {
    let run_for = Duration::from_millis(
        std::env::var("STRESS_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1500),
    );
    let seen = Arc::new(Seen::default());
    let pool = Pool::new_lazy(
        Manager { seen: seen.clone() },
        PoolConfig::builder()
            .name("cold")
            .max_size(4)
            .min_size(1)
            .max_concurrent_connects(2)
            .acquire_timeout(Duration::from_millis(300))
            .housekeeping_period(Duration::from_millis(5))
            .build()
            .unwrap(),
    );
    let deadline = Instant::now() + run_for;
    let (to_plain, plain_rx) = std::sync::mpsc::channel::<pool_core::PooledConnection<Manager>>();
    let plain = std::thread::spawn(move || {
        let mut n = 0u64;
        while let Ok(conn) = plain_rx.recv() {
            n += 1;
            hold(&conn, || {});
            if n.is_multiple_of(2) {
                PooledConnection::discard(conn);
            } else {
                drop(conn);
            }
        }
    });
    let mut rounds = 0u32;
    while Instant::now() < deadline {
        rounds += 1;
        let rt = if rounds.is_multiple_of(2) {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .unwrap();
        rt.block_on(async {
            for i in 0..8u32 {
                let pool = pool.clone();
                let to_plain = to_plain.clone();
                tokio::spawn(async move {
                    // Timeouts are fine here: a caller may wait beside
                    // connections stuck on the plain thread's queue.
                    if let Ok(conn) = pool.get().await {
                        if i % 3 == 0 {
                            to_plain.send(conn).expect("the plain thread runs");
                        } else {
                            hold(&conn, || {});
                            tokio::task::yield_now().await;
                        }
                    }
                });
            }
            tokio::time::sleep(Duration::from_millis(u64::from(rounds % 4))).await;
        });
        drop(rt);
    }
    drop(to_plain);
    plain.join().unwrap();
    assert!(rounds > 2, "the rounds ran");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let bounded = Duration::from_secs(5);
        let mut held = Vec::new();
        for n in 0..4 {
            let got = tokio::time::timeout(bounded, pool.get_timeout(Duration::from_secs(2)))
                .await
                .unwrap_or_else(|_| panic!("connection {n}: the wait never ended"));
            held.push(got.unwrap_or_else(|e| panic!("connection {n}: {e}")));
        }
        let started = Instant::now();
        let full = tokio::time::timeout(bounded, pool.get())
            .await
            .expect("a caller on a full pool never timed out");
        assert!(matches!(full, Err(PoolError::Timeout { .. })), "{full:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.get_timeout(Duration::from_secs(2)).await.map(drop) }
        });
        for _ in 0..10_000 {
            if pool.state().waiting == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(pool.state().waiting, 1, "the caller queued");
        let freed = held.pop().unwrap();
        std::thread::spawn(move || PooledConnection::discard(freed))
            .join()
            .unwrap();
        tokio::time::timeout(bounded, waiter)
            .await
            .expect("bounded")
            .unwrap()
            .expect("the caller waiting is served after a free on a plain thread");
        drop(held);
        pool.close().await;
    });
    assert!(
        seen.max_alive.load(Ordering::SeqCst) <= 4,
        "more than 4 connections were open at once"
    );
    drop(pool);
    let until = Instant::now() + Duration::from_secs(10);
    while !seen.manager_dropped.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        seen.manager_dropped.load(Ordering::SeqCst),
        "a count of the pool leaked"
    );
    assert_eq!(seen.alive.load(Ordering::SeqCst), 0, "a connection leaked");
}
