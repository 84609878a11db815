//! The fair share's I/O: the control session a driver provides
//! ([`ControlSession`]), and the control task that joins with it and
//! rechecks every interval. What the task reads goes through the pure
//! decisions (`share.rs`) into the instance's ledger (`ledger.rs`).

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio::sync::Notify;

use super::instance::{random_id, FleetShare};
use super::share::{tally, Join};
use super::sql;

/// A boxed future, as the control session's driver code returns.
#[doc(hidden)]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// An error of the control session (it is only logged).
#[doc(hidden)]
pub type BoxError = Box<dyn Error + Send + Sync>;

/// A driver's connection used as the fair share's control session.
/// Reachable outside the crate only as `fleet::ControlSession`, hidden:
/// the seam through which the sqlx manager (a crate of its own) lends its
/// connections.
#[doc(hidden)]
pub trait ControlSession: Send {
    /// Runs one statement of literal SQL (one round trip, PostgreSQL's
    /// simple query protocol) and returns its first row's columns, each
    /// an `int8`.
    fn row<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<Vec<i64>, BoxError>>;

    /// Runs statements of literal SQL that return no row (`LISTEN`).
    fn execute<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<(), BoxError>>;

    /// The payloads of the notifications received on this session
    /// since the last call (those of a `LISTEN` the session runs),
    /// oldest first. No I/O: what the driver has read already.
    fn notifications(&mut self) -> Vec<String>;
}

/// Opens a control session: the manager's connect settings, without a
/// ticket.
#[doc(hidden)]
pub type OpenControl =
    Box<dyn Fn() -> BoxFuture<'static, Result<Box<dyn ControlSession>, BoxError>> + Send + Sync>;

impl FleetShare {
    /// Starts the control task unless one runs; `open` makes its session
    /// opener, called only when it starts. Outside a tokio runtime nothing
    /// starts (the next connect tries again).
    #[doc(hidden)]
    pub fn start_control(self: &Arc<Self>, open: impl FnOnce() -> OpenControl) {
        // Relaxed: a flag only this function sets, and the task's guard
        // clears; two starts racing see one `true` from the swap.
        if self.running.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.running.store(false, Ordering::Relaxed);
            return;
        };
        // The guard goes into the task's future, so that a future dropped
        // before its first poll (a runtime shutting down) clears the flag
        // too.
        let running = Running(Arc::downgrade(self));
        runtime.spawn(control(
            running,
            Arc::downgrade(self),
            Arc::clone(&self.wake),
            open(),
        ));
    }
}

/// Clears `running` however the control task ends (a runtime shutting
/// down drops it mid-await, or before it ever ran), so the next connect
/// starts another.
struct Running(Weak<FleetShare>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(share) = self.0.upgrade() {
            share.forget();
            share.running.store(false, Ordering::Relaxed);
        }
    }
}

/// A joined control session.
struct Control {
    session: Box<dyn ControlSession>,
    wanting: bool,
    /// Instances that knocked lately, and when.
    knocking: Vec<(i32, Instant)>,
}

