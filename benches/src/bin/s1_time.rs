//! Times N uncontended get + drop cycles on a current-thread runtime and
//! prints ns per cycle (the loop the hot-path regressions are judged on).
//! Timings are noise on a loaded machine: run it interleaved with the
//! binary it is compared to, several rounds each, and compare medians.
//!
//! ```text
//! cargo build --release -p pool-benches --bin s1_time
//! target/release/s1_time 5000000
//! ```
use pool_benches::fake::FakeSpec;
use pool_benches::pools::noop::Ours;
fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pool = Ours::build(&FakeSpec::noop(16)).await;
        for _ in 0..100_000 {
            drop(pool.0.get().await.unwrap());
        }
        let t = std::time::Instant::now();
        for _ in 0..n {
            let conn = pool.0.get().await.unwrap();
            std::hint::black_box(&*conn);
            drop(conn);
        }
        println!("{:.1} ns/cycle", t.elapsed().as_nanos() as f64 / n as f64);
    });
}
