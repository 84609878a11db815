//! Loom models of the engine's concurrent protocols, run on the real code:
//! a real `Engine` over a manager that does nothing, driven synchronously.
//!
//! Loom cannot run tokio's runtime, so what needs one is left out and
//! played by the model instead: connects (a connection is put in service
//! with `Reservation::fill`, as a connector does after its connect), the
//! deadline sweeper task (the model calls `WaiterQueue::sweep`, which is
//! all the task does once awake), the spawned connector tasks (under
//! `--cfg loom` `request_connections` counts the connectors it would spawn,
//! and the model plays a leaving connector with `Engine::connector_done`),
//! and the async half of `close` (waiting for connections in use to come
//! back; the model calls its synchronous half, `Engine::shut`). Checkout
//! (`Engine::acquire`, `try_acquire`), the waiter queue, the guard's drop,
//! `checkin`, `deliver`, reservations and `evict` run as in production.
//! Waits block in loom's `block_on`, so a lost wake-up shows up as a
//! deadlock.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p pool-core
//! --no-default-features --lib --release -- loom`: every schedule, about a
//! minute on two cores. `scripts/test.sh` bounds the search with
//! `LOOM_MAX_PREEMPTIONS=4` (about 7 s), which still catches each bug
//! its comment there lists.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use loom::future::block_on;
use loom::thread;
use pool_api::{async_trait, ManageConnection, PoolConfig, PoolError};

use crate::clock::Stamp;
use crate::engine::Engine;
use crate::engine::PooledConnection;
use crate::entry::Entry;

/// A manager whose connections are unit values and whose calls do nothing.
#[derive(Debug)]
struct Noop;

#[async_trait]
impl ManageConnection for Noop {
    type Connection = ();
    type Error = std::io::Error;

    async fn connect(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    async fn is_valid(&self, _: &mut ()) -> Result<(), std::io::Error> {
        Ok(())
    }
}

const WAIT: Duration = Duration::from_secs(3600);

/// A pool of `max` slots with `idle` connections idle in it.
fn pool(max: u32, idle: u32) -> std::sync::Arc<Engine<Noop>> {
    let config = PoolConfig::builder()
        .max_size(max)
        .min_size(0)
        .max_concurrent_connects(1)
        .build()
        .unwrap();
    let shared = std::sync::Arc::new(Engine::new(Noop, config, None));
    for _ in 0..idle {
        let now = shared.clock.now();
        let entry = Entry {
            conn: (),
            created_at: now,
            expires_at: Stamp::NEVER,
            last_used: now,
            generation: 0,
            last_ping: now,
            fresh: false,
            from_connect: false,
        };
        shared.reserve().expect("a free slot").fill(entry);
    }
    shared
}

/// Polls `f` once; true if it is still pending.
fn poll_once<F: Future>(f: Pin<&mut F>) -> bool {
    let mut f = f;
    block_on(std::future::poll_fn(|cx| {
        Poll::Ready(f.as_mut().poll(cx).is_pending())
    }))
}

/// A future's outcome, as a connection or a panic.
fn got(r: Result<PooledConnection<Noop>, PoolError<std::io::Error>>) -> PooledConnection<Noop> {
    match r {
        Ok(c) => c,
        Err(e) => panic!("expected a connection, got {e}"),
    }
}

/// Every slot accounted for: `idle`, `in_use`, nothing opening, nobody
/// counted as waiting.
fn assert_counts(shared: &Engine<Noop>, idle: u32, in_use: u32) {
    let s = shared.state();
    assert_eq!((s.idle, s.in_use, s.opening), (idle, in_use, 0), "{s:?}");
    assert_eq!(shared.waiters.waiting(), 0);
}

/// At rest, with every other handle and guard gone: the pool's strong
/// count is the model's own `Arc` and one per connection parked `Parked`
/// (`slots/parked.rs`, "The pool's reference"), none lost, none twice.
fn assert_refs(shared: &std::sync::Arc<Engine<Noop>>) {
    assert_eq!(
        std::sync::Arc::strong_count(shared),
        1 + shared.slots.parked(),
        "the pool's count does not match its parked connections"
    );
}

/// A guard dropped (the real `checkin` and `deliver`) racing a checkout
/// that finds the stack empty: the checkout always ends with the
/// connection, popped, found when queuing, or handed over; never queued
/// while it sits idle (that would deadlock here).
#[test]
fn loom_release_during_acquire() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let releaser = thread::spawn(move || drop(guard));
        let conn = got(block_on(shared.acquire(WAIT, Location::caller())));
        releaser.join().unwrap();
        assert_counts(&shared, 0, 1);
        drop(conn);
        assert_counts(&shared, 1, 0);
    });
}

