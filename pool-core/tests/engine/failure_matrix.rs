//! Every manager call and every hook, failing in every way, while callers
//! time out and are aborted mid-flight: the pool keeps its bound, loses no
//! slot and no connection, leaves no waiter behind, and serves again once
//! the call behaves.
//!
//! One test per (call, behaviour): `connect`, `is_valid`, `reset`,
//! `has_broken`, `needs_reset`, `after_connect`, `before_acquire` and
//! `after_release`, each `Ok`, `Err`, `Slow`, `Never` or `Panic` (the two
//! synchronous checks have no `Slow` or `Never`; their `Err` answers "yes":
//! broken, or needs a reset). On the paused clock, so `Slow` and `Never`
//! cost no real time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use crate::support::{
    assert_bounds, assert_settled, config, Act, Behaviour, Mock, Scripted, SCRIPTED_PANIC,
};
use pool_core::{Pool, ValidationMode};

#[derive(Debug, Clone, Copy)]
enum Point {
    Connect,
    IsValid,
    Reset,
    HasBroken,
    NeedsReset,
    AfterConnect,
    BeforeAcquire,
    AfterRelease,
}

const MAX: u32 = 3;
const TASKS: usize = 6;
const ROUNDS: usize = 4;

fn act<'a>(mock: &'a Mock, hooks: &'a Scripted, point: Point) -> &'a Act {
    let s = &mock.script;
    match point {
        Point::Connect => &s.on_connect,
        Point::IsValid => &s.on_is_valid,
        Point::Reset => &s.on_reset,
        Point::HasBroken => &s.on_has_broken,
        Point::NeedsReset => &s.on_needs_reset,
        Point::AfterConnect => &hooks.0.after_connect,
        Point::BeforeAcquire => &hooks.0.before_acquire,
        Point::AfterRelease => &hooks.0.after_release,
    }
}

/// Keeps the scripted panics (expected by the hundred) out of the output;
/// any other panic is reported as usual.
fn quiet_scripted_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !message.starts_with(SCRIPTED_PANIC) {
                default(info);
            }
        }));
    });
}

async fn run(point: Point, behaviour: Behaviour) {
    quiet_scripted_panics();
    let mock = Mock::default();
    let hooks = Scripted::default();
    let pool = Pool::new_lazy_with_hooks(
        mock.clone(),
        config(MAX)
            .max_concurrent_connects(2)
            // Every checkout pings, so `is_valid` is on every path.
            .validation_mode(ValidationMode::IsValid)
            .validation_bypass(Duration::ZERO)
            .validation_timeout(Duration::from_millis(50))
            .connect_timeout(Duration::from_millis(100))
            .acquire_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
        hooks.clone(),
    );
    act(&mock, &hooks, point).set(behaviour);

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (pool, stop) = (pool.clone(), stop.clone());
        tokio::spawn(async move {
            let mut samples = 0u32;
            while !stop.load(Ordering::SeqCst) && samples < 100_000 {
                assert_bounds(&pool);
                samples += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            samples
        })
    };

    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    let Ok(mut conn) = pool.get_timeout(Duration::from_millis(120)).await else {
                        continue;
                    };
                    // Half the returns need a reset, so `reset` is on the path.
                    conn.dirty = (t + round) % 2 == 0;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    drop(conn);
                }
            })
        })
        .collect();
    // Abort every other task at a different point of its run: waiting,
    // validating, holding or returning, depending on the behaviour.
    for (i, task) in tasks.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
        tokio::time::sleep(Duration::from_millis(7 * i as u64)).await;
        task.abort();
    }
    for (i, task) in tasks.into_iter().enumerate() {
        let joined = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{point:?} {behaviour:?}: task {i} hangs: {:?}",
                    pool.metrics()
                )
            });
        match joined {
            Ok(()) => {}
            Err(e) if e.is_cancelled() && i % 2 == 1 => {}
            Err(e) if e.is_panic() && behaviour == Behaviour::Panic => {}
            Err(e) => panic!("task {i} ended with {e:?}"),
        }
    }

    // Quiescence: every timeout (connect, validation, acquire) has passed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::SeqCst);
    assert!(watcher.await.expect("the watcher's checks held") > 0);
    let m = pool.metrics();
    assert_eq!(
        m.in_use, 0,
        "{point:?} {behaviour:?}: a slot is still held: {m:?}"
    );
    assert_settled(&pool);

    // Behaving again, the pool serves (a fresh connection if need be).
    act(&mock, &hooks, point).set(Behaviour::Ok);
    let conn = pool
        .get_timeout(Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("{point:?} {behaviour:?}: no connection afterwards: {e}"));
    drop(conn);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_settled(&pool);
    // Bounded: a slot that never comes back would make `close` wait forever.
    tokio::time::timeout(Duration::from_secs(10), pool.close())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{point:?} {behaviour:?}: close did not finish: {:?}",
                pool.metrics()
            )
        });
    assert_eq!(
        mock.script.alive(),
        0,
        "{point:?} {behaviour:?}: close left connections open"
    );
}

macro_rules! matrix {
    ($($(#[$attr:meta])* $name:ident: $point:ident $behaviour:ident;)*) => {$(
        #[tokio::test(start_paused = true)]
        $(#[$attr])*
        async fn $name() {
            run(Point::$point, Behaviour::$behaviour).await;
        }
    )*};
}

matrix! {
    connect_ok: Connect Ok;
    connect_err: Connect Err;
    connect_slow: Connect Slow;
    connect_never: Connect Never;
    // A panicking connect is a failed connect with back-off (it used to
    // end its connector and respawn it at once: 150 000 connects in 4 s).
    connect_panic: Connect Panic;
    is_valid_ok: IsValid Ok;
    is_valid_err: IsValid Err;
    is_valid_slow: IsValid Slow;
    is_valid_never: IsValid Never;
    is_valid_panic: IsValid Panic;
    reset_ok: Reset Ok;
    reset_err: Reset Err;
    reset_slow: Reset Slow;
    reset_never: Reset Never;
    reset_panic: Reset Panic;
    has_broken_ok: HasBroken Ok;
    has_broken_yes: HasBroken Err;
    has_broken_panic: HasBroken Panic;
    needs_reset_ok: NeedsReset Ok;
    needs_reset_yes: NeedsReset Err;
    needs_reset_panic: NeedsReset Panic;
    after_connect_ok: AfterConnect Ok;
    after_connect_err: AfterConnect Err;
    after_connect_slow: AfterConnect Slow;
    after_connect_never: AfterConnect Never;
    after_connect_panic: AfterConnect Panic;
    before_acquire_ok: BeforeAcquire Ok;
    before_acquire_err: BeforeAcquire Err;
    before_acquire_slow: BeforeAcquire Slow;
    before_acquire_never: BeforeAcquire Never;
    before_acquire_panic: BeforeAcquire Panic;
    after_release_ok: AfterRelease Ok;
    after_release_err: AfterRelease Err;
    after_release_slow: AfterRelease Slow;
    after_release_never: AfterRelease Never;
    after_release_panic: AfterRelease Panic;
}
