//! The pure core of a host pool: which hosts a checkout tries and in what
//! order, what it does with a pool error or a connection it got, what the
//! build waits for, and what a connect error or a full pool says about a
//! host. No I/O, no clock,
//! no randomness of its own (the shuffle is handed in): the
//! [checkout](super::checkout), [probe](super::probe) and
//! [builder](super::builder) code acts on these verdicts.

use std::time::Duration;

use pool_api::{ErrorClass, PoolError, PoolState};

use super::role::{HostStatus, LoadBalanceHosts, ServerRole, SessionTarget};

/// The passes a checkout for `target` makes over the hosts (`true`: the
/// second pass): one, and a second for `prefer-standby` only.
pub(super) fn passes(target: SessionTarget) -> &'static [bool] {
    if target == SessionTarget::PreferStandby {
        &[false, true]
    } else {
        &[false]
    }
}

/// The hosts to try for `target`: on the first pass those known to
/// fit, then those of unknown role; on the second (`prefer-standby`
/// only) the other hosts that are up. With [`LoadBalanceHosts::Random`]
/// the hosts known to fit go through `shuffle` (never those of unknown
/// role, which stay last and in list order).
pub(super) fn order(
    statuses: &[HostStatus],
    target: SessionTarget,
    second_pass: bool,
    load_balance: LoadBalanceHosts,
    shuffle: impl FnOnce(&mut [usize]),
) -> Vec<usize> {
    let mut fit = Vec::new();
    let mut unknown = Vec::new();
    for (i, status) in statuses.iter().enumerate() {
        match *status {
            HostStatus::Up(role) if target.accepts(role) != second_pass => fit.push(i),
            HostStatus::Unknown if !second_pass => unknown.push(i),
            _ => {}
        }
    }
    if load_balance == LoadBalanceHosts::Random {
        shuffle(&mut fit);
    }
    fit.extend(unknown);
    fit
}

/// Whether a connection whose server has `role` may be handed out for
/// `target` on this pass.
pub(super) fn fits(target: SessionTarget, role: ServerRole, second_pass: bool) -> bool {
    if second_pass {
        target.accepts_on_second_pass(role)
    } else {
        target.accepts(role)
    }
}

/// What a build waiting for its first checks does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    /// Wait for more checks to end.
    Wait,
    /// Hand out the host pool.
    Ready,
    /// Every host's first check failed: the build fails.
    Unreachable,
}

/// What the build waits for: [`Readiness::Wait`] while it should wait;
/// ready once a writable host and a host of the read target are known, or
/// every host's first check ended with one up; unreachable when every
/// host's first check failed. `give_up`: the wait is over whatever is
/// known (a host up is enough). `checked[i]`: a check of host `i` ended.
pub(super) fn readiness(
    statuses: &[HostStatus],
    checked: &[bool],
    read_target: SessionTarget,
    give_up: bool,
) -> Readiness {
    let known =
        |fits: &dyn Fn(ServerRole) -> bool| statuses.iter().any(|s| s.role().is_some_and(fits));
    if known(&ServerRole::is_writable) && known(&|role| read_target.accepts(role)) {
        return Readiness::Ready;
    }
    if !give_up && !checked.iter().all(|&c| c) {
        return Readiness::Wait;
    }
    if statuses.iter().any(|s| matches!(s, HostStatus::Up(_))) {
        return Readiness::Ready;
    }
    Readiness::Unreachable
}

/// Whether a failed connect marks its host down: a capacity refusal (the
/// server is full) says nothing about the host being reachable.
pub(super) fn connect_failure_marks_down(class: ErrorClass) -> bool {
    class != ErrorClass::CapacityRefusal
}

/// How a host's pool classes its backend's error: capacity refusals stay
/// capacity refusals; every other error is transient, the backend's
/// permanent ones too, so a host's pool keeps retrying a host that refused.
pub(super) fn host_error_class(backend: ErrorClass) -> ErrorClass {
    match backend {
        ErrorClass::CapacityRefusal => ErrorClass::CapacityRefusal,
        _ => ErrorClass::Transient,
    }
}

