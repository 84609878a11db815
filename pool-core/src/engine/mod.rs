//! # Engine design
//!
//! How the engine works: every file of `pool-core/src`'s engine and its
//! leaves, one connection's journey through them, and the implementation
//! details (the slots that make the bound hold by construction, the idle
//! stack, thread affinity, the waiting protocol, connects, returns, hooks
//! and counts). The names in backticks are the crate's private items and
//! files; read them beside the source. This text is also the module doc of
//! `pool-core/src/engine/mod.rs`, and a unit test keeps the two the same.
//!
//! ## Map
//!
//! The engine is one type, `Engine` (`engine/mod.rs`), whose fields are
//! private to the `engine/` folder; each file there is one phase of a
//! connection's life, an `impl Engine` block reading those fields. The
//! leaves below it own their state, are generic over the connection, and
//! never name the engine; `scripts/import_graph.py` checks that their
//! imports form no circle and run only downwards, and that the engine
//! files' calls form no circle either.
//!
//! | file | part |
//! |---|---|
//! | `pool.rs` | `Pool`, the public handle: one-line calls into the engine |
//! | `engine/mod.rs` | `Engine`: its fields, construction, and what it reports (`state`, `metrics`, `holders`, `is_closed`, `is_suspended`, `expired`, the timeout error) |
//! | `engine/checkout.rs` | checkout: `acquire` (the fast path, `claim_or_pop`, `hand_out`), `acquire_slow`, `wait_for`, `handed_out_after_wait`, `try_acquire`; the waiter queue's `WaitHost` |
//! | `engine/checks.rs` | the checkout checks, each returning a verdict the checkout acts on: `check_not_broken` (with `is_broken`, which the return uses too), `needs_check`, and on the slow path `vet_handoff` (a `Vetted`) and `check_handoff`, `run_checks` (`before_acquire`, `is_valid`) |
//! | `engine/checkin.rs` | the guard `PooledConnection` and the return path its drop starts: `checkin`, `deliver_held`, `manager_panicked` |
//! | `engine/returning.rs` | a connection on its way back: `reset_then_deliver`, `return_steps`, and `Returning`, which counts it as supply meanwhile |
//! | `engine/parking.rs` | the pool's count handed between a guard and a parked slot: `park_returned`, `push_parked`, `collect_idle`, `collect_parked`, `release_parked_counts` |
//! | `engine/delivery.rs` | the one delivery path: `deliver`, `deliver_in_place` (to the longest waiter, else the idle stack) |
//! | `engine/lifecycle.rs` | the pool as a whole: `open_initial`, `add`, `close`, `shut`, `resize`, `soft_evict_all`, `retain`, suspend and resume |
//! | `engine/retire.rs` | the sink every ending runs into: `evict`, `close_in_slot`, `free_slot`, `give_back_slot` |
//! | `engine/connect.rs` | connects apart from callers: the connector task (its entry `start`, `open_while_wanted`), `reserve`, `open`, `connect_failed`, `failed_fast` |
//! | `engine/demand.rs` | what the connectors are for: `request_connections`, `demand`, `connect_limit`, `saw_failure`; the `Connector` count |
//! | `engine/in_flight.rs` | `Floating` (a connection being checked or reset, closed if dropped), `Reservation` (a slot reserved for a connect) |
//! | `engine/housekeeper.rs` | the housekeeper task: idle and lifetime retirement, keepalive pings, refill, the leak scan |
//! | `engine/sweeper.rs` | the sweeper task: times out waiters past their deadline |
//! | `engine/tasks.rs` | the background tasks' handles and entries: `Housekeeper`, `Sweeper`, `Starts`, `spawn_once` |
//! | `engine/loom_tests.rs`, `engine/count_tests.rs` | loom models of the real engine (`--cfg loom`); the pool's reference count under parking |
//! | `slots.rs`, `slots/slot.rs`, `entry.rs` | leaf: the slots, the idle stack and the free list; the tokens `Occupied`, `Held` and `Vacant`; one slot's state; what the pool knows about a connection |
//! | `slots/parked.rs` | leaf: a connection parked in its own slot, claimed by a CAS on the slot's state; the ordering against queuing and closing |
//! | `slots/leak.rs` | leaf: each slot's holder site and leak record |
//! | `index_stack.rs` | leaf: the lock-free Treiber stack of slot indices |
//! | `waiters.rs`, `waiters/waiter.rs`, `linked_list.rs` | leaf: `WaiterQueue` and the `Waiter` future, the fair waiting protocol (it talks back through the narrow `WaitHost` trait); the intrusive list |
//! | `affinity.rs` | leaf: each thread's list of the slots it parked, over `&Slots` |
//! | `health.rs` | leaf: connect health: back-off, failure epoch, fail-fast state, last error, the connects running |
//! | `suspend.rs` | leaf: the suspension flag and the shelved connections |
//! | `stats.rs`, `histogram.rs`, `export.rs` | leaf: counters, histograms, the `PoolMetrics` snapshot, export through `metrics` |
//! | `coop.rs`, `clock.rs`, `sync.rs` | leaf: tokio's cooperative budget, timestamps, the loom shim |
//!
//! The calls run one way: in this order, each engine file calls only files
//! after it: `checkout.rs`, `checkin.rs`, `checks.rs`, `lifecycle.rs`,
//! `housekeeper.rs`, `returning.rs`, `parking.rs`, `connect.rs`,
//! `in_flight.rs`, `delivery.rs`, `retire.rs`, `demand.rs`, `tasks.rs`,
//! `sweeper.rs`, `mod.rs`. None goes back. The background tasks (the
//! connectors, the housekeeper, the sweeper) begin at entries the engine is
//! given when it is built (`Starts`, filled by `Engine::new` with
//! `connect::start`, `housekeeper::start` and `sweeper::start`), so a phase
//! that asks for a task (a freed slot's `free_slot` calls
//! `request_connections`; a waiting checkout calls `Housekeeper::ensure`)
//! starts it without naming its file, and the task's own calls
//! (`Reservation::fill`, `deliver`) run later, on its task.
//!
//! ## One connection's journey
//!
//! One connection from its connect to its close; each step names the
//! function and its file under `pool-core/src`.
//!
//! 1. **Connect.** A caller that queues (`WaitHost::queued`,
//!    `engine/checkout.rs`) calls `Engine::request_connections`
//!    (`engine/demand.rs`), which reads `Engine::demand` and
//!    `Engine::connect_limit`, claims a place (`Connector::claim`) and
//!    spawns a connector task through its entry (`start`,
//!    `engine/connect.rs`). Its
//!    `open_while_wanted` reserves a slot (`Engine::reserve`, a
//!    `Reservation` of `engine/in_flight.rs`), opens the connection
//!    (`Engine::open`: the manager's `connect`, then `after_connect`) and
//!    calls `Reservation::fill`, which puts it in its slot and calls
//!    `Engine::deliver` (`engine/delivery.rs`).
//! 2. **Delivery.** `deliver` calls `Engine::deliver_in_place`: with callers
//!    waiting, `WaiterQueue::offer` hands the slot's `Held` token to the
//!    longest waiter and wakes it; with none, `Slots::push_held` puts the
//!    slot on the idle stack.
//! 3. **Checkout of an idle one.** `Pool::get` (`pool.rs`) calls
//!    `Engine::acquire` (`engine/checkout.rs`). Its fast path calls
//!    `Engine::claim_or_pop`: a slot this thread parked
//!    (`Affinity::pop_parked`), else `Slots::pop_held`, one CAS each. Then
//!    `Engine::expired` (`engine/mod.rs`), `Engine::check_not_broken` and
//!    `Engine::needs_check` (`engine/checks.rs`) give their verdicts, and
//!    `Engine::hand_out` makes the guard, a `PooledConnection`
//!    (`engine/checkin.rs`).
//! 4. **Handoff to a waiter.** With nothing idle, `Engine::acquire_slow`
//!    calls `Engine::wait_for`, which pins a `Waiter` (`waiters.rs`) and
//!    queues it; the delivery of step 2 resolves it with the `Held`.
//!    `Engine::shelve_if_suspended` (`engine/lifecycle.rs`) passes it on
//!    unless the pool is suspended, and `Engine::vet_handoff`
//!    (`engine/checks.rs`) returns a `Vetted`: `Vetted::Pass` (opened for
//!    this caller, or unbroken and not due a check) goes to
//!    `Engine::handed_out_after_wait` (`engine/checkout.rs`), which makes the
//!    guard; `Vetted::Due` goes to `Engine::check_handoff` first
//!    (`before_acquire`, `is_valid`, while a `Floating` holds it).
//! 5. **Return with reset.** `PooledConnection::drop` calls `Engine::checkin`
//!    (`engine/checkin.rs`): `Engine::release_tracking`, `Engine::is_broken`
//!    (`engine/checks.rs`), `Engine::expired`, then the manager's
//!    `needs_reset`. A dirty connection leaves its slot as a `Floating`,
//!    counted as supply by a `Returning` (`engine/returning.rs`), and a
//!    spawned `reset_then_deliver` runs `return_steps` (the manager's
//!    `reset`, then `after_release`) and calls `Engine::deliver`. A clean
//!    one goes to `Engine::deliver_held`: parked in its slot
//!    (`Engine::park_returned`, `engine/parking.rs`) or pushed on the stack
//!    while nobody waits, else `Engine::deliver_in_place`.
//! 6. **Retire.** A broken or expired connection (at checkout, at return, or
//!    found by the housekeeper), or one above the bound after a shrink, goes
//!    to `Engine::evict` (`engine/retire.rs`): `Engine::close_in_slot` drops
//!    it (or runs the manager's `close` in a task of its own when it
//!    `awaits_close`), then `Engine::free_slot` gives the slot back through
//!    `Engine::give_back_slot` and calls `Engine::request_connections` for a
//!    replacement: step 1 again.
//!
//! ## Implementation details
//!
//! **Slots and the bound.** The pool allocates `max_size` slots up front. A
//! connection always occupies one, from the moment its connect starts until
//! it is closed. Free slots sit on a lock-free free list; reserving one is a
//! pop, so the bound holds by construction: there are never more slots than
//! `max_size`, whatever interleaving, cancellation or panic happens. Who
//! owns a slot is a value: an `Occupied` (a slot with its connection), a `Held` (a slot whose
//! connection is used in place, the guard's) or a
//! `Vacant` (an empty one), neither `Copy`; a slot reserved for a connect
//! is a `Reservation` whose `Drop` gives it back.
//!
//! **The idle set** is a Treiber stack of slot indices (`index_stack.rs`):
//! LIFO, so a light load keeps reusing the same few hot connections and the
//! rest idle out. Checkout pops, a clean return pushes; neither locks nor
//! allocates.
//!
//! **Thread affinity** (`affinity.rs`, `slots/parked.rs`): with nobody
//! waiting, a clean return parks its connection in its own slot and the
//! slot joins the thread's list of parked slots, so that thread's next checkout claims it back
//! without writing the stack's head word, the one line every other thread
//! writes. A parked connection is idle like the others: the first caller
//! to queue, `try_get`, the housekeeper, `close`, `soft_evict_all`,
//! `resize` and `retain` scan the slots for it. A return while anyone
//! waits is never parked: parking and queuing are ordered by a pair of
//! SeqCst fences (`slots/parked.rs`, "Parking against queuing").
//!
//! **Waiting** (`waiters.rs`): a caller that finds the stack empty links a
//! node that lives in its own future into the waiter queue (no allocation)
//! and sets the stack's `WAITERS` bit in the same word as its head. While
//! the bit is set a return cannot push: it hands its connection to the
//! longest waiter under the queue's lock, and newcomers queue behind. The
//! connection stays in its slot: what the waiter is handed is the slot's
//! `Held` token, as a guard holds it.
//! Waiters are woken by that handoff, never by polling. Their deadlines are
//! kept by one sweeper task per pool (`engine/sweeper.rs`), not a timer per waiter.
//!
//! **Creation** is demand-driven and apart from callers (`engine/connect.rs`,
//! `engine/demand.rs`):
//! queuing a waiter asks for connections, one per waiter at most (a
//! connector stops once the other connectors cover the callers waiting); at
//! most `max_concurrent_connects` connector tasks open them (after an
//! outage, up to `max_concurrent_reconnects` while the pool is back below
//! its size at the failures), and each new connection is delivered exactly
//! like a returned one, to the longest waiter or onto the stack. A caller who
//! gives up does not abort a half-open connection. Back-off, fail fast and
//! the failure epoch are the connect health's (`health.rs`).
//!
//! **Returns** (`engine/checkin.rs`): broken or expired connections are closed; dirty
//! ones (`needs_reset`), or any when an `after_release` hook runs, are reset
//! in a spawned task before anyone can get them; clean ones are delivered
//! inline. A connection in such a task counts as supply for the callers
//! waiting, for a short grace: a caller queuing meanwhile waits for it
//! rather than start a connect beside it.
//!
//! **Hooks cost only their phase**: `after_connect` runs inside the connect;
//! `before_acquire` sends checkouts to the slow path and `after_release`
//! returns through a task only when the hooks say they use them
//! (`Hooks::uses_before_acquire`, `Hooks::uses_after_release`).
//!
//! **Suspension** (`suspend.rs`, `engine/lifecycle.rs`): while suspended,
//! nothing is handed out or opened; a connection a waiter gets is *shelved*
//! (marked idle) until `resume`.
//!
//! **Counts** are kept per slot (`slots.rs`): each slot is in one state,
//! so every census satisfies `total == idle + in_use + opening <= max_size`,
//! and the hot path touches no pool-wide counter.

