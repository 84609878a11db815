//! `get()` takes part in tokio's cooperative budget: a task whose
//! checkouts are always ready still yields to the other tasks on its
//! worker, after a bounded number of them (`coop.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::support;
use crate::support::config;

/// tokio's budget per task poll.
const TOKIO_BUDGET: u32 = 128;
/// The pool spends one unit per this many checkouts (`coop::EVERY`).
const EVERY: u32 = 8;

#[tokio::test]
async fn a_task_looping_on_ready_checkouts_lets_the_others_run() {
    let (_, pool) = support::pool(config(1)).await;
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    tokio::spawn(async move { r.store(true, Ordering::SeqCst) });
    let mut checkouts = 0u32;
    while !ran.load(Ordering::SeqCst) {
        drop(pool.get().await.unwrap());
        checkouts += 1;
        assert!(checkouts < 100_000, "the looping task never yielded");
    }
    assert!(
        checkouts <= TOKIO_BUDGET * EVERY + EVERY,
        "yielded only after {checkouts} checkouts"
    );
}
