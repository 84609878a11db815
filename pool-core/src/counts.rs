//! The pool's connection counts, packed in one atomic word so that every
//! snapshot is consistent: `total == idle + in_use + opening`.
//!
//! ```text
//!  63  62           42 41           21 20            0
//! +---+---------------+---------------+---------------+
//! | 0 |    opening    |    in_use     |     idle      |
//! +---+---------------+---------------+---------------+
//! ```
//!
//! Each move of a connection between states is one `fetch_add` of a
//! wrapping delta (`+1` in one field, `-1` in another). A field never goes
//! below zero because every decrement follows the increment it undoes: a
//! connection is counted idle *before* it is pushed on the idle stack and
//! uncounted only *after* it is popped; a slot is counted opening only after
//! it was reserved and uncounted before it is freed. So `total` never
//! exceeds the number of reserved slots, which never exceeds `max_size`.
//! Fields are 21 bits wide, above `MAX_POOL_SIZE`, so none can carry into
//! its neighbour.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

const WIDTH: u32 = 21;
const MASK: u64 = (1 << WIDTH) - 1;

/// A state a connection is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Idle = 0,
    InUse = 1,
    Opening = 2,
}

impl Counted {
    const fn unit(self) -> u64 {
        1 << (WIDTH * self as u32)
    }
}

/// The counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Snapshot {
    pub(crate) idle: u32,
    pub(crate) in_use: u32,
    pub(crate) opening: u32,
}

impl Snapshot {
    pub(crate) fn total(&self) -> u32 {
        self.idle + self.in_use + self.opening
    }
}

#[derive(Debug)]
pub(crate) struct Counts(CachePadded<AtomicU64>);

impl Counts {
    pub(crate) fn new() -> Self {
        Self(CachePadded::new(AtomicU64::new(0)))
    }

    /// Counts one more connection in `to`.
    pub(crate) fn add(&self, to: Counted) {
        // Relaxed: the counts are statistics and bound checks read them
        // only as hints; the hard bound is the slot free list.
        self.0.fetch_add(to.unit(), Ordering::Relaxed);
    }

    /// Counts one fewer connection in `from`.
    pub(crate) fn remove(&self, from: Counted) {
        self.0.fetch_sub(from.unit(), Ordering::Relaxed);
    }

    /// Moves one connection from `from` to `to`.
    pub(crate) fn shift(&self, from: Counted, to: Counted) {
        if from != to {
            self.0
                .fetch_add(to.unit().wrapping_sub(from.unit()), Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> Snapshot {
        let w = self.0.load(Ordering::Relaxed);
        let field = |c: Counted| ((w >> (WIDTH * c as u32)) & MASK) as u32;
        Snapshot {
            idle: field(Counted::Idle),
            in_use: field(Counted::InUse),
            opening: field(Counted::Opening),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn shifts_move_one_unit_without_carry() {
        let c = Counts::new();
        c.add(Counted::Opening);
        c.add(Counted::Opening);
        c.shift(Counted::Opening, Counted::Idle);
        c.shift(Counted::Idle, Counted::InUse);
        c.shift(Counted::Opening, Counted::InUse);
        assert_eq!(
            c.get(),
            Snapshot {
                idle: 0,
                in_use: 2,
                opening: 0
            }
        );
        c.shift(Counted::InUse, Counted::Idle);
        c.remove(Counted::InUse);
        assert_eq!(c.get().total(), 1);
        assert_eq!(c.get().idle, 1);
    }
}
