//! The waiting cycle of S3 (handoff under exhaustion) for instruction
//! counts under callgrind: a pool of one connection, 16 tasks on a
//! current-thread runtime each looping get → yield → drop, so every
//! checkout but the first waits and every return hands over to the
//! longest waiter. Deterministic where timings are not (code placement
//! alone moves S3's throughput by several per cent between builds).
//!
//! ```text
//! cargo build --release -p pool-benches --bin s3_cycles
//! valgrind --tool=callgrind --zero-before='s3_cycles::cycles' target/release/s3_cycles 10000 ours
//! valgrind --tool=callgrind --zero-before='s3_cycles::cycles' target/release/s3_cycles 20000 ours
//! # per cycle: (count at 20000 - count at 10000) / 10000; `floor` (the
//! # semaphore + queue) instead of `ours` for the same loop on the floor,
//! # `floor-timer` for the floor with one timer armed in the runtime
//! ```
//!
//! `floor-timer` parks a task on a one-hour sleep before the loop starts.
//! Our pool always has a timer armed while callers wait (the housekeeper's
//! tick, the deadline sweeper), and every peer honours a checkout deadline
//! with one; with any timer in tokio's wheel, each park of the runtime reads
//! the clock once more and polls the wheel, a cost the bare floor does not
//! pay. The difference between `floor` and `floor-timer` is that cost.
//!
//! One worker, so what is counted is the pool's and the runtime's work per
//! handoff, not the cache lines two workers share. Run without valgrind,
//! it prints the time per cycle on that one worker.

use pool_benches::fake::FakeSpec;
use pool_benches::pools::floor::FloorPool;
use pool_benches::pools::noop::Ours;
use pool_benches::runner::current_thread;

/// Tasks looping at once: each waits behind the others for the one
/// connection.
const TASKS: u64 = 16;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let (floor, timer) = match args.next().as_deref() {
        None | Some("ours") => (false, false),
        Some("floor") => (true, false),
        Some("floor-timer") => (true, true),
        Some(other) => {
            eprintln!("unknown pool {other:?}: ours, floor or floor-timer");
            std::process::exit(2)
        }
    };
    current_thread().block_on(async {
        if timer {
            // Never fires within the run; dropped with the runtime.
            tokio::spawn(tokio::time::sleep(std::time::Duration::from_secs(3600)));
        }
        let spec = FakeSpec::noop(1);
        let pool = if floor {
            Pool::Floor(FloorPool::new(1))
        } else {
            Pool::Ours(Ours::build(&spec).await)
        };
        // Boxed, so the loop's poll is a function of its own.
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> =
            Box::pin(cycles(pool, n));
        let started = std::time::Instant::now();
        run.await;
        // Outside the counted function; a timing on one worker, free of
        // the placement of two (a hint: counts are the figure to trust).
        let ns = started.elapsed().as_nanos() as f64 / n.max(1) as f64;
        eprintln!("{n} cycles, {ns:.1} ns per cycle");
    });
}

/// The two pools the loop runs on.
#[derive(Clone)]
enum Pool {
    Ours(Ours),
    Floor(FloorPool),
}

/// The measured loops: `n` cycles in all, split between the tasks.
#[inline(never)]
async fn cycles(pool: Pool, n: u64) {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let pool = pool.clone();
        tasks.spawn(async move {
            for _ in 0..n / TASKS {
                match &pool {
                    Pool::Ours(p) => {
                        let conn = p.0.get().await.expect("the one connection");
                        std::hint::black_box(&*conn);
                        tokio::task::yield_now().await;
                        drop(conn);
                    }
                    Pool::Floor(p) => {
                        let mut conn = p.get().await.expect("the one connection");
                        std::hint::black_box(conn.conn());
                        tokio::task::yield_now().await;
                        drop(conn);
                    }
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a cycle task panicked");
    }
}