mod checkin;
mod checkout;
mod checks;
pub(crate) mod connect;
#[cfg(all(test, not(loom)))]
mod count_tests;
pub(crate) mod delivery;
pub(crate) mod demand;
pub(crate) mod housekeeper;
pub(crate) mod in_flight;
mod lifecycle;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod parking;
pub(crate) mod retire;
pub(crate) mod returning;
pub(crate) mod sweeper;
pub(crate) mod tasks;

pub use checkin::PooledConnection;

use std::panic::Location;
use std::time::Duration;

use pool_api::{
    Hooks, ManageConnection, PoolConfig, PoolError, PoolMetrics, PoolState, TimeoutPhase,
};
use tokio::sync::Notify;

use crate::clock::{Clock, Stamp};
use crate::health::Health;
use crate::slots::leak::Leak;
use crate::slots::{Entry, Held, Occupied, Slots};
use crate::stats::{Reason, Stats};
use crate::suspend::Suspension;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::waiters::WaiterQueue;
use demand::Connector;
use tasks::{Housekeeper, Starts, Sweeper};

/// The engine: see the module docs.
pub(crate) struct Engine<M: ManageConnection> {
    manager: M,
    config: PoolConfig,
    hooks: Option<Box<dyn Hooks<M>>>,
    /// Whether the hooks run at checkout / at return (their phases).
    hook_at_checkout: bool,
    hook_at_return: bool,
    slots: Slots<M::Connection>,
    /// This pool's identity in the threads' lists of parked connections
    /// (`affinity.rs`).
    affinity: crate::affinity::Affinity,
    waiters: WaiterQueue<Held>,
    sweeper: Sweeper,
    connector: Connector,
    housekeeper: Housekeeper,
    /// `Pool` handles alive; at zero, nothing refills to `min_size` and the
    /// housekeeper stops. Relaxed: a hint for both.
    handles: AtomicU32,
    /// Bumped by `soft_evict_all`. Relaxed: compared, never ordered with
    /// anything.
    generation: AtomicU64,
    stats: Stats,
    /// The database's health as the connectors see it: back-off, failure
    /// epoch, fail fast, the last error (`health.rs`).
    health: Health<M::Error>,
    /// Signalled when a slot is freed after close, and once by the close
    /// itself (`shut`), for `Pool::close_event`.
    drained: Notify,
    /// The source of every timestamp.
    clock: Clock,
    /// `suspend()` / `resume()` (`suspend.rs`).
    suspension: Suspension<Occupied<M::Connection>>,
    #[cfg(feature = "metrics")]
    export: crate::export::Export,
    /// Where the background tasks begin (`tasks.rs`): wired here, so no
    /// phase names a task's file.
    starts: Starts<M>,
}

