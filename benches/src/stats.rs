//! Percentiles, medians and Jain's fairness index.

/// Jain's index below this marks a run as unfair (starving tasks).
pub const FAIR_ENOUGH: f64 = 0.8;

/// Jain's fairness index of per-task completion counts:
/// `(Σx)² / (n·Σx²)`, 1.0 when every task did the same number of cycles,
/// `1/n` when one task did them all. 0 when nothing completed.
pub fn jain(counts: &[u64]) -> f64 {
    let n = counts.len() as f64;
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    if squares == 0.0 {
        0.0
    } else {
        sum * sum / (n * squares)
    }
}

/// The `q` quantile (0..=1) of `sorted`, nearest-rank; 0 when empty.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// p50, p99 and max of `samples` (sorted in place).
pub fn summary(samples: &mut [u64]) -> [u64; 3] {
    samples.sort_unstable();
    [
        quantile(samples, 0.5),
        quantile(samples, 0.99),
        samples.last().copied().unwrap_or(0),
    ]
}

/// Median of `values` (the lower one of an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_bounds() {
        assert!((jain(&[5, 5, 5, 5]) - 1.0).abs() < 1e-12);
        assert!((jain(&[8, 0, 0, 0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[0, 0]), 0.0);
    }

    #[test]
    fn quantiles() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(summary(&mut v), [50, 99, 100]);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}
