//! The scenarios. Each takes its sizes, counts and durations as arguments
//! (the binary's full and `--quick` settings, or a test's tiny ones) and
//! returns plain rows for the report.
//!
//! | | what | unit |
//! |---|---|---|
//! | S1 | uncontended get + drop, current-thread runtime | ns per cycle |
//! | S2 | 2 workers, pool 4/16, 4…1024 tasks: get, yield, drop | cycles/s, Jain |
//! | S3 | pool 1–4, 256 waiters | wait p50/p99/max, Jain, cycles/s |
//! | S4 | connect 150 ms, query 2 ms, max 50, min 5, 50 at once | connections opened, time |
//! | S5 | PostgreSQL `SELECT 1`, pool 16, 16 and 256 tasks | qps, p99 |
//! | S6 | S1/S2 for ours with metrics export and leak detection on/off | ns, cycles/s |
//! | S7 | an HTTP service per pool under `wrk` | rps, p99 |

pub mod contended;
pub mod db;
pub mod http;
pub mod options;
pub mod spike;
pub mod uncontended;
