//! Small statistics helpers for the benchmarks.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock nanoseconds: comparable across processes on one machine.
pub fn wall_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos()
}

/// The `p`-th percentile (0..=100) of `sorted` (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Jain's fairness index of per-worker counts: 1.0 means perfectly even.
pub fn jain(counts: &[u64]) -> f64 {
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sq: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    if sq == 0.0 {
        return 0.0;
    }
    sum * sum / (counts.len() as f64 * sq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_jain() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(jain(&[5, 5, 5, 5]), 1.0);
        assert!((jain(&[20, 0, 0, 0]) - 0.25).abs() < 1e-9);
    }
}
