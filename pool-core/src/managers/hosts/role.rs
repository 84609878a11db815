//! Server roles and session targets, in libpq's terms.

use std::fmt;
use std::str::FromStr;

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
/// use pool_core::managers::hosts::SessionTarget;
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
    pub fn accepts(self, role: ServerRole) -> bool {
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
}
