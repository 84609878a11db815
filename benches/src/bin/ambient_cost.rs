//! What an ambient transaction scope costs, against sqlx's own transaction
//! calls on PostgreSQL, timed in one process, interleaved by round:
//!
//! | case | what one operation is |
//! |---|---|
//! | `begin` | `pool.begin()`, `SELECT 1` on `&mut *tx`, `tx.commit()` |
//! | `scope` | `pool.transaction().run(..)`, `SELECT 1` on `&mut *pool.current()` inside |
//! | `sqlx_savepoint` | inside an open transaction, sqlx's nested `begin()` on the connection and its `commit()` |
//! | `nested_scope` | inside an open scope, a `Propagation::Nested` scope with an empty body |
//! | `joined_scope` | inside an open scope, a joining (`Required`) scope with an empty body: the scope machinery alone, no SQL |
//! | `current` | inside an open scope, `pool.current()` and dropping the guard: the look-up and the lock |
//!
//! Each round runs every case `n` times (the no-SQL cases 100 times more),
//! the two cases of each pair (`begin`/`scope`, `sqlx_savepoint`/
//! `nested_scope`, `joined_scope`/`current`) alternating in chunks of
//! `n / 20`, and prints ns per operation; the summary gives each case's
//! median over the rounds and the median of the per-round ratios
//! `scope / begin` and `nested_scope / sqlx_savepoint`, which are robust to
//! a loaded machine.
//!
//! ```text
//! cargo build --release -p pool-benches --features ambient --bin ambient_cost
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test target/release/ambient_cost 2000 7
//! ```

use std::time::Instant;

use pool_ambient::AmbientExt;
use pool_ambient::Propagation;
use pool_core::PoolConfig;
use pool_sqlx::{Pool, SqlxManager};
use sqlx::{Acquire, PgConnection};

type PgPool = Pool<PgConnection>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

const CASES: [&str; 6] = [
    "begin",
    "scope",
    "sqlx_savepoint",
    "nested_scope",
    "joined_scope",
    "current",
];

async fn select_one(conn: &mut PgConnection) -> Result<(), BoxError> {
    let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(conn).await?;
    std::hint::black_box(one);
    Ok(())
}

/// ns per operation of case `case`, over `n` operations.
async fn run(pool: &PgPool, case: &str, n: u64) -> Result<f64, BoxError> {
    let start;
    match case {
        "begin" => {
            start = Instant::now();
            for _ in 0..n {
                let mut tx = pool.begin().await?;
                select_one(&mut tx).await?;
                tx.commit().await?;
            }
        }
        "scope" => {
            start = Instant::now();
            for _ in 0..n {
                pool.transaction()
                    .run(async { select_one(&mut *pool.current().await?).await })
                    .await?;
            }
        }
        "sqlx_savepoint" => {
            let mut tx = pool.begin().await?;
            start = Instant::now();
            for _ in 0..n {
                let savepoint = (&mut *tx).begin().await?;
                savepoint.commit().await?;
            }
            tx.commit().await?;
        }
        "nested_scope" => {
            let mut started = None;
            pool.transaction()
                .run(async {
                    started = Some(Instant::now());
                    for _ in 0..n {
                        pool.transaction()
                            .propagation(Propagation::Nested)
                            .run(async { Ok::<(), BoxError>(()) })
                            .await?;
                    }
                    Ok::<(), BoxError>(())
                })
                .await?;
            start = started.unwrap_or_else(Instant::now);
        }
        "joined_scope" | "current" => {
            let mut started = None;
            let n = n * 100;
            let elapsed = pool
                .transaction()
                .run(async {
                    started = Some(Instant::now());
                    for _ in 0..n {
                        if case == "current" {
                            drop(std::hint::black_box(pool.current().await?));
                        } else {
                            pool.transaction()
                                .run(async { Ok::<(), BoxError>(()) })
                                .await?;
                        }
                    }
                    Ok::<_, BoxError>(started.map(|s| s.elapsed()))
                })
                .await?;
            let elapsed = elapsed.ok_or("no start")?;
            return Ok(elapsed.as_nanos() as f64 / n as f64);
        }
        other => return Err(format!("no case {other}").into()),
    }
    Ok(start.elapsed().as_nanos() as f64 / n as f64)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        (xs[mid - 1] + xs[mid]) / 2.0
    }
}

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let url = pool_benches::scenarios::db::database_url();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let config = PoolConfig::builder().max_size(2).build()?;
        let pool = Pool::new(SqlxManager::<PgConnection>::from_url(&url)?, config).await?;
        // Warm-up: statements prepared, connections hot.
        for case in CASES {
            run(&pool, case, n / 10 + 1).await?;
        }
        let mut table: Vec<Vec<f64>> = vec![Vec::new(); CASES.len()];
        // Within a round, the two cases of a pair alternate in chunks of
        // `n / CHUNKS` operations (A B B A ...), so that a change in the
        // machine's load falls on both alike.
        const CHUNKS: u64 = 20;
        for round in 0..rounds {
            let mut line = format!("round {round}:");
            for pair in [(0, 1), (2, 3), (4, 5)] {
                let mut sums = (0.0, 0.0);
                for chunk in 0..CHUNKS {
                    let order = if chunk % 2 == 0 {
                        [pair.0, pair.1]
                    } else {
                        [pair.1, pair.0]
                    };
                    for i in order {
                        let ns = run(&pool, CASES[i], n / CHUNKS).await?;
                        if i == pair.0 {
                            sums.0 += ns;
                        } else {
                            sums.1 += ns;
                        }
                    }
                }
                for (i, sum) in [(pair.0, sums.0), (pair.1, sums.1)] {
                    let ns = sum / CHUNKS as f64;
                    table[i].push(ns);
                    line.push_str(&format!(" {} {ns:.0} ns", CASES[i]));
                }
            }
            println!("{line}");
        }
        println!(
            "\nmedian of {rounds} rounds, n = {n} (no-SQL cases: {}):",
            n * 100
        );
        for (case, times) in CASES.iter().zip(&table) {
            println!("  {case:>15}: {:>10.0} ns/op", median(times.clone()));
        }
        let ratio = |a: usize, b: usize| {
            median(table[a].iter().zip(&table[b]).map(|(x, y)| x / y).collect())
        };
        println!("  scope / begin: {:.3}", ratio(1, 0));
        println!("  nested_scope / sqlx_savepoint: {:.3}", ratio(3, 2));
        pool.close().await;
        Ok(())
    })
}
