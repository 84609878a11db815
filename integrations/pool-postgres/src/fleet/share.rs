//! The fair share arithmetic of a fleet budget: each live instance's
//! guaranteed share, what one recheck decides from what it read, and what
//! a control session's join decides from its answers. Pure: no I/O, no
//! clock, no runtime; the control task (`control.rs`) feeds it the rows
//! it read.

/// The tickets each of `members` live instances of a budget of `total` is
/// guaranteed: `floor(total / members)` (all of `total` for one instance,
/// or when none is counted yet). The remainder, `total % members`, is
/// nobody's: whoever claims it first holds it, like any ticket an instance
/// leaves unused. With more instances than tickets the share is 0: no
/// instance is guaranteed anything, and tickets go to the first to claim.
///
/// ```
/// use pool_postgres::fleet::fair_share;
///
/// assert_eq!(fair_share(20, 5), 4);
/// assert_eq!(fair_share(20, 3), 6); // 2 left over, for whoever claims them
/// assert_eq!(fair_share(20, 1), 20);
/// ```
pub fn fair_share(total: u32, members: u32) -> u32 {
    total / members.max(1)
}

/// What one recheck decides for an instance, from what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The instance's guaranteed share.
    pub(crate) share: u32,
    /// How many of its connections to close when they come back.
    pub(crate) give_back: u32,
    /// Whether it holds its wanting lock.
    pub(crate) want: bool,
}

/// The recheck's rule: below its share and refused lately, an instance
/// wants; above its share while another wants, it gives the excess back.
pub(crate) fn decide(
    total: u32,
    members: u32,
    held: u32,
    others_want: bool,
    refused_lately: bool,
) -> Decision {
    let share = fair_share(total, members);
    Decision {
        share,
        give_back: if others_want {
            held.saturating_sub(share)
        } else {
            0
        },
        want: held < share && refused_lately,
    }
}

/// What one count on `pg_locks` tells, knocks included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Live instances: those holding a member lock, and those knocking.
    pub(crate) members: u32,
    /// Another instance holds its wanting lock, or knocks.
    pub(crate) others_want: bool,
    /// Every instance that knocked lately holds its member lock now: none
    /// of them is to be counted again should it leave.
    pub(crate) all_in: bool,
}

/// Counts the instances from the count's columns: `joined` member locks,
/// `others` wanting locks of other sessions, and `knocked_in` of the
/// `knocking` ids heard lately that hold a member lock now. An instance
/// still knocking is a member outside, and it wants.
pub(crate) fn tally(joined: u32, others: u32, knocking: u32, knocked_in: u32) -> Tally {
    let knocking = knocking.saturating_sub(knocked_in);
    Tally {
        members: joined.saturating_add(knocking),
        others_want: others > 0 || knocking > 0,
        all_in: knocking == 0,
    }
}

/// What a control session's join comes to, from its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Join {
    /// No ticket free: knock, and close the session (a session outside
    /// the budget never stays open).
    Knock,
    /// A ticket taken: try the member lock next.
    Ticket,
    /// The member lock is held by another instance that drew the same id:
    /// draw again, and close the session (its ticket with it).
    Redraw,
    /// Ticket and member lock held: listen for knocks, and count the
    /// control session's ticket; `pid` is its backend's (0 when unknown).
    Joined { pid: i32 },
}

impl Join {
    /// After the join query's row: (ticket or `-1`, backend pid).
    pub(crate) fn after_ticket(row: &[i64]) -> Self {
        if row.first().copied().unwrap_or(-1) < 0 {
            Self::Knock
        } else {
            Self::Ticket
        }
    }

