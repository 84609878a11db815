//! Who holds the pool's connections: the call site of every checkout.

use std::fmt;
use std::panic::Location;
use std::time::Duration;

/// One checked-out connection: where it was taken and for how long it has
/// been held (`Pool::holders`).
///
/// The site is the caller of `get()`, `get_timeout()` or `try_get()`, which
/// are `#[track_caller]`: recording it costs a pointer store, so it is
/// always on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// Where the connection was taken: the caller of `get()`.
    pub location: &'static Location<'static>,
    /// How long it has been held.
    pub held_for: Duration,
}

impl Holder {
    /// A holder taken at `location` and held for `held_for`.
    pub fn new(location: &'static Location<'static>, held_for: Duration) -> Self {
        Self { location, held_for }
    }
}

/// Connections held, grouped by the site that took them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SiteHolders {
    /// Where the connections were taken.
    pub location: &'static Location<'static>,
    /// How many connections taken there are held now.
    pub count: u32,
    /// The longest any of them has been held.
    pub longest: Duration,
}

/// The busiest holder sites, most connections first, as a timeout reports
/// them ([`PoolError::Timeout`](crate::PoolError::Timeout)).
///
/// Display: `12 taken at src/orders.rs:88:23, held up to 4.9s; 4 at
/// src/report.rs:40:9, held up to 210ms; and 3 more at 2 other sites`, or
/// nothing when no connection is held.
///
/// ```
/// use std::panic::Location;
/// use std::time::Duration;
/// use pool_api::{Holder, HolderSites};
///
/// let here = Location::caller();
/// let holders = [
///     Holder::new(here, Duration::from_millis(900)),
///     Holder::new(here, Duration::from_millis(4_900)),
/// ];
/// let sites = HolderSites::from_holders(&holders, 3);
/// assert_eq!(sites.sites()[0].count, 2);
/// assert_eq!(
///     sites.to_string(),
///     format!("2 taken at {here}, held up to 4.9s")
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HolderSites {
    sites: Vec<SiteHolders>,
    /// Connections held at sites beyond the ones kept.
    more_connections: u32,
    /// Sites beyond the ones kept.
    more_sites: u32,
}

impl HolderSites {
    /// Groups `holders` by site, most connections first (then the longest
    /// held), and keeps the first `top` sites; the rest are counted.
    pub fn from_holders(holders: &[Holder], top: usize) -> Self {
        let mut sites: Vec<SiteHolders> = Vec::new();
        for h in holders {
            match sites.iter_mut().find(|s| s.location == h.location) {
                Some(s) => {
                    s.count += 1;
                    s.longest = s.longest.max(h.held_for);
                }
                None => sites.push(SiteHolders {
                    location: h.location,
                    count: 1,
                    longest: h.held_for,
                }),
            }
        }
        sites.sort_by(|a, b| b.count.cmp(&a.count).then(b.longest.cmp(&a.longest)));
        let rest = sites.split_off(top.min(sites.len()));
        Self {
            sites,
            more_connections: rest.iter().map(|s| s.count).sum(),
            more_sites: u32::try_from(rest.len()).unwrap_or(u32::MAX),
        }
    }

    /// The sites kept, most connections first.
    pub fn sites(&self) -> &[SiteHolders] {
        &self.sites
    }

    /// Connections held at the sites not kept, and how many such sites.
    pub fn more(&self) -> (u32, u32) {
        (self.more_connections, self.more_sites)
    }

    /// Whether no connection is held (or none was recorded).
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }
}

impl fmt::Display for HolderSites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.sites.iter().enumerate() {
            let longest = crate::error::rounded(s.longest);
            if i == 0 {
                write!(f, "{} taken at ", s.count)?;
            } else {
                write!(f, "; {} at ", s.count)?;
            }
            write!(f, "{}, held up to {longest:?}", s.location)?;
        }
        match self.more_sites {
            0 => Ok(()),
            1 => write!(f, "; and {} more at 1 other site", self.more_connections),
            n => write!(f, "; and {} more at {n} other sites", self.more_connections),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn site() -> &'static Location<'static> {
        Location::caller()
    }

    #[test]
    fn groups_by_site_busiest_first_and_counts_the_rest() {
        let (a, b, c, d) = (site(), site(), site(), site());
        let ms = Duration::from_millis;
        let mut holders = vec![Holder::new(b, ms(210)); 4];
        holders.extend(vec![Holder::new(a, ms(100)); 11]);
        holders.push(Holder::new(a, ms(4_900)));
        holders.push(Holder::new(c, ms(5)));
        holders.push(Holder::new(d, ms(6)));
        let sites = HolderSites::from_holders(&holders, 2);
        assert_eq!(
            sites.to_string(),
            format!("12 taken at {a}, held up to 4.9s; 4 at {b}, held up to 210ms; and 2 more at 2 other sites")
        );
        assert_eq!(sites.more(), (2, 2));
        assert!(HolderSites::from_holders(&[], 3).is_empty());
        assert_eq!(HolderSites::default().to_string(), "");
    }
}