/// One recheck on the control session: count, decide, and take or drop
/// the wanting lock.
async fn recheck(
    state: &FleetShare,
    session: &mut Control,
    last_refused: &mut Option<Instant>,
) -> Result<(), BoxError> {
    // Knocks read by the last query (or the driver since): the ids of
    // instances that found no ticket to join with, each remembered for
    // two intervals (a knocker knocks again at least once an interval)
    // or until every knocker is a member.
    let own = state.id.load(Ordering::Relaxed);
    for payload in session.session.notifications() {
        if let Ok(id) = payload.parse::<i32>() {
            if id != own {
                session.knocking.retain(|(known, _)| *known != id);
                session.knocking.push((id, Instant::now()));
            }
        }
    }
    let remember = state.interval * 2;
    session.knocking.retain(|(_, at)| at.elapsed() < remember);
    let ids: Vec<i32> = session.knocking.iter().map(|(id, _)| *id).collect();
    let control_key = state.budget.control_key();
    let row = session.session.row(&sql::count(control_key, &ids)).await?;
    let count = |i: usize| {
        row.get(i)
            .and_then(|&n| u32::try_from(n).ok())
            .ok_or("the fair share count returned no count")
    };
    let (joined, others, knocked_in) = (count(0)?, count(1)?, count(2)?);
    let heard = u32::try_from(ids.len()).unwrap_or(u32::MAX);
    let tally = tally(joined, others, heard, knocked_in);
    if tally.all_in {
        // All in: none of them is to be counted again should it leave.
        session.knocking.clear();
    }
    if state.ledger.take_refused() {
        *last_refused = Some(Instant::now());
    }
    let refused_lately = last_refused.is_some_and(|at| at.elapsed() < state.interval * 3);
    let decision = state.ledger.recheck(
        state.budget.total(),
        tally.members,
        tally.others_want,
        refused_lately,
    );
    if decision.want != session.wanting {
        let id = state.id.load(Ordering::Relaxed);
        session
            .session
            .row(&sql::want(control_key, id, decision.want))
            .await?;
        session.wanting = decision.want;
        state.ledger.set_wanting(decision.want);
    }
    Ok(())
}

/// Opens a control session and joins: takes a ticket, then the member
/// lock, then listens for knocks. `None` when it could not: without a
/// free ticket it knocks first, and the session closes (dropped here), so
/// that no session outside the budget stays open.
async fn join(state: &FleetShare, open: &OpenControl) -> Result<Option<Control>, BoxError> {
    let budget = &state.budget;
    let control_key = budget.control_key();
    let mut session = open().await?;
    let ticket = session
        .row(&sql::join(
            budget.key(),
            budget.total_i32(),
            budget.random_start(),
        ))
        .await?;
    if Join::after_ticket(&ticket) == Join::Knock {
        let id = state.id.load(Ordering::Relaxed);
        session.row(&sql::knock(control_key, id)).await?;
        state.ledger.set_knocked(true);
        return Ok(None);
    }
    let id = state.id.load(Ordering::Relaxed);
    let member = session.row(&sql::member(control_key, id)).await?;
    let Join::Joined { pid } = Join::after_member(&ticket, &member) else {
        // Another instance drew the same id: draw again, and join on the
        // next try (this session, and its ticket, close here).
        state.id.store(random_id(), Ordering::Relaxed);
        return Ok(None);
    };
    session
        .execute(&format!("LISTEN \"{}\"", sql::channel(control_key)))
        .await?;
    state.control_pid.store(pid, Ordering::Relaxed);
    state.ledger.set_joined();
    Ok(Some(Control {
        session,
        wanting: false,
        knocking: Vec::new(),
    }))
}