    /// After the member lock's answer (`1`: taken), on a session whose
    /// join query returned `ticket_row`.
    pub(crate) fn after_member(ticket_row: &[i64], member_row: &[i64]) -> Self {
        if member_row.first() != Some(&1) {
            return Self::Redraw;
        }
        let pid = ticket_row.get(1).and_then(|&p| i32::try_from(p).ok());
        Self::Joined {
            pid: pid.unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_round_down_and_the_remainder_is_nobodys() {
        assert_eq!(fair_share(20, 5), 4);
        assert_eq!(fair_share(20, 3), 6);
        assert_eq!(fair_share(20, 1), 20);
        assert_eq!(fair_share(20, 0), 20);
        assert_eq!(fair_share(3, 4), 0);
    }

    #[test]
    fn knockers_count_as_wanting_members_until_they_are_in() {
        // Nobody knocking: the members are the member locks.
        assert_eq!(
            tally(4, 0, 0, 0),
            Tally {
                members: 4,
                others_want: false,
                all_in: true
            }
        );
        // Two heard, one of them in already (counted by its lock).
        assert_eq!(
            tally(4, 0, 2, 1),
            Tally {
                members: 5,
                others_want: true,
                all_in: false
            }
        );
        // Both in: counted once each, nobody wants.
        assert_eq!(tally(6, 0, 2, 2).members, 6);
        assert!(tally(6, 0, 2, 2).all_in && !tally(6, 0, 2, 2).others_want);
        // A wanting lock of another instance is want enough.
        assert!(tally(3, 1, 0, 0).others_want);
    }

    #[test]
    fn a_join_knocks_without_a_ticket_and_redraws_on_a_taken_id() {
        assert_eq!(Join::after_ticket(&[-1, 42]), Join::Knock);
        assert_eq!(Join::after_ticket(&[]), Join::Knock, "no row: no ticket");
        assert_eq!(Join::after_ticket(&[0, 42]), Join::Ticket);
        assert_eq!(Join::after_member(&[2, 42], &[0]), Join::Redraw);
        assert_eq!(Join::after_member(&[2, 42], &[]), Join::Redraw);
        assert_eq!(Join::after_member(&[2, 42], &[1]), Join::Joined { pid: 42 });
        // A pid that does not fit (or is missing) is 0: none known.
        assert_eq!(
            Join::after_member(&[2, i64::MAX], &[1]),
            Join::Joined { pid: 0 }
        );
        assert_eq!(Join::after_member(&[2], &[1]), Join::Joined { pid: 0 });
    }

    #[test]
    fn the_recheck_decides_want_and_give_back() {
        // Alone: the whole budget, nothing to give back.
        assert_eq!(
            decide(20, 1, 20, false, false),
            Decision {
                share: 20,
                give_back: 0,
                want: false
            }
        );
        // Five instances, one new and refused: it wants...
        assert_eq!(
            decide(20, 5, 0, false, true),
            Decision {
                share: 4,
                give_back: 0,
                want: true
            }
        );
        // ...and each old one at 5 gives one back, only while it wants.
        assert_eq!(decide(20, 5, 5, true, false).give_back, 1);
        assert_eq!(decide(20, 5, 5, false, false).give_back, 0);
        // At its share an instance neither wants nor gives back.
        assert_eq!(
            decide(20, 5, 4, true, true),
            Decision {
                share: 4,
                give_back: 0,
                want: false
            }
        );
        // Below its share but not refused lately (no demand): no want.
        assert!(!decide(20, 5, 1, false, false).want);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Shares never add up past the budget, and the remainder is
            /// less than one per instance.
            #[test]
            fn shares_fit_the_budget(total in 1_u32..100_000, members in 1_u32..2_000) {
                let share = fair_share(total, members);
                let given = u64::from(share) * u64::from(members);
                prop_assert!(given <= u64::from(total));
                prop_assert!(u64::from(total) - given < u64::from(members));
            }

            /// Once every other instance has given back what the recheck
            /// told it to, an instance below its share finds at least its
            /// share free (the guarantee), whatever the others held.
            #[test]
            fn giving_back_frees_the_share_of_the_one_that_wants(
                total in 1_u32..400,
                others in proptest::collection::vec(0_u32..400, 1..12),
            ) {
                let members = u32::try_from(others.len()).unwrap_or(u32::MAX) + 1;
                let share = fair_share(total, members);
                // What the others hold fits the budget; the newcomer holds 0.
                let mut left = total;
                let held: Vec<u32> = others.iter().map(|&h| { let h = h.min(left); left -= h; h }).collect();
                let want = decide(total, members, 0, false, true).want;
                prop_assert_eq!(want, share > 0);
                let after: u32 = held
                    .iter()
                    .map(|&h| h - decide(total, members, h, want, false).give_back)
                    .sum();
                if want {
                    prop_assert!(total - after >= share);
                }
                // Nobody gives back below its share, nor while nobody wants.
                for &h in &held {
                    let d = decide(total, members, h, want, false);
                    prop_assert!(h - d.give_back >= h.min(share));
                    prop_assert!(want || d.give_back == 0);
                }
            }
        }
    }
}
