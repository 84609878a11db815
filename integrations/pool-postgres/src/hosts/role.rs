//! Server roles and session targets, in libpq's terms; what one host's
//! role checks change ([`HostRecord`]) and when they run ([`Schedule`]),
//! kept apart from the clock and the I/O so that each transition is tested
//! on its own.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio::time::Instant;

/// What a host pool last learnt about one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostStatus {
    /// Not known: never reached yet, or a connection to it saw an error
    /// that says its server changed (read-only, shutting down), and it is
    /// being checked again.
    Unknown,
    /// The last connect or check failed.
    Down,
    /// Reached, with this role.
    Up(ServerRole),
}

/// What a server is, as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerRole {
    /// Not in recovery and writable by default.
    Primary,
    /// Not in recovery, but read-only by default
    /// (`default_transaction_read_only` on).
    ReadOnlyPrimary,
    /// A hot standby: in recovery, read-only.
    Standby,
}

impl ServerRole {
    /// The role from whether the server is in recovery (`in_hot_standby`,
    /// `pg_is_in_recovery()`) and whether its sessions are read-only by
    /// default.
    pub(super) fn from_flags(in_recovery: bool, read_only: bool) -> Self {
        match (in_recovery, read_only) {
            (true, _) => Self::Standby,
            (false, true) => Self::ReadOnlyPrimary,
            (false, false) => Self::Primary,
        }
    }

    /// Whether a new session on this server accepts writes.
    pub fn is_writable(self) -> bool {
        self == Self::Primary
    }
}

impl fmt::Display for ServerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Primary => "primary",
            Self::ReadOnlyPrimary => "read-only primary",
            Self::Standby => "standby",
        })
    }
}

/// Which server a checkout wants, with libpq's `target_session_attrs`
/// meanings. Parses from libpq's spellings (`"read-write"`, ...).
///
/// ```
/// use pool_postgres::hosts::SessionTarget;
///
/// let target: SessionTarget = "prefer-standby".parse()?;
/// assert_eq!(target, SessionTarget::PreferStandby);
/// assert_eq!(target.to_string(), "prefer-standby");
/// assert!("primary-please".parse::<SessionTarget>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionTarget {
    /// Any server that is up (`any`).
    Any,
    /// A server whose new sessions accept writes: not a standby, and
    /// `default_transaction_read_only` off (`read-write`).
    ReadWrite,
    /// A server whose new sessions are read-only: a standby, or a primary
    /// with `default_transaction_read_only` on (`read-only`).
    ReadOnly,
    /// A server not in recovery, read-only by default or not (`primary`).
    Primary,
    /// A hot standby (`standby`).
    Standby,
    /// A hot standby if one is up, else any server (`prefer-standby`).
    PreferStandby,
}

impl SessionTarget {
    /// Whether a server of `role` fits this target on the first pass.
    pub(crate) fn accepts(self, role: ServerRole) -> bool {
        match self {
            Self::Any => true,
            Self::ReadWrite => role == ServerRole::Primary,
            Self::ReadOnly => role != ServerRole::Primary,
            Self::Primary => role != ServerRole::Standby,
            Self::Standby | Self::PreferStandby => role == ServerRole::Standby,
        }
    }

    /// Whether a server that failed the first pass may still serve (libpq's
    /// second pass for `prefer-standby`: any server).
    pub(super) fn accepts_on_second_pass(self, role: ServerRole) -> bool {
        self == Self::PreferStandby || self.accepts(role)
    }

    /// The libpq spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }
}

impl fmt::Display for SessionTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `target_session_attrs` value that libpq does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSessionTarget(pub String);

impl fmt::Display for UnknownSessionTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown target_session_attrs {:?}: expected any, read-write, read-only, primary, \
             standby or prefer-standby",
            self.0
        )
    }
}

impl std::error::Error for UnknownSessionTarget {}

impl FromStr for SessionTarget {
    type Err = UnknownSessionTarget;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            other => return Err(UnknownSessionTarget(other.to_owned())),
        })
    }
}

/// How the hosts of one role are ordered for each checkout, as libpq's
/// `load_balance_hosts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LoadBalanceHosts {
    /// In the order listed (`disable`): the first eligible host takes every
    /// checkout while it is up.
    #[default]
    Disable,
    /// In a random order for each checkout (`random`): checkouts spread
    /// evenly over the eligible hosts.
    Random,
}