/// A return racing a waiter that gives up ("poll once, then drop"): the
/// connection ends up idle exactly once and nobody is left counted as
/// waiting; the next checkout gets it at once (`WAITERS` was cleared).
#[test]
fn loom_return_races_cancelled_waiter() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let mut get = Box::pin(shared.acquire(WAIT, Location::caller()));
        assert!(poll_once(get.as_mut()), "the stack starts empty");
        let releaser = thread::spawn(move || drop(guard));
        drop(get);
        releaser.join().unwrap();
        assert_counts(&shared, 1, 0);
        assert!(
            shared.try_acquire(Location::caller()).is_some(),
            "WAITERS left set"
        );
    });
}

/// Two queued checkouts, the second giving up while a connection comes
/// back: the first (longest) waiter is served, and nothing is lost.
#[test]
fn loom_first_waiter_served_while_second_cancels() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let mut first = Box::pin(shared.acquire(WAIT, Location::caller()));
        let mut second = Box::pin(shared.acquire(WAIT, Location::caller()));
        assert!(poll_once(first.as_mut()));
        assert!(poll_once(second.as_mut()));
        let releaser = thread::spawn(move || drop(guard));
        drop(second);
        let conn = got(block_on(first.as_mut()));
        releaser.join().unwrap();
        assert_counts(&shared, 0, 1);
        drop(conn);
        assert_counts(&shared, 1, 0);
    });
}

/// The deadline sweep (what the sweeper task runs) racing a handoff to the
/// same waiter: the checkout either gets the connection or times out, and
/// then the connection is idle; the waiting count comes back to zero.
#[test]
fn loom_sweep_races_handoff() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let mut get = Box::pin(shared.acquire(Duration::from_secs(1), Location::caller()));
        assert!(poll_once(get.as_mut()));
        let late = shared.clock.now().after(WAIT);
        let s = shared.clone();
        let releaser = thread::spawn(move || drop(guard));
        let sweeper = thread::spawn(move || s.waiters.sweep(|| s.slots.clear_waiting(), late));
        let outcome = block_on(get.as_mut());
        releaser.join().unwrap();
        assert_eq!(sweeper.join().unwrap(), None, "nothing left to sweep");
        drop(get);
        match outcome {
            Ok(conn) => {
                assert_counts(&shared, 0, 1);
                drop(conn);
            }
            Err(PoolError::Timeout { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
        assert_counts(&shared, 1, 0);
    });
}

/// Closing the pool while a checkout waits and a connection comes back:
/// the connection is handed over, or closed by the closed stack, or closed
/// with the idle chain; never lost or duplicated, and every slot is free
/// once the caller lets go.
#[test]
fn loom_close_races_return_and_waiter() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let mut get = Box::pin(shared.acquire(WAIT, Location::caller()));
        assert!(poll_once(get.as_mut()));
        let c = shared.clone();
        let releaser = thread::spawn(move || drop(guard));
        let closer = thread::spawn(move || c.shut());
        let outcome = block_on(get.as_mut());
        releaser.join().unwrap();
        closer.join().unwrap();
        drop(get);
        match outcome {
            Ok(conn) => drop(conn),
            Err(PoolError::Closed) => {}
            Err(e) => panic!("unexpected {e}"),
        }
        assert_counts(&shared, 0, 0);
        assert_eq!(shared.slots.open(), 0, "a slot was lost");
    });
}

/// The store-buffering protocol between the waiter count and the connector
/// count (see `Connector`): a caller queues while the only connector,
/// finding no demand, leaves. Either the caller sees the connector gone
/// and starts one, or the leaving connector sees the caller and starts
/// one; never neither (the caller would wait for a connection nobody
/// opens).
#[test]
fn loom_waiter_meets_leaving_connector() {
    loom::model(|| {
        let shared = pool(2, 0);
        assert!(shared.connector.claim(1, || 1), "one connector runs");
        let s = shared.clone();
        let connector = thread::spawn(move || {
            let place = crate::engine::connect::Place::adopt(s.clone());
            s.connector_done(place);
        });
        let mut get = Box::pin(shared.acquire(WAIT, Location::caller()));
        assert!(poll_once(get.as_mut()), "nothing idle: it queues");
        connector.join().unwrap();
        assert!(
            shared.connector.started() >= 1,
            "a waiter is queued and no connector was started"
        );
        drop(get);
    });
}

