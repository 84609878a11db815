//! How often a checkout takes part in tokio's cooperative budget.
//!
//! A task whose checkouts and queries are always ready would loop on its
//! hot connection and starve the tasks queued behind it on the same
//! worker, so `get()` spends tokio's budget as tokio's own semaphore does
//! (`tokio::task::consume_budget`). That call is about 65 of an
//! uncontended cycle's 473 instructions (callgrind, `s1_cycles`), so a
//! thread spends one unit every [`EVERY`] checkouts instead of every one:
//! a task looping on ready checkouts still yields, after at most `EVERY`
//! times tokio's budget (128 units) of them, instead of 128. Counted per
//! thread, not per task: a task that checks out over and over without
//! yielding takes every count on its thread meanwhile, so it is charged
//! one unit per `EVERY` of its own checkouts.

use std::cell::Cell;

/// Checkouts per unit of budget spent.
pub(crate) const EVERY: u8 = 8;

#[cfg(not(loom))]
std::thread_local! {
    static COUNT: Cell<u8> = const { Cell::new(0) };
}

#[cfg(loom)]
loom::thread_local! {
    static COUNT: Cell<u8> = Cell::new(0);
}

/// Whether this checkout spends a unit of budget: one in [`EVERY`] on
/// each thread (and every one once the thread's locals are gone).
#[inline]
pub(crate) fn due() -> bool {
    COUNT
        .try_with(|count| {
            let n = count.get();
            count.set(if n == 0 { EVERY - 1 } else { n - 1 });
            n == 0
        })
        .unwrap_or(true)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_in_every() {
        let due = (0..EVERY as usize * 10).filter(|_| due()).count();
        assert_eq!(due, 10);
    }
}