/// What a host pool knows of one host, and what each thing it learns about
/// the host changes.
///
/// Two statuses are kept: the one checkouts route by (`routing`) and the
/// one last announced (`announced`). They differ only while a host last
/// announced up is suspect: checkouts treat it as of unknown role, yet no
/// event says so, and the next check announces only what changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HostRecord {
    /// What checkouts route by.
    pub(super) routing: HostStatus,
    /// What the events last said.
    pub(super) announced: HostStatus,
    /// The role the host was last seen with, whatever happened since.
    pub(super) last_role: Option<ServerRole>,
}

/// The events one observation of a host calls for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Transition {
    /// Announce the host up, with this role: it was not announced up.
    pub(super) up: Option<ServerRole>,
    /// Announce a role change (from, to).
    pub(super) role_changed: Option<(ServerRole, ServerRole)>,
    /// Announce the host down: it was not announced down.
    pub(super) down: bool,
    /// The host was last seen writable and is not now: the connections
    /// opened to it while it was must go.
    pub(super) demoted: bool,
}

impl Default for HostRecord {
    fn default() -> Self {
        Self::new()
    }
}

impl HostRecord {
    /// A host never reached.
    pub(super) const fn new() -> Self {
        Self {
            routing: HostStatus::Unknown,
            announced: HostStatus::Unknown,
            last_role: None,
        }
    }

    /// The host answered, with `role`.
    pub(super) fn answered(&mut self, role: ServerRole) -> Transition {
        let was = self.announced;
        let last_role = self.last_role;
        self.routing = HostStatus::Up(role);
        self.announced = HostStatus::Up(role);
        self.last_role = Some(role);
        Transition {
            up: (!matches!(was, HostStatus::Up(_))).then_some(role),
            role_changed: last_role.filter(|r| *r != role).map(|from| (from, role)),
            down: false,
            demoted: last_role.is_some_and(ServerRole::is_writable) && !role.is_writable(),
        }
    }

    /// A connect to the host or a check of it failed, or ran out of time.
    pub(super) fn failed(&mut self) -> Transition {
        let was = self.announced;
        self.routing = HostStatus::Down;
        self.announced = HostStatus::Down;
        Transition {
            down: was != HostStatus::Down,
            ..Transition::default()
        }
    }

    /// A connection to the host saw an error that says its server changed:
    /// a host routed as up is of unknown role until checked again; a host
    /// down or unknown stays so. Announces nothing.
    pub(super) fn suspected(&mut self) {
        if matches!(self.routing, HostStatus::Up(_)) {
            self.routing = HostStatus::Unknown;
        }
    }
}

/// When one host's role checks run: every `interval` from the start of the
/// last one, sooner when asked for (a checkout found no host of its role, a
/// connection saw its server change) but never less than `gap` after the
/// last one began. Each check is bounded by [`limit`](Self::limit), so a
/// host that stops answering delays only its own next check, and by at
/// most one interval.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    interval: Duration,
    gap: Duration,
    limit: Duration,
    last_start: Option<Instant>,
}

impl Schedule {
    /// The schedule of a host checked every `interval`, at most once per
    /// `gap` when asked, each check bounded by `connect_timeout` but never
    /// by more than `interval`.
    pub(super) fn new(interval: Duration, gap: Duration, connect_timeout: Duration) -> Self {
        Self {
            interval,
            gap,
            limit: connect_timeout.min(interval),
            last_start: None,
        }
    }

    /// When the next check is due if none is asked for: `interval` after
    /// the last began; at once for the first.
    pub(super) fn next_tick(&self, now: Instant) -> Instant {
        self.last_start.map_or(now, |t| t + self.interval)
    }

    /// The soonest a check asked for may start: `gap` after the last began;
    /// at once for the first, or when that has passed.
    pub(super) fn next_asked(&self, now: Instant) -> Instant {
        self.last_start.map_or(now, |t| (t + self.gap).max(now))
    }

    /// A check begins at `now`; returns when it must be over.
    pub(super) fn start(&mut self, now: Instant) -> Instant {
        self.last_start = Some(now);
        now + self.limit
    }