impl<M: ManageConnection + std::fmt::Debug> std::fmt::Debug for Engine<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.config.name())
            .field("state", &self.state())
            .field("closed", &self.is_closed())
            .field("manager", &self.manager)
            .finish_non_exhaustive()
    }
}

impl<M: ManageConnection> Engine<M> {
    pub(crate) fn new(manager: M, config: PoolConfig, hooks: Option<Box<dyn Hooks<M>>>) -> Self {
        let hook_at_checkout = hooks.as_ref().is_some_and(|h| h.uses_before_acquire());
        let hook_at_return = hooks.as_ref().is_some_and(|h| h.uses_after_release());
        Self {
            manager,
            hooks,
            hook_at_checkout,
            hook_at_return,
            slots: {
                let mut slots = Slots::new(config.max_size_ceiling() as usize);
                slots.set_limit(config.max_size());
                slots.set_affinity(config.thread_affinity());
                slots
            },
            affinity: crate::affinity::Affinity::new(),
            waiters: WaiterQueue::new(),
            sweeper: Sweeper::new(),
            connector: Connector::new(),
            housekeeper: Housekeeper::new(),
            handles: AtomicU32::new(1),
            generation: AtomicU64::new(0),
            stats: Stats::new(),
            health: Health::new(),
            drained: Notify::new(),
            clock: Clock::new(),
            suspension: Suspension::new(),
            #[cfg(feature = "metrics")]
            export: crate::export::Export::new(&config),
            starts: Starts {
                connector: connect::start::<M>,
                housekeeper: housekeeper::start::<M>,
                sweeper: sweeper::start::<M>,
            },
            config,
        }
    }

