//! N uncontended get + drop cycles on a current-thread runtime, for
//! instruction counts under callgrind (deterministic, unlike timings):
//!
//! ```text
//! cargo build --release -p pool-benches --bin s1_cycles
//! valgrind --tool=callgrind --zero-before='s1_cycles::cycles' target/release/s1_cycles 10000 none
//! valgrind --tool=callgrind --zero-before='s1_cycles::cycles' target/release/s1_cycles 20000 none
//! # per cycle: (count at 20000 - count at 10000) / 10000; likewise with
//! # `after-connect` (an `after_connect`-only hook) instead of `none`, or
//! # `leak` / `leak-site` (leak detection with the backtrace / the call
//! # site alone)
//! ```
//!
//! `--zero-before` starts counting where the loop starts, so the pool's
//! construction (and the clock's calibration, which is timed and so not
//! deterministic) is left out; the difference of two runs leaves out the
//! runtime's shutdown.

use pool_benches::fake::FakeSpec;
use pool_benches::pools::noop::Ours;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    // `leak` and `leak-site`: leak detection on (60 s threshold), with the
    // backtrace or with the call site alone.
    let (hook, leak) = match args.next().as_deref() {
        None | Some("none") => (false, None),
        Some("after-connect") => (true, None),
        Some("leak") => (false, Some(true)),
        Some("leak-site") => (false, Some(false)),
        Some(other) => {
            eprintln!("unknown variant {other:?}: none, after-connect, leak or leak-site");
            std::process::exit(2)
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let spec = FakeSpec::noop(4);
        let pool = if hook {
            Ours::build_after_connect(&spec).await
        } else if let Some(backtrace) = leak {
            let config = Ours::config(&spec)
                .leak_detection_threshold(std::time::Duration::from_secs(60))
                .leak_detection_backtrace(backtrace)
                .build()
                .expect("valid config");
            Ours(
                pool_core::Pool::new(spec.manager(), config)
                    .await
                    .expect("fake connects cannot fail"),
            )
        } else {
            Ours::build(&spec).await
        };
        // Boxed, so the loop's poll is a function of its own.
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> =
            Box::pin(cycles(&pool, n));
        run.await;
    });
}

/// The measured loop.
#[inline(never)]
async fn cycles(pool: &Ours, n: u64) {
    for _ in 0..n {
        let conn = pool.0.get().await.expect("an idle connection");
        std::hint::black_box(&*conn);
        drop(conn);
    }
}
