//! Plain-atomic histograms of the store's own work, and the one type every reader of a
//! histogram gets ([`HistogramSnapshot`]): how long each applied batch took and each snapshot
//! build. Owned by the state machine, read by whoever reports them (the server's `/metrics`
//! through [`crate::StateReader::stats`]); knows nothing of any metrics format.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A histogram of whole-number observations with fixed bounds.
pub struct Histogram {
    bounds: &'static [u64],
    /// One per bound, then one for everything above the last.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: u64) {
        let at = self.bounds.partition_point(|bound| *bound < value);
        if let Some(bucket) = self.buckets.get(at) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// `per_unit` stored units make one reported unit (a division, not a multiplication by its
    /// inverse: 25000 / 1e6 prints as 0.025, 25000 * 1e-6 as 0.024999999999999998).
    pub fn snapshot(&self, per_unit: f64) -> HistogramSnapshot {
        let mut buckets = Vec::with_capacity(self.buckets.len());
        let mut count = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            let n = bucket.load(Ordering::Relaxed);
            count += n;
            let bound = self
                .bounds
                .get(i)
                .map_or(f64::INFINITY, |b| *b as f64 / per_unit);
            buckets.push((bound, n));
        }
        HistogramSnapshot {
            // The count is the buckets' total, so a reader never sees them disagree even while
            // writes land between the loads.
            count,
            sum: self.sum.load(Ordering::Relaxed) as f64 / per_unit,
            buckets,
        }
    }
}

/// A histogram as read at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    pub count: u64,
    pub sum: f64,
    /// `(upper bound, observations in this bucket alone)`, the last bound `+Inf`.
    pub buckets: Vec<(f64, u64)>,
}

/// Upper bounds of the apply buckets, in microseconds (a batch of small writes up to one that
/// waited on a slow disk).
const APPLY_BOUNDS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];
/// Upper bounds of the snapshot build buckets, in milliseconds.
const SNAPSHOT_BOUNDS_MS: &[u64] = &[10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000];

struct Inner {
    apply: Histogram,
    snapshot_build: Histogram,
}

/// The store's counters: a cheap `Clone` handle shared by the state machine and its readers.
#[derive(Clone)]
pub struct StoreStats {
    inner: Arc<Inner>,
}

impl Default for StoreStats {
    fn default() -> Self {
        StoreStats {
            inner: Arc::new(Inner {
                apply: Histogram::new(APPLY_BOUNDS_US),
                snapshot_build: Histogram::new(SNAPSHOT_BOUNDS_MS),
            }),
        }
    }
}

fn micros(took: Duration) -> u64 {
    u64::try_from(took.as_micros()).unwrap_or(u64::MAX)
}

impl StoreStats {
    pub(crate) fn observe_apply(&self, took: Duration) {
        self.inner.apply.observe(micros(took));
    }

    pub(crate) fn observe_snapshot_build(&self, took: Duration) {
        self.inner.snapshot_build.observe(micros(took) / 1000);
    }

    /// Seconds each batch of committed entries took to apply (state and rows).
    pub fn apply_seconds(&self) -> HistogramSnapshot {
        self.inner.apply.snapshot(1e6)
    }

    /// Seconds each snapshot this node built took; its count is the snapshots built.
    pub fn snapshot_build_seconds(&self) -> HistogramSnapshot {
        self.inner.snapshot_build.snapshot(1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_and_snapshot_times_land_in_their_buckets() {
        let stats = StoreStats::default();
        stats.observe_apply(Duration::from_micros(80));
        stats.observe_snapshot_build(Duration::from_millis(300));
        let a = stats.apply_seconds();
        assert_eq!((a.count, a.buckets[1]), (1, (0.0001, 1)));
        let s = stats.snapshot_build_seconds();
        assert_eq!((s.count, s.buckets[4]), (1, (0.5, 1)));
        assert!((s.sum - 0.3).abs() < 1e-9);
    }
}
