//! What a run prints: the throughput around the fault ([`Rates`]) and the
//! timeline of a run.

use super::*;

/// Successful operations per second in the second before the fault and in
/// the last second of the run: what "90 % throughput after up" compares,
/// so that a "never" there can be read (the pool not back, or the machine
/// slower at the end than at the start).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rates {
    pub(crate) before: usize,
    pub(crate) last: usize,
}

impl Rates {
    pub(crate) fn of(ops: &[Op], fault: Instant, end: Instant) -> Rates {
        let second = Duration::from_secs(1);
        let ok_in = |from: Option<Instant>, to: Instant| {
            from.map_or(0, |from| {
                ops.iter()
                    .filter(|op| op.outcome == Outcome::Ok && op.end >= from && op.end < to)
                    .count()
            })
        };
        Rates {
            before: ok_in(fault.checked_sub(second), fault),
            last: ok_in(end.checked_sub(second), end),
        }
    }
}

/// `--timeline`: per 10 ms from 50 ms before `up` to 700 ms after, the
/// operations that ended ok and not ok, and our pool's last sampled counts.
pub(crate) fn print_timeline(
    label: &str,
    ops: &[Op],
    up: Instant,
    states: &[(Instant, pool_core::PoolMetrics)],
) {
    println!("timeline {label} (ms after up: ok / failed; ours: idle in_use opening closing waiting connects failed_connects evicted_broken evicted_validation)");
    let step = Duration::from_millis(10);
    let first = up.checked_sub(Duration::from_millis(50)).unwrap_or(up);
    for i in 0..75u32 {
        let from = first + step * i;
        let to = from + step;
        let (mut ok, mut failed) = (0, 0);
        for op in ops.iter().filter(|op| op.end >= from && op.end < to) {
            if op.outcome == Outcome::Ok {
                ok += 1;
            } else {
                failed += 1;
            }
        }
        let state = states
            .iter()
            .rev()
            .find(|(at, _)| *at < to)
            .map(|(_, m)| {
                format!(
                    "  {} {} {} {} {} {} {} {} {}",
                    m.idle,
                    m.in_use,
                    m.opening,
                    m.closing,
                    m.waiting,
                    m.creation_count,
                    m.creation_error_count,
                    m.evictions.broken,
                    m.evictions.validation
                )
            })
            .unwrap_or_default();
        let at_ms = (from.saturating_duration_since(up).as_secs_f64()
            - up.saturating_duration_since(from).as_secs_f64())
            * 1e3;
        println!("  {at_ms:>5.0} {ok:>5} / {failed:<5}{state}");
    }
    // Since when every slot holds an open connection, to the end of the
    // window: whether the pool or the server paces what follows.
    let end = up + step * 70;
    let open = |m: &pool_core::PoolMetrics| m.idle + m.in_use;
    let window: Vec<_> = states.iter().filter(|(at, _)| *at < end).collect();
    let Some((first_at, first)) = window.first() else {
        return;
    };
    let max = first.max_size;
    // The sample after the last one short of `max`; none after it: not full.
    let full_from = match window.iter().rposition(|(_, m)| open(m) < max) {
        None => Some(*first_at),
        Some(i) => window.get(i + 1).map(|(at, _)| *at),
    };
    match full_from {
        Some(at) => println!(
            "  full ({max} open) from {:+.0} ms after up",
            (at.saturating_duration_since(up).as_secs_f64()
                - up.saturating_duration_since(at).as_secs_f64())
                * 1e3
        ),
        None => println!("  not full by 700 ms after up"),
    }
}

pub(crate) fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "never".to_owned(),
        |d| format!("{:.0} ms", d.as_secs_f64() * 1e3),
    )
}