    pub(crate) fn manager(&self) -> &M {
        &self.manager
    }

    pub(crate) fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// The hooks when they run at checkout (`before_acquire`).
    pub(crate) fn checkout_hook(&self) -> Option<&dyn Hooks<M>> {
        self.hooks.as_deref().filter(|_| self.hook_at_checkout)
    }

    /// The hooks when they run at return (`after_release`).
    pub(crate) fn return_hook(&self) -> Option<&dyn Hooks<M>> {
        self.hooks.as_deref().filter(|_| self.hook_at_return)
    }

    /// The eviction generation new connections are stamped with.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// A `Pool` handle was cloned.
    pub(crate) fn handle_cloned(&self) {
        self.handles.fetch_add(1, Ordering::Relaxed);
    }

    /// A `Pool` handle was dropped; true if it was the last one.
    pub(crate) fn handle_dropped(&self) -> bool {
        self.handles.fetch_sub(1, Ordering::Relaxed) == 1
    }

    /// Whether any `Pool` handle is alive.
    pub(crate) fn has_handles(&self) -> bool {
        self.handles.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn state(&self) -> PoolState {
        let c = self.slots.census();
        PoolState::new(
            c.idle,
            c.in_use,
            c.opening,
            self.waiters.waiting(),
            self.slots.limit(),
        )
        .with_closing(c.closing)
    }

    /// A snapshot of counts and counters (`Pool::metrics`).
    pub(crate) fn metrics(&self) -> PoolMetrics {
        let mut m = self.stats.snapshot(
            self.slots.census(),
            self.slots.checkouts(),
            self.waiters.waiting(),
            self.slots.limit(),
        );
        m.holders_by_site = self.holders_by_site();
        m
    }

    pub(crate) fn timeout_error(&self, started: Stamp, phase: TimeoutPhase) -> PoolError<M::Error> {
        self.stats.timed_out();
        #[cfg(feature = "metrics")]
        self.export.timeout();
        let now = self.clock.now();
        let state = self.state();
        PoolError::Timeout {
            waited: now.since(started),
            phase,
            state,
            last_error: self.health.last_error(),
            oldest_connect: self.oldest_connect(&state, now),
            holders: self.holder_sites(now),
        }
    }

    /// The oldest connect still running, for a timeout's text built at
    /// `now` with the counts `state`: where it goes and how long it has
    /// run. `None` when `state` counts nothing as opening, so the text
    /// never names a connect its counts leave out.
    #[cold]
    pub(crate) fn oldest_connect(
        &self,
        state: &PoolState,
        now: Stamp,
    ) -> Option<Box<pool_api::ConnectRunning>> {
        if state.opening == 0 {
            return None;
        }
        let began = self.health.oldest_connect()?;
        let running = now.since(began);
        Some(Box::new(pool_api::ConnectRunning::new(
            self.manager.target(),
            running,
        )))
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.slots.is_closed()
    }

    /// Whether the pool is suspended (`Pool::is_suspended`).
    #[inline]
    pub(crate) fn is_suspended(&self) -> bool {
        self.suspension.is_suspended()
    }

    /// Why `entry` must not be handed out or kept, if it must not.
    pub(crate) fn expired(&self, entry: &Entry<M::Connection>, now: Stamp) -> Option<Reason> {
        if entry.generation < self.generation() {
            return Some(Reason::SoftEvict);
        }
        (entry.expires_at <= now).then_some(Reason::MaxLifetime)
    }
}

/// How many holder sites a timeout error names before "and N more".
const TIMEOUT_SITES: usize = 3;

impl<M: ManageConnection> Engine<M> {
    /// Every connection held by a caller: its site and how long it has been
    /// held. A scan of the slots, no lock.
    pub(crate) fn holders(&self) -> Vec<pool_api::Holder> {
        self.holders_at(self.clock.now())
    }