/// A connect given up (its `Reservation` dropped) while a caller queues:
/// the slot comes back, and a connector is started for the caller.
#[test]
fn loom_reservation_dropped_while_waiter_queues() {
    loom::model(|| {
        let shared = pool(1, 0);
        let reservation = shared.reserve().expect("a free slot");
        let dropper = thread::spawn(move || drop(reservation));
        let mut get = Box::pin(shared.acquire(WAIT, Location::caller()));
        assert!(poll_once(get.as_mut()), "nothing idle: it queues");
        dropper.join().unwrap();
        assert_eq!(shared.slots.open(), 0, "the slot came back");
        assert!(
            shared.connector.started() >= 1,
            "a waiter is queued with a free slot and no connector"
        );
        drop(get);
    });
}

/// A connection on its way back (a `Returning`: a reset or hook in a
/// task) stops counting as supply (closed, or past its grace) while a
/// caller queues. The caller's demand is the waiters less the returning
/// connections: either it sees the return gone and starts a connector,
/// or the ending return sees it waiting and starts one; never neither
/// (the caller would wait for a connection that is not coming).
#[test]
fn loom_return_ends_while_waiter_queues() {
    loom::model(|| {
        let shared = pool(2, 0);
        let supply = crate::engine::returning::Returning::new(shared.clone());
        let returner = thread::spawn(move || drop(supply));
        let mut get = Box::pin(shared.acquire(WAIT, Location::caller()));
        assert!(poll_once(get.as_mut()), "nothing idle: it queues");
        returner.join().unwrap();
        assert!(
            shared.connector.started() >= 1,
            "a waiter is queued, no connection is coming back, and no connector was started"
        );
        drop(get);
    });
}

/// Thread affinity (`affinity.rs`, `slots/parked.rs`): a thread parks the
/// connection it returns (nobody waits) and then tries to take it back from
/// its own list, while a checkout on another thread finds the stack empty
/// and queues. The Dekker race between parking and queuing: the queued
/// caller always ends with the connection (scanned at registration, or
/// handed over by the parking side, or by the second return); never queued
/// while it sits parked (a deadlock here).
#[test]
fn loom_park_and_recall_race_waiter_registration() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let s = shared.clone();
        let returner = thread::spawn(move || {
            drop(guard);
            // Its own list first: claims the parked connection back unless
            // the waiter took it.
            drop(s.try_acquire(Location::caller()));
        });
        let conn = got(block_on(shared.acquire(WAIT, Location::caller())));
        returner.join().unwrap();
        assert_counts(&shared, 0, 1);
        drop(conn);
        assert_counts(&shared, 1, 0);
        assert!(
            shared.try_acquire(Location::caller()).is_some(),
            "WAITERS left set, or the connection stranded"
        );
        assert_refs(&shared);
    });
}

/// A return parking its connection while the pool closes: `close` sets
/// `CLOSED` and then scans for parked connections, the return parks and
/// then reads the flags; whichever way they interleave, the connection is
/// closed and its slot freed.
#[test]
fn loom_park_races_close() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let returner = thread::spawn(move || drop(guard));
        shared.shut();
        returner.join().unwrap();
        assert_counts(&shared, 0, 0);
        assert_eq!(shared.slots.open(), 0, "a parked connection outlived close");
        assert_refs(&shared);
    });
}

/// A connection parked by a thread that then exited (its list gone) is
/// still found, by a `try_get` on another thread and by the housekeeper's
/// sweep racing it: exactly one of them claims it.
#[test]
fn loom_parked_by_an_exited_thread_is_found() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        thread::spawn(move || drop(guard)).join().unwrap();
        assert_counts(&shared, 1, 0);
        let s = shared.clone();
        // Past the idle timeout: the sweep closes what it finds.
        let late = shared.clock.now().after(WAIT);
        let sweeper = thread::spawn(move || {
            let to_ping = s.retire_idle(late);
            assert!(to_ping.is_empty(), "no keepalive configured");
        });
        let got = shared.try_acquire(Location::caller());
        sweeper.join().unwrap();
        match got {
            Some(conn) => {
                assert_counts(&shared, 0, 1);
                drop(conn);
                assert_counts(&shared, 1, 0);
            }
            None => {
                assert_counts(&shared, 0, 0);
                assert_eq!(shared.slots.open(), 0, "the sweep closed it");
            }
        }
        assert_refs(&shared);
    });
}