/// Whether a pool that timed out with `state` had every connection its
/// bound allows in use (the host is busy, not unreachable).
pub(super) fn all_in_use(state: &PoolState) -> bool {
    state.in_use >= state.max_size
}

/// What a checkout does when host `i`'s pool handed out no connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterPoolError {
    /// The host pool is closing: the checkout fails with `Closed`.
    Closed,
    /// The caller's time is spent: the checkout fails with this host's
    /// error. `busy`: every connection the host's bound allows was in use
    /// for this long (the host is busy, not unreachable).
    GiveUp {
        /// How long the checkout waited on a host whose bound was full.
        busy: Option<Duration>,
    },
    /// The host failed (a connect error, or a fail-fast one): it is marked
    /// down and the checkout tries the next host.
    MarkDownAndTryNext,
}

/// The verdict on a pool `error` of one host during a checkout.
pub(super) fn after_pool_error<E>(error: &PoolError<E>) -> AfterPoolError {
    match error {
        PoolError::Closed => AfterPoolError::Closed,
        PoolError::Timeout { waited, state, .. } => AfterPoolError::GiveUp {
            busy: all_in_use(state).then_some(*waited),
        },
        _ => AfterPoolError::MarkDownAndTryNext,
    }
}

/// What a checkout does with a connection it got from a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handout {
    /// Hand it out.
    Take,
    /// Give it back to its pool and try the next host: its role does not
    /// fit this pass, or it was opened before its host was retired (its
    /// pool closes it on return).
    GiveBack,
    /// The role check found a writable host demoted: every connection of
    /// the host is retired, this one closed, and the checkout tries the
    /// next host.
    RetireHost,
}