    fn holders_at(&self, now: Stamp) -> Vec<pool_api::Holder> {
        self.slots
            .iter()
            .filter_map(|slot| slot.leak.holder(now))
            .map(|(site, held)| pool_api::Holder::new(site, held))
            .collect()
    }

    /// The busiest holder sites, as a timeout reports them.
    pub(crate) fn holder_sites(&self, now: Stamp) -> pool_api::HolderSites {
        pool_api::HolderSites::from_holders(&self.holders_at(now), TIMEOUT_SITES)
    }

    /// Connections held by site, most first (the snapshot's
    /// `holders_by_site`).
    pub(crate) fn holders_by_site(&self) -> Vec<(&'static Location<'static>, u32)> {
        let sites = pool_api::HolderSites::from_holders(&self.holders(), usize::MAX);
        sites
            .sites()
            .iter()
            .map(|s| (s.location, s.count))
            .collect()
    }

    /// Counts and logs a leak the housekeeper found.
    pub(crate) fn leaked(&self, leak: Leak, threshold: Duration) {
        self.stats.leaked();
        #[cfg(feature = "metrics")]
        self.export.leaked();
        let Leak {
            held, site, frames, ..
        } = leak;
        let (intro, frames) = match &frames {
            Some(f) if f.own => ("; acquired at:", f.text.as_str()),
            Some(f) => (
                "; a sampled checkout from the same site was acquired at:",
                f.text.as_str(),
            ),
            None => ("", ""),
        };
        tracing::warn!(
            pool = self.config.name(),
            held_ms = held.as_millis() as u64,
            threshold_ms = threshold.as_millis() as u64,
            site = %site,
            "connection held past the leak detection threshold; taken at {site}{intro}{frames}",
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use pool_api::{ManageConnection, PoolConfig};

    use super::Engine;
    use crate::clock::Stamp;
    use crate::slots::Entry;
    use crate::stats::Reason;
    use crate::sync::Ordering;

    #[derive(Debug)]
    struct Unit;

    #[async_trait::async_trait]
    impl ManageConnection for Unit {
        type Connection = ();
        type Error = std::io::Error;

        async fn connect(&self) -> Result<(), std::io::Error> {
            Ok(())
        }

        async fn is_valid(&self, _: &mut ()) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    /// `expired`, the verdict every checkout, return and sweep asks:
    /// retired by `soft_evict_all` (an older generation) before its
    /// lifetime, past its lifetime at the instant it ends, else kept.
    #[test]
    fn expired_says_why_a_connection_must_go() {
        let config = PoolConfig::builder().max_size(1).build().unwrap();
        let e = Engine::new(Unit, config, None);
        let now = e.clock.now();
        let entry = |expires_at, generation| Entry {
            conn: (),
            created_at: now,
            expires_at,
            last_used: now,
            generation,
            last_ping: now,
            fresh: false,
            from_connect: false,
        };
        let later = now.after(Duration::from_secs(1));
        assert_eq!(e.expired(&entry(later, 0), now), None);
        assert_eq!(e.expired(&entry(Stamp::NEVER, 0), now), None);
        assert_eq!(e.expired(&entry(now, 0), now), Some(Reason::MaxLifetime));
        assert_eq!(
            e.expired(&entry(later, 0), later),
            Some(Reason::MaxLifetime)
        );
        e.generation.fetch_add(1, Ordering::Relaxed);
        assert_eq!(e.expired(&entry(later, 0), now), Some(Reason::SoftEvict));
        assert_eq!(
            e.expired(&entry(now, 0), now),
            Some(Reason::SoftEvict),
            "retired by the eviction first"
        );
        assert_eq!(e.expired(&entry(later, 1), now), None, "opened since");
    }

    /// The module doc above and `docs/engine.md` (the public `design`
    /// page) are one text: a change to either must be made to both.
    #[test]
    fn the_module_doc_is_the_design_page() {
        let source = include_str!("mod.rs");
        let doc: String = source
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| {
                let l = l.strip_prefix("//!").unwrap_or(l);
                let l = l.strip_prefix(' ').unwrap_or(l);
                format!("{l}\n")
            })
            .collect();
        assert_eq!(doc, include_str!("../../docs/engine.md"));
    }
}
