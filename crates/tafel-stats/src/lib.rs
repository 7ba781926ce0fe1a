//! The fixed-bucket histogram Tafel's metrics observe latencies and sizes
//! with: lock-free, a few relaxed atomic adds per observation (prometheus-client's
//! own takes a mutex each time). Both the store (syncs, commit groups, pool waits)
//! and the HTTP layer (request latency) use it, and neither depends on the
//! other, so it is a crate of its own below both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Per-bucket (not cumulative) counts by upper bound, the last bound `+Inf`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

/// Seconds: 100 µs to 10 s, for syncs, commits and checkpoints.
pub const SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Counts: 1 to 512, for commit group sizes.
pub const COUNTS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
/// Bytes: 64 KiB to 256 MiB, for checkpoints.
pub const BYTES: &[f64] = &[
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    16777216.0,
    67108864.0,
    268435456.0,
];

/// A histogram over fixed bounds: observing is a search of a few bounds and
/// three relaxed atomic adds, with no lock.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One more than `bounds`: the last counts what is above every bound.
    counts: Box<[AtomicU64]>,
    /// Sum of the observations in millionths, so an atomic integer holds it.
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        // Saturating float-to-int conversion: a negative or NaN value adds nothing.
        self.sum_micros.fetch_add((v * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|(_, n)| n).sum(),
            buckets,
            sum: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_at_or_above_them() {
        let h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 3.0, 3.0] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(1.0, 2), (2.0, 1), (f64::INFINITY, 2)]);
        assert_eq!(s.count, 5);
        assert!((s.sum - 9.0).abs() < 1e-9);
    }
}