/// The control task: opens the session, rechecks every interval (or at
/// once when woken by a refusal), and ends when the instance's state is
/// dropped, closing the session (which releases its locks).
async fn control(_running: Running, share: Weak<FleetShare>, wake: Arc<Notify>, open: OpenControl) {
    let mut session: Option<Control> = None;
    let mut last_refused = None;
    loop {
        let Some(state) = share.upgrade() else {
            return;
        };
        if session.is_none() {
            match join(&state, &open).await {
                Ok(joined) => session = joined,
                Err(e) => {
                    // Not shut out but failing (the server unreachable, say):
                    // the connects go on, and report what they meet.
                    state.ledger.set_knocked(false);
                    tracing::debug!(budget = state.budget.name(), error = %e, "fleet fair share: joining failed");
                }
            }
        }
        if let Some(open_session) = session.as_mut() {
            match recheck(&state, open_session, &mut last_refused).await {
                // Joined and counted: the connects may claim again.
                Ok(()) => state.ledger.set_knocked(false),
                Err(e) => {
                    tracing::debug!(budget = state.budget.name(), error = %e, "fleet fair share: recheck failed");
                    session = None;
                    state.forget();
                }
            }
        }
        // Shut out, it tries again five times an interval (the others
        // give tickets back within about one, as their connections come
        // back): one short session each.
        let wait = if state.ledger.knocked() {
            state.interval / 5
        } else {
            state.interval
        };
        drop(state);
        // Woken early by a refusal to signal, or by the state's drop.
        let _ = tokio::time::timeout(wait, wake.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fleet::budget::FleetBudget;
    use crate::fleet::instance::FleetSeat;
    use crate::fleet::ledger::Claim;
    use crate::fleet::sql::as_oid;

    /// What a [`Scripted`] session answers and logs.
    #[derive(Default)]
    struct Script {
        /// Members and others wanting, as the count reads them.
        members: i64,
        others: i64,
        /// The ticket the join takes (`-1`: none free).
        ticket: i64,
        /// Notification payloads still to deliver.
        knocks: Vec<String>,
        /// The statements run, but the counts.
        log: Vec<String>,
    }

    /// A control session that answers from a script the test sets.
    #[derive(Clone, Default)]
    struct Scripted(Arc<std::sync::Mutex<Script>>);

    impl ControlSession for Scripted {
        fn row<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<Vec<i64>, BoxError>> {
            Box::pin(async move {
                let mut state = self.0.lock().map_err(|_| "poisoned")?;
                if sql.contains("count(*)") {
                    // Knocks are never members yet here.
                    return Ok(vec![state.members, state.others, 0]);
                }
                state.log.push(sql.to_owned());
                if sql.contains("coalesce") {
                    return Ok(vec![state.ticket, 42]);
                }
                Ok(vec![1])
            })
        }

        fn execute<'a>(&'a mut self, sql: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
            Box::pin(async move {
                self.0
                    .lock()
                    .map_err(|_| "poisoned")?
                    .log
                    .push(sql.to_owned());
                Ok(())
            })
        }

        fn notifications(&mut self) -> Vec<String> {
            self.0
                .lock()
                .map(|mut s| std::mem::take(&mut s.knocks))
                .unwrap_or_default()
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_control_task_wants_when_refused_and_gives_back_when_others_want() {
        let budget = FleetBudget::new("ctl", 20)
            .and_then(|b| b.with_share_interval(Some(Duration::from_millis(10))))
            .expect("valid");
        let share = FleetShare::new(&budget).expect("on");
        let script = Scripted::default();
        script.0.lock().expect("lock").members = 5;
        let opened = script.clone();
        share.start_control(move || {
            Box::new(move || {
                let session = opened.clone();
                Box::pin(async move { Ok(Box::new(session) as Box<dyn ControlSession>) })
            })
        });
        // Bounded polls: 500 × 5 ms.
        async fn until(what: &str, done: impl Fn() -> bool) {
            for _ in 0..500 {
                if done() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("never: {what}");
        }
        let logged = |what: &dyn Fn(&str) -> bool| {
            script.0.lock().expect("lock").log.iter().any(|q| what(q))
        };
        until("the first count", || share.view().members == 5).await;
        assert_eq!(share.view().share, 4);
        assert_eq!(share.control_pid.load(Ordering::Relaxed), 42);
        // The control session holds a ticket (counted for the instance),
        // its member lock, and listens for knocks.
        assert_eq!(share.view().held, 1);
        let id = share.id.load(Ordering::Relaxed);
        assert!(id > 0);
        assert!(logged(
            &|q| q.contains("coalesce") && q.contains("pg_try_advisory_lock")
        ));
        assert!(logged(&|q| q.contains(&format!(", ({id})::int4)"))));
        assert!(logged(&|q| q.starts_with("LISTEN \"pool_fleet_")));

        // Refused below the share: the wanting lock is taken.
        share.refused(Claim { borrowing: false });
        until("wanting", || share.view().wanting).await;
        assert!(logged(
            &|q| q.contains("pg_try_advisory_lock") && q.contains(&format!("({})::int4)", -id))
        ));
        // At its share (and no refusal for three intervals) it lets go.
        let seats: Vec<FleetSeat> = (0..5).map(|_| share.seat()).collect();
        until("not wanting", || !share.view().wanting).await;
        assert!(logged(&|q| q.contains("pg_advisory_unlock")));

        // Another wants: 5 held and the control session's ticket, share 4,
        // two to give back, and no borrowing connect meanwhile.
        script.0.lock().expect("lock").others = 1;
        until("a give-back", || share.ledger.pending_give_back() == 2).await;
        assert!(share.admit().is_err());
        assert!(seats[0].give_back() && seats[1].give_back() && !seats[2].give_back());
        // Nobody wants any more: nothing to give back, borrowing allowed.
        script.0.lock().expect("lock").others = 0;
        until("no give-back", || !share.ledger.others_want()).await;
        assert_eq!(share.ledger.pending_give_back(), 0);
        assert!(share.admit().is_ok());

        // An instance that found no ticket to join with knocks: it counts
        // as a member that wants (6 members, share 3: with 3 seats and the
        // control ticket, one to give back), until it has not knocked for
        // two intervals.
        drop(seats);
        let seats: Vec<FleetSeat> = (0..3).map(|_| share.seat()).collect();
        script.0.lock().expect("lock").knocks.push("7".to_owned());
        until("the knock counted", || share.view().members == 6).await;
        assert!(share.ledger.others_want());
        until("its give-back", || share.ledger.pending_give_back() == 1).await;
        until("the knock forgotten", || share.view().members == 5).await;
        // Its own knock, were it to hear one, is not another instance.
        script.0.lock().expect("lock").knocks.push(id.to_string());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(share.view().members, 5);
        drop(seats);

        // Dropping the state ends the task, which drops its session (and
        // its opener): only the test's handle on the script is left.
        drop(share);
        until("the task's end", || Arc::strong_count(&script.0) == 1).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_instance_without_a_ticket_to_join_knocks_and_keeps_no_session() {
        let budget = FleetBudget::new("full", 3)
            .and_then(|b| b.with_share_interval(Some(Duration::from_millis(10))))
            .expect("valid");
        let share = FleetShare::new(&budget).expect("on");
        let script = Scripted::default();
        script.0.lock().expect("lock").ticket = -1;
        let opened = script.clone();
        share.start_control(move || {
            Box::new(move || {
                let session = opened.clone();
                Box::pin(async move { Ok(Box::new(session) as Box<dyn ControlSession>) })
            })
        });
        let id = share.id.load(Ordering::Relaxed);
        for _ in 0..500 {
            if script
                .0
                .lock()
                .expect("lock")
                .log
                .iter()
                .filter(|q| q.contains("pg_notify"))
                .count()
                >= 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let log = std::mem::take(&mut script.0.lock().expect("lock").log);
        let knock = format!(
            "pg_notify('pool_fleet_{}', '{id}')",
            as_oid(budget.control_key())
        );
        assert!(
            log.iter().filter(|q| q.contains(&knock)).count() >= 2,
            "{log:?}"
        );
        // No member lock, no LISTEN, no count: the session was dropped.
        assert!(
            !log.iter()
                .any(|q| q.contains("LISTEN") || q.contains(&format!(", ({id})::int4)"))),
            "{log:?}"
        );
        assert_eq!(share.view().held, 0);
        assert!(!share.ledger.joined());
        // Until it joins, its connects wait: the tickets the others give
        // back go to the control session first.
        assert!(share.ledger.knocked());
        assert_eq!(share.admit(), Err(budget.exhausted()));
        script.0.lock().expect("lock").ticket = 2;
        for _ in 0..500 {
            if share.view().held == 1 && !share.ledger.knocked() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(share.view().held, 1, "joined");
        assert!(share.admit().is_ok());
        drop(share);
    }
}
