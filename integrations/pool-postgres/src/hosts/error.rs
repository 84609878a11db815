//! What building a host pool and checking out of it can fail with.

use std::fmt;
use std::sync::Arc;

use pool_api::{ConfigError, PoolError};

use super::{HostStatus, SessionTarget};

/// A boxed error from a manager customisation.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a host pool could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostConfigError {
    /// No host is listed.
    NoHost,
    /// A number of ports that is neither 0, 1 nor the number of hosts.
    PortCount {
        /// Hosts listed.
        hosts: usize,
        /// Ports listed.
        ports: usize,
    },
    /// `hostaddr`s listed, but not one per host.
    HostaddrCount {
        /// Hosts listed.
        hosts: usize,
        /// Addresses listed.
        hostaddrs: usize,
    },
    /// A recheck interval or gap of zero.
    ZeroRecheck,
    /// The pool config is refused (its `host` label is already taken, say).
    Pool(ConfigError),
    /// A host's manager refused its settings (its `check`, after
    /// [`HostPoolBuilder::manager`](super::HostPoolBuilder::manager)); its error is the source.
    Manager(BoxError),
}

impl fmt::Display for HostConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoHost => f.write_str("the host pool lists no host"),
            Self::PortCount { hosts, ports } => write!(
                f,
                "the host pool lists {hosts} hosts and {ports} ports: give one port, or one per \
                 host"
            ),
            Self::HostaddrCount { hosts, hostaddrs } => write!(
                f,
                "the host pool lists {hosts} hosts and {hostaddrs} hostaddrs: give one per host"
            ),
            Self::ZeroRecheck => f.write_str("the host recheck interval and gap must not be zero"),
            Self::Pool(e) => write!(f, "host pool: {e}"),
            Self::Manager(e) => write!(f, "host pool manager settings: {e}"),
        }
    }
}

impl std::error::Error for HostConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Pool(e) => Some(e),
            Self::Manager(e) => Some(&**e),
            _ => None,
        }
    }
}

/// What a host pool checkout or build can fail with; `E` is the manager's
/// error.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostPoolError<E> {
    /// No host of the role wanted answered: none is known to have it, or
    /// every one that has it (or whose role is unknown) failed to connect.
    /// Returned as soon as the candidates are tried, without waiting for a
    /// connection to come back (the hosts are rechecked in the
    /// background), so a write checkout during a failover fails fast
    /// instead of waiting out its timeout.
    NoHost {
        /// What the checkout wanted.
        target: SessionTarget,
        /// Every host's status when it gave up.
        hosts: Vec<(Arc<str>, HostStatus)>,
        /// The last connect error seen by this checkout, as text.
        last_error: Option<String>,
    },
    /// The checkout from the chosen host ran out of time
    /// ([`PoolError::Timeout`]: every connection in use, or a connect that
    /// did not finish).
    Pool {
        /// `host:port`.
        host: Arc<str>,
        /// The host pool's error.
        error: PoolError<E>,
    },
    /// The host pool was closed.
    Closed,
    /// The settings are refused.
    Config(HostConfigError),
    /// At build: no host could be reached.
    Unreachable {
        /// Each host with its error, as text.
        errors: Vec<(Arc<str>, String)>,
    },
}

impl<E: fmt::Display> fmt::Display for HostPoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoHost {
                target,
                hosts,
                last_error,
            } => {
                write!(f, "no host for target_session_attrs={target} (")?;
                for (i, (host, status)) in hosts.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    match status {
                        HostStatus::Up(role) => write!(f, "{sep}{host}: {role}")?,
                        HostStatus::Down => write!(f, "{sep}{host}: down")?,
                        HostStatus::Unknown => write!(f, "{sep}{host}: unknown")?,
                    }
                }
                f.write_str(")")?;
                if let Some(e) = last_error {
                    write!(f, "; last error: {e}")?;
                }
                Ok(())
            }
            Self::Pool { host, error } => write!(f, "host {host}: {error}"),
            Self::Closed => f.write_str("host pool is closed"),
            Self::Config(e) => fmt::Display::fmt(e, f),
            Self::Unreachable { errors } => {
                f.write_str("no database host could be reached")?;
                for (host, e) in errors {
                    write!(f, "; {host}: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for HostPoolError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Pool { error, .. } => Some(error),
            Self::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<HostConfigError> for HostPoolError<E> {
    fn from(e: HostConfigError) -> Self {
        Self::Config(e)
    }
}
