//! Cost of an uncontended `get()` + drop, in nanoseconds, to see what
//! metrics export and leak detection add to the hot path. A timing tool,
//! not a test: it asserts nothing.
//!
//! ```text
//! cargo bench -p pool-core --bench hot_path                           # metrics feature, no recorder
//! cargo bench -p pool-core --bench hot_path --no-default-features     # no metrics code at all
//! HOT_PATH=prometheus cargo bench -p pool-core --bench hot_path       # Prometheus recorder installed
//! HOT_PATH=leak cargo bench -p pool-core --bench hot_path             # leak detection on
//! ```
//!
//! Each run times 5 rounds of 1,000,000 checkouts on a current-thread
//! runtime after a warm-up and prints every round and the median.

use std::hint::black_box;
use std::time::{Duration, Instant};

use pool_core::{async_trait, ManageConnection, Pool, PoolConfig};

#[derive(Debug)]
struct Noop;

#[async_trait]
impl ManageConnection for Noop {
    type Connection = u64;
    type Error = std::io::Error;
    async fn connect(&self) -> Result<u64, std::io::Error> {
        Ok(7)
    }
    async fn is_valid(&self, _: &mut u64) -> Result<(), std::io::Error> {
        Ok(())
    }
}

const ROUNDS: usize = 5;
const PER_ROUND: u32 = 1_000_000;

fn main() {
    let mode = std::env::var("HOT_PATH").unwrap_or_default();
    let mut builder = PoolConfig::builder().name("hot_path").max_size(4);
    match mode.as_str() {
        "" => {}
        "prometheus" => {
            let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
                .install_recorder()
                .expect("installing the Prometheus recorder");
            // The exporter's own upkeep would run on a timer in an app; here
            // it is enough that the recorder is installed.
            drop(handle);
        }
        "leak" => builder = builder.leak_detection_threshold(Duration::from_secs(60)),
        other => panic!("HOT_PATH={other}: expected prometheus, leak or nothing"),
    }
    let features = if cfg!(feature = "metrics") {
        "metrics"
    } else {
        "no metrics"
    };
    let config = builder.build().expect("config");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut rounds: Vec<f64> = runtime.block_on(async {
        let pool = Pool::new(Noop, config).await.expect("pool");
        for _ in 0..PER_ROUND / 10 {
            drop(black_box(pool.get().await.expect("get")));
        }
        let mut out = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let start = Instant::now();
            for _ in 0..PER_ROUND {
                drop(black_box(pool.get().await.expect("get")));
            }
            out.push(start.elapsed().as_nanos() as f64 / f64::from(PER_ROUND));
        }
        out
    });
    let shown: Vec<String> = rounds.iter().map(|r| format!("{r:.1}")).collect();
    rounds.sort_by(f64::total_cmp);
    println!(
        "hot_path [{features}, mode={}]: rounds ns/op {}; median {:.1} ns",
        if mode.is_empty() { "default" } else { &mode },
        shown.join(" "),
        rounds[ROUNDS / 2]
    );
}