    /// The most one check (its connect and its query together) may take.
    pub(super) fn limit(&self) -> Duration {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLES: [ServerRole; 3] = [
        ServerRole::Primary,
        ServerRole::ReadOnlyPrimary,
        ServerRole::Standby,
    ];

    #[test]
    fn roles_from_flags() {
        assert_eq!(ServerRole::from_flags(true, true), ServerRole::Standby);
        assert_eq!(ServerRole::from_flags(true, false), ServerRole::Standby);
        assert_eq!(
            ServerRole::from_flags(false, true),
            ServerRole::ReadOnlyPrimary
        );
        assert_eq!(ServerRole::from_flags(false, false), ServerRole::Primary);
    }

    #[test]
    fn targets_accept_what_libpq_accepts() {
        let accepted = |t: SessionTarget| -> Vec<ServerRole> {
            ROLES.into_iter().filter(|r| t.accepts(*r)).collect()
        };
        use ServerRole::*;
        assert_eq!(
            accepted(SessionTarget::Any),
            [Primary, ReadOnlyPrimary, Standby]
        );
        assert_eq!(accepted(SessionTarget::ReadWrite), [Primary]);
        assert_eq!(
            accepted(SessionTarget::ReadOnly),
            [ReadOnlyPrimary, Standby]
        );
        assert_eq!(accepted(SessionTarget::Primary), [Primary, ReadOnlyPrimary]);
        assert_eq!(accepted(SessionTarget::Standby), [Standby]);
        assert_eq!(accepted(SessionTarget::PreferStandby), [Standby]);
        for role in ROLES {
            assert!(SessionTarget::PreferStandby.accepts_on_second_pass(role));
        }
        assert!(!SessionTarget::Standby.accepts_on_second_pass(Primary));
        assert!(!SessionTarget::ReadWrite.accepts_on_second_pass(Standby));
    }

    #[test]
    fn spellings_round_trip() {
        for t in [
            SessionTarget::Any,
            SessionTarget::ReadWrite,
            SessionTarget::ReadOnly,
            SessionTarget::Primary,
            SessionTarget::Standby,
            SessionTarget::PreferStandby,
        ] {
            assert_eq!(t.as_str().parse::<SessionTarget>(), Ok(t));
        }
        let err = "master".parse::<SessionTarget>().unwrap_err();
        assert!(err.to_string().contains("\"master\""), "{err}");
    }

    const A: ServerRole = ServerRole::Primary;
    const B: ServerRole = ServerRole::Standby;

    #[test]
    fn a_first_answer_announces_the_host_up_and_nothing_else() {
        let mut h = HostRecord::new();
        assert_eq!(h.routing, HostStatus::Unknown);
        let t = h.answered(A);
        assert_eq!(
            t,
            Transition {
                up: Some(A),
                ..Transition::default()
            }
        );
        assert_eq!(h.routing, HostStatus::Up(A));
        // The same answer again changes nothing.
        assert_eq!(h.answered(A), Transition::default());
    }

    #[test]
    fn down_is_announced_once_and_up_again_after_it() {
        let mut h = HostRecord::new();
        h.answered(A);
        assert!(h.failed().down);
        assert_eq!(h.routing, HostStatus::Down);
        assert_eq!(h.failed(), Transition::default(), "down twice: one event");
        let back = h.answered(A);
        assert_eq!(back.up, Some(A), "back up after down is announced");
        assert_eq!(back.role_changed, None, "same role: no role change");
        assert!(!back.demoted);
    }

    #[test]
    fn a_flapping_host_announces_every_change_and_ends_where_it_was_last_seen() {
        let mut h = HostRecord::new();
        let mut ups = 0;
        let mut downs = 0;
        for _ in 0..5 {
            ups += usize::from(h.answered(B).up.is_some());
            downs += usize::from(h.failed().down);
        }
        assert_eq!((ups, downs), (5, 5));
        assert_eq!(h.routing, HostStatus::Down);
        assert_eq!(
            h.last_role,
            Some(B),
            "the role seen last is kept while down"
        );
        assert_eq!(h.answered(B).up, Some(B));
        assert_eq!(h.routing, HostStatus::Up(B));
    }

    #[test]
    fn a_never_reached_host_that_fails_is_announced_down() {
        let mut h = HostRecord::new();
        assert!(h.failed().down, "unknown to down is a change");
        assert_eq!(h.routing, HostStatus::Down);
    }

    #[test]
    fn promotion_and_demotion_across_a_down_spell() {
        let mut h = HostRecord::new();
        h.answered(B);
        h.failed();
        let promoted = h.answered(A);
        assert_eq!(promoted.up, Some(A));
        assert_eq!(promoted.role_changed, Some((B, A)));
        assert!(!promoted.demoted);
        let demoted = h.answered(ServerRole::ReadOnlyPrimary);
        assert_eq!(demoted.up, None, "up already");
        assert_eq!(demoted.role_changed, Some((A, ServerRole::ReadOnlyPrimary)));
        assert!(demoted.demoted, "writable to read-only retires connections");
        h.failed();
        assert!(
            !h.answered(B).demoted,
            "read-only to standby is no demotion"
        );
    }

    #[test]
    fn a_suspect_host_routes_as_unknown_and_announces_only_what_changed() {
        let mut h = HostRecord::new();
        h.answered(A);
        h.suspected();
        assert_eq!(h.routing, HostStatus::Unknown);
        assert_eq!(h.announced, HostStatus::Up(A));
        // Checked again, same role: nothing to say.
        assert_eq!(h.answered(A), Transition::default());
        h.suspected();
        let t = h.answered(ServerRole::ReadOnlyPrimary);
        assert_eq!(t.up, None);
        assert!(t.demoted);
        // Suspect and then down: announced down.
        h.suspected();
        assert!(h.failed().down);
        // A down host stays down when suspected.
        h.suspected();
        assert_eq!(h.routing, HostStatus::Down);
    }

    const INTERVAL: Duration = Duration::from_millis(500);
    const GAP: Duration = Duration::from_millis(50);

    #[test]
    fn the_first_check_is_at_once_and_the_next_an_interval_after_it_began() {
        let t0 = Instant::now();
        let mut s = Schedule::new(INTERVAL, GAP, Duration::from_secs(2));
        assert_eq!(s.next_tick(t0), t0);
        assert_eq!(s.next_asked(t0), t0);
        let over = s.start(t0);
        assert_eq!(over, t0 + INTERVAL, "the limit is clamped to the interval");
        // However long the check took, the next is due an interval after
        // it began.
        assert_eq!(s.next_tick(t0 + Duration::from_millis(400)), t0 + INTERVAL);
        assert_eq!(s.next_tick(t0 + INTERVAL), t0 + INTERVAL);
    }

    #[test]
    fn an_asked_check_waits_out_the_gap_only() {
        let t0 = Instant::now();
        let mut s = Schedule::new(INTERVAL, GAP, Duration::from_millis(100));
        s.start(t0);
        let soon = t0 + Duration::from_millis(10);
        assert_eq!(s.next_asked(soon), t0 + GAP);
        let later = t0 + Duration::from_millis(200);
        assert_eq!(s.next_asked(later), later, "the gap has passed: at once");
        assert_eq!(
            s.limit(),
            Duration::from_millis(100),
            "a shorter connect timeout is kept"
        );
    }

    #[test]
    fn a_host_that_hangs_is_checked_again_within_two_intervals_of_answering() {
        // Checks that each run out their limit, back to back: the host
        // answers again at any instant; the check running then ends by its
        // limit, and the next one begins no later than an interval after
        // that one began.
        let t0 = Instant::now();
        let mut s = Schedule::new(INTERVAL, GAP, Duration::from_secs(10));
        let mut now = t0;
        let mut starts = Vec::new();
        for _ in 0..20 {
            now = now.max(s.next_tick(now));
            starts.push(now);
            now = s.start(now); // the check hangs until its limit
        }
        for answering in [1, 7, 123, 499, 500, 501, 2_345, 4_999] {
            let back = t0 + Duration::from_millis(answering);
            let next = starts.iter().find(|t| **t >= back).copied();
            let next = next.expect("a later check");
            assert!(
                next - back <= INTERVAL,
                "answering at {answering} ms: next check {:?} later",
                next - back
            );
        }
    }
}
