//! A property-based state machine: random sequences of get, drop, discard,
//! detach, timeout, cancel, broken and dirty returns, failing connects,
//! soft eviction, resize, retain and awaited closes, checking the pool's
//! invariants after every step.

use crate::support;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::{assert_bounds_within, config, Mock};
use pool_core::{Pool, PooledConnection};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Get,
    GetTimeout,
    CancelAfterOnePoll,
    Drop(usize),
    Discard(usize),
    Detach(usize),
    Broken(usize),
    Dirty(usize),
    FailConnects(bool),
    FailResets(bool),
    SoftEvict,
    Advance(u64),
    /// `pool.resize(n)`; refused below `min_size`.
    Resize(u32),
    /// `pool.retain`: keeps the idle connections with an even id.
    Retain,
    /// The manager awaits its `close` (30 ms each: the slot stays taken,
    /// `closing`), or drops connections at once.
    AwaitClose(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Get),
        2 => Just(Op::GetTimeout),
        2 => Just(Op::CancelAfterOnePoll),
        4 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::Discard),
        1 => any::<usize>().prop_map(Op::Detach),
        1 => any::<usize>().prop_map(Op::Broken),
        1 => any::<usize>().prop_map(Op::Dirty),
        1 => any::<bool>().prop_map(Op::FailConnects),
        1 => any::<bool>().prop_map(Op::FailResets),
        1 => Just(Op::SoftEvict),
        1 => (1u64..200).prop_map(Op::Advance),
        1 => (1u32..9).prop_map(Op::Resize),
        1 => Just(Op::Retain),
        1 => any::<bool>().prop_map(Op::AwaitClose),
    ]
}

/// Lets background work (connects, resets) finish on the paused clock,
/// checking the bounds at every step: `total` stays within `total_bound`
/// (the live `max_size`, or what was open before a shrink) and the manager
/// never had more than `alive_bound` alive at once.
async fn settle(pool: &Pool<Mock>, detached: i64, total_bound: u32, alive_bound: u32) {
    for _ in 0..50 {
        tokio::task::yield_now().await;
        assert_bounds_within(pool, detached, total_bound, alive_bound);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}

fn pick(held: &mut Vec<PooledConnection<Mock>>, i: usize) -> Option<PooledConnection<Mock>> {
    if held.is_empty() {
        None
    } else {
        let n = held.len();
        Some(held.swap_remove(i % n))
    }
}

fn run(max: u32, min: u32, ops: Vec<Op>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        let mock = Mock::default();
        mock.script.connect_delay_ms.store(3, Ordering::SeqCst);
        mock.script.reset_delay_ms.store(2, Ordering::SeqCst);
        let pool = Pool::new_lazy(
            mock.clone(),
            config(max)
                .min_size(min)
                .acquire_timeout(Duration::from_millis(100))
                .housekeeping_period(Duration::from_millis(40))
                .build()
                .unwrap(),
        );
        let mut held: Vec<PooledConnection<Mock>> = Vec::new();
        let mut detached = Vec::new();
        let mut allowed = max;
        // The highest bound ever in force: what the manager may see alive.
        let mut highest = max;
        for op in ops {
            match op {
                Op::Get => {
                    if let Ok(c) = pool.get().await {
                        held.push(c);
                    }
                }
                Op::GetTimeout => {
                    if let Ok(c) = pool.get_timeout(Duration::from_millis(7)).await {
                        held.push(c);
                    }
                }
                Op::CancelAfterOnePoll => {
                    let fut = pool.get();
                    tokio::pin!(fut);
                    if let std::task::Poll::Ready(Ok(c)) = futures::poll!(fut.as_mut()) {
                        held.push(c);
                    }
                }
                Op::Drop(i) => drop(pick(&mut held, i)),
                Op::Discard(i) => {
                    if let Some(c) = pick(&mut held, i) {
                        PooledConnection::discard(c);
                    }
                }
                Op::Detach(i) => {
                    if let Some(c) = pick(&mut held, i) {
                        detached.push(PooledConnection::detach(c));
                    }
                }
                Op::Broken(i) => {
                    if let Some(mut c) = pick(&mut held, i) {
                        c.broken = true;
                    }
                }
                Op::Dirty(i) => {
                    if let Some(mut c) = pick(&mut held, i) {
                        c.dirty = true;
                    }
                }
                Op::FailConnects(on) => mock.script.set(&mock.script.fail_connect, on),
                Op::FailResets(on) => mock.script.set(&mock.script.fail_reset, on),
                Op::SoftEvict => pool.soft_evict_all(),
                Op::Advance(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Op::Resize(n) => {
                    let n = n.min(pool.config().max_size_ceiling());
                    match pool.resize(n) {
                        Ok(()) => assert_eq!(pool.state().max_size, n),
                        Err(e) => assert!(n < min, "resize({n}) refused: {e}"),
                    }
                }
                Op::AwaitClose(on) => {
                    mock.script.on_close.set(support::Behaviour::Slow);
                    mock.script.set(&mock.script.await_close, on);
                }
                Op::Retain => {
                    let idle = pool.metrics().idle as usize;
                    let closed = pool.retain(|c, _| c.id % 2 == 0);
                    assert!(closed <= idle);
                }
            }
            // Above the live bound only with connections kept from before a
            // shrink: never more than were open then.
            highest = highest.max(pool.state().max_size);
            let out = detached.len() as i64;
            assert_bounds_within(&pool, out, allowed.max(pool.state().max_size), highest);
            settle(&pool, out, allowed.max(pool.state().max_size), highest).await;
            let m = pool.metrics();
            if m.total > m.max_size {
                assert!(
                    m.in_use > 0 || m.opening > 0 || m.closing > 0,
                    "idle above the bound: {m:?}"
                );
            }
            allowed = m.total.max(m.max_size);
            assert_eq!(m.in_use as usize, held.len(), "{m:?}");
            if min == 0 {
                // Without a min_size to refill, connects end with demand.
                assert_eq!(m.opening, 0, "connects must not outlive demand: {m:?}");
            }
            assert_eq!(m.waiting, 0, "{m:?}");
            assert_eq!(
                mock.script.alive(),
                // A connect in flight is counted by the pool, not yet by the mock.
                i64::from(m.total - m.opening) + detached.len() as i64,
                "every open connection is accounted for: {m:?}"
            );
        }
        drop(held);
        let bound = pool.state().max_size;
        settle(&pool, detached.len() as i64, allowed.max(bound), highest).await;
        pool.close().await;
        assert_eq!(mock.script.alive(), detached.len() as i64);
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_for_any_sequence(
        max in 1u32..5,
        min in 0u32..3,
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        run(max, min.min(max), ops);
    }
}