/// Three parties on one slot: a return parks its connection (`Parking`)
/// and has not yet published when a `try_get` on another thread claims it,
/// uses it, closes the pool and returns it. That second park is refused
/// (closed) and takes the connection back, while the first returner's late
/// `publish` may land on the second park and leave its count of the pool
/// in the slot. Whichever way they interleave, every count of the pool is
/// released exactly once: the engine is freed once the last handle goes.
#[test]
fn loom_late_publish_on_a_refused_park() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let returner = thread::spawn(move || drop(guard));
        let s = shared.clone();
        let taker = thread::spawn(move || {
            let taken = s.try_acquire(Location::caller());
            s.shut();
            drop(taken);
        });
        returner.join().unwrap();
        taker.join().unwrap();
        assert_counts(&shared, 0, 0);
        assert_eq!(shared.slots.open(), 0, "a connection outlived close");
        assert_refs(&shared);
    });
}

/// The same three parties with a caller queuing instead of a close: the
/// re-park is refused because someone waits, the connection goes to the
/// waiter, and no count of the pool is lost or released twice.
#[test]
fn loom_late_publish_on_a_park_refused_for_a_waiter() {
    loom::model(|| {
        let shared = pool(1, 1);
        let guard = shared.try_acquire(Location::caller()).expect("one idle");
        let returner = thread::spawn(move || drop(guard));
        let s = shared.clone();
        let taker = thread::spawn(move || {
            let taken = s.try_acquire(Location::caller());
            let mut get = Box::pin(s.acquire(WAIT, Location::caller()));
            let queued = taken.is_some() && poll_once(get.as_mut());
            drop(taken);
            if queued {
                drop(got(block_on(get.as_mut())));
            }
        });
        returner.join().unwrap();
        taker.join().unwrap();
        assert_counts(&shared, 1, 0);
        assert_refs(&shared);
    });
}

/// A slot freed (a connection closed outside the stack: a failed
/// validation, a broken return, an abandoned connect) while the pool
/// closes. `close` sets `CLOSED`, arms its wake-up and reads the open
/// count; the free decrements it and reads `CLOSED`. A store-buffering
/// pair: without the two SeqCst fences both read the old value, and
/// `close` sleeps on a count that reached zero while the free wakes
/// nobody. Here: either `close` sees nothing open, or the free sees the
/// pool closed (and wakes it).
#[test]
fn loom_free_races_close() {
    loom::model(|| {
        let shared = pool(1, 0);
        let slot = shared.slots.reserve().expect("a free slot");
        let s = shared.clone();
        let freer = thread::spawn(move || s.release_slot(slot));
        shared.shut();
        let drained = shared.drained_now();
        let woke = freer.join().unwrap();
        assert!(
            drained || woke,
            "close saw a slot open and the free saw the pool open: close sleeps forever"
        );
    });
}

/// `Pool::new` failing: a later initial connect gives its slot back with
/// `Reservation::abandon` while `close` (`shut`, then its wake-up armed,
/// then the open count read) waits for it. The free is the same
/// store-buffering pair as in `loom_free_races_close`, through the one
/// path every free takes: either `close` sees the slot free, or the
/// abandon sees the pool closed and wakes it. An abandon that freed the
/// slot without the fence and the wake-up left `close` asleep for good.
#[test]
fn loom_abandon_races_close() {
    loom::model(|| {
        let shared = pool(1, 0);
        let reservation = shared.reserve().expect("a free slot");
        let abandoner = thread::spawn(move || reservation.abandon());
        shared.shut();
        let mut woken = std::pin::pin!(shared.drained.notified());
        woken.as_mut().enable();
        let drained = shared.drained_now();
        abandoner.join().unwrap();
        let woke = !poll_once(woken.as_mut());
        assert!(
            drained || woke,
            "close saw the slot taken and the abandon did not wake it: close sleeps forever"
        );
        assert_eq!(shared.slots.open(), 0);
    });
}

/// A shrinking `resize` racing a return that parks: the limit is lowered
/// and the slots scanned, the return parks and then reads the limit.
/// Either the return sees the lower bound and retires its connection, or
/// the scan finds it parked and retires it; the pool never stays above
/// its new bound with a connection parked, and no count of the pool is
/// lost.
#[test]
fn loom_resize_races_park() {
    // Two connections make this the largest model; three preemptions
    // cover the race (a park between the limit's store and the scan) in
    // a few seconds instead of a minute.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let shared = pool(2, 2);
        let a = shared.try_acquire(Location::caller()).expect("two idle");
        let returner = thread::spawn(move || drop(a));
        shared.resize(1).expect("a valid size");
        returner.join().unwrap();
        let s = shared.state();
        assert!(s.idle + s.in_use <= 1, "above the new bound at rest: {s:?}");
        assert_eq!(shared.slots.open(), s.idle + s.in_use);
        assert_refs(&shared);
    });
}