/// The verdict on a connection of a host whose server has `role`: `demoted`
/// when the role check just made for it found the host demoted, `retired`
/// when the connection is older than its host's last retirement.
pub(super) fn handout(
    target: SessionTarget,
    role: ServerRole,
    second_pass: bool,
    demoted: bool,
    retired: bool,
) -> Handout {
    if demoted {
        Handout::RetireHost
    } else if fits(target, role, second_pass) && !retired {
        Handout::Take
    } else {
        Handout::GiveBack
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::role::HostRecord;
    use proptest::prelude::*;

    use HostStatus::{Down, Unknown, Up};
    use ServerRole::{Primary, ReadOnlyPrimary, Standby};

    const TARGETS: [SessionTarget; 6] = [
        SessionTarget::Any,
        SessionTarget::ReadWrite,
        SessionTarget::ReadOnly,
        SessionTarget::Primary,
        SessionTarget::Standby,
        SessionTarget::PreferStandby,
    ];

    /// `order` in list order; a shuffle would be a bug.
    fn listed(statuses: &[HostStatus], target: SessionTarget, second_pass: bool) -> Vec<usize> {
        order(
            statuses,
            target,
            second_pass,
            LoadBalanceHosts::Disable,
            |_| panic!("no shuffle without load balancing"),
        )
    }

    fn state(in_use: u32, max_size: u32) -> PoolState {
        PoolState::new(0, in_use, 0, 0, max_size)
    }

    #[test]
    fn only_prefer_standby_makes_a_second_pass() {
        for target in TARGETS {
            let want: &[bool] = if target == SessionTarget::PreferStandby {
                &[false, true]
            } else {
                &[false]
            };
            assert_eq!(passes(target), want, "{target}");
        }
    }

    #[test]
    fn a_write_tries_the_writable_hosts_in_list_order_then_the_unknown_ones() {
        let hosts = [
            Unknown,
            Up(Standby),
            Up(Primary),
            Down,
            Up(Primary),
            Unknown,
        ];
        assert_eq!(
            listed(&hosts, SessionTarget::ReadWrite, false),
            [2, 4, 0, 5]
        );
    }

    #[test]
    fn a_write_never_tries_a_read_only_primary_or_a_standby() {
        let hosts = [Up(ReadOnlyPrimary), Up(Standby)];
        assert!(listed(&hosts, SessionTarget::ReadWrite, false).is_empty());
        // `primary` takes a read-only primary, libpq's meaning.
        assert_eq!(listed(&hosts, SessionTarget::Primary, false), [0]);
    }

    #[test]
    fn a_read_tries_the_standbys_first_and_the_other_hosts_up_on_the_second_pass() {
        let hosts = [Up(Primary), Unknown, Up(Standby), Down, Up(ReadOnlyPrimary)];
        let target = SessionTarget::PreferStandby;
        assert_eq!(listed(&hosts, target, false), [2, 1]);
        assert_eq!(listed(&hosts, target, true), [0, 4]);
        assert_eq!(listed(&hosts, SessionTarget::Standby, false), [2, 1]);
    }

    #[test]
    fn a_down_host_is_never_tried() {
        let hosts = [Down, Down, Up(Standby)];
        for target in TARGETS {
            for &second_pass in passes(target) {
                let tried = listed(&hosts, target, second_pass);
                assert!(
                    !tried.contains(&0) && !tried.contains(&1),
                    "{target}: {tried:?}"
                );
            }
        }
        assert!(listed(&[Down, Down], SessionTarget::Any, false).is_empty());
    }

    #[test]
    fn random_load_balancing_shuffles_the_known_hosts_only() {
        let hosts = [Unknown, Up(Standby), Up(Standby), Unknown, Up(Standby)];
        let reversed = order(
            &hosts,
            SessionTarget::Standby,
            false,
            LoadBalanceHosts::Random,
            <[usize]>::reverse,
        );
        assert_eq!(reversed, [4, 2, 1, 0, 3]);
    }

    #[test]
    fn a_connection_fits_by_its_role_and_the_pass() {
        for target in TARGETS {
            for role in [Primary, ReadOnlyPrimary, Standby] {
                assert_eq!(
                    fits(target, role, false),
                    target.accepts(role),
                    "{target} {role}"
                );
                let second = target == SessionTarget::PreferStandby || target.accepts(role);
                assert_eq!(fits(target, role, true), second, "{target} {role}");
            }
        }
        assert!(!fits(SessionTarget::ReadWrite, ReadOnlyPrimary, true));
        assert!(fits(SessionTarget::PreferStandby, Primary, true));
        assert!(!fits(SessionTarget::PreferStandby, Primary, false));
    }

    #[test]
    fn the_build_is_ready_once_writes_and_reads_have_a_host_even_before_every_check() {
        let hosts = [Up(Primary), Unknown, Up(Standby)];
        let read = SessionTarget::PreferStandby;
        assert_eq!(
            readiness(&hosts, &[true, false, true], read, false),
            Readiness::Ready
        );
        // One host may be both.
        let any = SessionTarget::Any;
        assert_eq!(
            readiness(&hosts[..2], &[true, false], any, false),
            Readiness::Ready
        );
    }

    #[test]
    fn the_build_waits_for_every_first_check_while_a_role_is_missing() {
        let hosts = [Up(Standby), Unknown];
        let read = SessionTarget::PreferStandby;
        assert_eq!(
            readiness(&hosts, &[true, false], read, false),
            Readiness::Wait
        );
        assert_eq!(
            readiness(&hosts, &[true, true], read, false),
            Readiness::Ready
        );
        assert_eq!(
            readiness(&hosts, &[true, false], read, true),
            Readiness::Ready
        );
    }

    #[test]
    fn the_build_fails_when_no_host_is_up_once_every_check_ended_or_it_gives_up() {
        let read = SessionTarget::PreferStandby;
        assert_eq!(
            readiness(&[Down, Down], &[true, true], read, false),
            Readiness::Unreachable
        );
        assert_eq!(
            readiness(&[Down, Unknown], &[true, false], read, false),
            Readiness::Wait
        );
        assert_eq!(
            readiness(&[Down, Unknown], &[true, false], read, true),
            Readiness::Unreachable
        );
        // A host unknown after its check (suspect since) is not up.
        assert_eq!(
            readiness(&[Unknown], &[true], read, false),
            Readiness::Unreachable
        );
    }

    #[test]
    fn only_a_capacity_refusal_leaves_a_host_up_when_its_connect_fails() {
        assert!(!connect_failure_marks_down(ErrorClass::CapacityRefusal));
        assert!(connect_failure_marks_down(ErrorClass::Transient));
        assert!(connect_failure_marks_down(ErrorClass::Permanent));
    }

    #[test]
    fn a_host_pool_retries_what_its_backend_calls_permanent() {
        assert_eq!(
            host_error_class(ErrorClass::Permanent),
            ErrorClass::Transient
        );
        assert_eq!(
            host_error_class(ErrorClass::Transient),
            ErrorClass::Transient
        );
        assert_eq!(
            host_error_class(ErrorClass::CapacityRefusal),
            ErrorClass::CapacityRefusal
        );
    }

    #[test]
    fn a_timeout_is_a_busy_host_only_when_every_connection_is_in_use() {
        assert!(all_in_use(&state(4, 4)));
        assert!(!all_in_use(&state(3, 4)));
    }

    /// What a host pool hears about one host.
    #[derive(Debug, Clone, Copy)]
    enum Event {
        /// A connect or a check answered with this role (promotions and
        /// demotions are answers with another role).
        Answered(ServerRole),
        /// A connect or a check failed.
        Failed,
        /// A connection saw its server change.
        Suspected,
    }

    fn event() -> impl Strategy<Value = (usize, Event)> {
        let role = prop_oneof![Just(Primary), Just(ReadOnlyPrimary), Just(Standby)];
        let event = prop_oneof![
            3 => role.prop_map(Event::Answered),
            1 => Just(Event::Failed),
            1 => Just(Event::Suspected),
        ];
        (0_usize..4, event)
    }

    proptest! {
        /// Whatever the hosts went through, routing by what is known keeps
        /// its rules.
        #[test]
        fn routing_keeps_its_rules_over_any_history(
            n in 1_usize..=4,
            events in proptest::collection::vec(event(), 0..40),
        ) {
            let mut records = vec![HostRecord::new(); n];
            for (host, event) in events {
                let record = &mut records[host % n];
                let before = *record;
                match event {
                    Event::Answered(role) => {
                        let t = record.answered(role);
                        prop_assert_eq!(
                            t.demoted,
                            before.last_role.is_some_and(ServerRole::is_writable) && !role.is_writable()
                        );
                        prop_assert_eq!(record.routing, Up(role));
                    }
                    Event::Failed => {
                        let t = record.failed();
                        prop_assert_eq!(t.down, before.announced != Down);
                        prop_assert_eq!(record.routing, Down);
                    }
                    Event::Suspected => {
                        record.suspected();
                        let want = if matches!(before.routing, Up(_)) { Unknown } else { before.routing };
                        prop_assert_eq!(record.routing, want);
                    }
                }
                // Routing and announcements agree on a host being down.
                prop_assert_eq!(record.routing == Down, record.announced == Down);

                let statuses: Vec<HostStatus> = records.iter().map(|r| r.routing).collect();
                let primary_up = statuses.contains(&Up(Primary));
                for target in TARGETS {
                    let mut tried = Vec::new();
                    for &second_pass in passes(target) {
                        let hosts = listed(&statuses, target, second_pass);
                        // Deterministic for equal inputs, and the same as a
                        // random order whose shuffle keeps the list.
                        prop_assert_eq!(&hosts, &listed(&statuses, target, second_pass));
                        let kept = order(&statuses, target, second_pass, LoadBalanceHosts::Random, |_| {});
                        prop_assert_eq!(&hosts, &kept);
                        for &i in &hosts {
                            match statuses[i] {
                                Down => prop_assert!(false, "down host {} tried for {}", i, target),
                                Up(role) => prop_assert_eq!(
                                    target.accepts(role), !second_pass,
                                    "host {} ({}) on pass {} for {}", i, role, second_pass, target
                                ),
                                Unknown => prop_assert!(!second_pass),
                            }
                        }
                        tried.extend(hosts);
                    }
                    // No host is tried twice in one checkout.
                    let mut unique = tried.clone();
                    unique.sort_unstable();
                    unique.dedup();
                    prop_assert_eq!(unique.len(), tried.len());
                    if target == SessionTarget::ReadWrite && primary_up {
                        // A write goes first to a writable primary, and
                        // never to a host known read-only.
                        prop_assert_eq!(statuses[tried[0]], Up(Primary));
                        prop_assert!(tried.iter().all(|&i| statuses[i] != Up(ReadOnlyPrimary)
                            && statuses[i] != Up(Standby)));
                    }
                    if target == SessionTarget::PreferStandby || target == SessionTarget::Any {
                        // A read may go to every host not down.
                        prop_assert_eq!(
                            unique,
                            (0..n).filter(|&i| statuses[i] != Down).collect::<Vec<_>>()
                        );
                    }
                }
                let checked = vec![true; n];
                let up = statuses.iter().any(|s| matches!(s, Up(_)));
                let ready = readiness(&statuses, &checked, SessionTarget::PreferStandby, false);
                prop_assert_eq!(ready == Readiness::Ready, up, "{:?}", statuses);
            }
        }
    }

    fn timed_out(in_use: u32, max_size: u32) -> PoolError<std::io::Error> {
        PoolError::Timeout {
            waited: Duration::from_millis(250),
            phase: pool_api::TimeoutPhase::Wait,
            state: state(in_use, max_size),
            last_error: None,
            oldest_connect: None,
            holders: pool_api::HolderSites::default(),
        }
    }

    #[test]
    fn a_pool_error_ends_the_checkout_only_when_closed_or_out_of_time() {
        assert_eq!(
            after_pool_error(&PoolError::<std::io::Error>::Closed),
            AfterPoolError::Closed
        );
        assert_eq!(
            after_pool_error(&timed_out(4, 4)),
            AfterPoolError::GiveUp {
                busy: Some(Duration::from_millis(250))
            }
        );
        assert_eq!(
            after_pool_error(&timed_out(3, 4)),
            AfterPoolError::GiveUp { busy: None },
            "a pool with room that timed out is not busy: its host is slow or gone"
        );
        let refused = std::io::Error::other("connection refused");
        assert_eq!(
            after_pool_error(&PoolError::Backend(refused)),
            AfterPoolError::MarkDownAndTryNext
        );
        let shared = std::sync::Arc::new(std::io::Error::other("connection refused"));
        assert_eq!(
            after_pool_error(&PoolError::ConnectFailed(shared)),
            AfterPoolError::MarkDownAndTryNext
        );
    }

    #[test]
    fn a_demotion_retires_the_host_whatever_the_connection_fits() {
        for target in TARGETS {
            for role in [Primary, ReadOnlyPrimary, Standby] {
                for second_pass in [false, true] {
                    for retired in [false, true] {
                        assert_eq!(
                            handout(target, role, second_pass, true, retired),
                            Handout::RetireHost
                        );
                        let expected = if fits(target, role, second_pass) && !retired {
                            Handout::Take
                        } else {
                            Handout::GiveBack
                        };
                        assert_eq!(handout(target, role, second_pass, false, retired), expected);
                    }
                }
            }
        }
        assert_eq!(
            handout(SessionTarget::ReadWrite, Primary, false, false, false),
            Handout::Take
        );
        assert_eq!(
            handout(SessionTarget::ReadWrite, Standby, false, false, false),
            Handout::GiveBack
        );
        assert_eq!(
            handout(SessionTarget::ReadWrite, Primary, false, false, true),
            Handout::GiveBack,
            "a connection older than its host's retirement is never handed out"
        );
    }
}
