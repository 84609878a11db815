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
//! # semaphore + queue) instead of `ours` for the same loop on the floor
//! ```
//!
//! One worker, so what is counted is the pool's and the runtime's work per
//! handoff, not the cache lines two workers share.

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
    let floor = match args.next().as_deref() {
        None | Some("ours") => false,
        Some("floor") => true,
        Some(other) => {
            eprintln!("unknown pool {other:?}: ours or floor");
            std::process::exit(2)
        }
    };
    current_thread().block_on(async {
        let spec = FakeSpec::noop(1);
        let pool = if floor {
            Pool::Floor(FloorPool::new(1))
        } else {
            Pool::Ours(Ours::build(&spec).await)
        };
        // Boxed, so the loop's poll is a function of its own.
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> =
            Box::pin(cycles(pool, n));
        run.await;
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
