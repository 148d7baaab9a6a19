//! What the proposer (`proposer.rs`) saw of the write path: how long a write waited from its
//! proposal to its result, and how many writes each proposed entry carried. Plain atomics,
//! owned by the node and read by whoever reports them (the server's `/metrics`); the write path
//! pays one relaxed add per bucket hit and knows nothing of any metrics format.

use std::sync::Arc;
use std::time::Duration;

use roost_store::stats::{Histogram, HistogramSnapshot};

/// Upper bounds of the write latency buckets, in microseconds (250 µs to 10 s: an fsync on an
/// idle disk up to a write that waited out an election).
const LATENCY_BOUNDS_US: &[u64] = &[
    250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 10_000_000,
];
/// Upper bounds of the batch size buckets, in writes per entry (up to `proposer::MAX_BATCH`).
const BATCH_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];

struct Inner {
    latency: Histogram,
    batch: Histogram,
}

/// The write path's counters: a cheap `Clone` handle shared by the proposer and its readers.
#[derive(Clone)]
pub struct WriteStats {
    inner: Arc<Inner>,
}

impl Default for WriteStats {
    fn default() -> Self {
        WriteStats {
            inner: Arc::new(Inner {
                latency: Histogram::new(LATENCY_BOUNDS_US),
                batch: Histogram::new(BATCH_BOUNDS),
            }),
        }
    }
}

impl WriteStats {
    pub(crate) fn observe_latency(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.inner.latency.observe(micros);
    }

    pub(crate) fn observe_batch(&self, writes: usize) {
        self.inner.batch.observe(writes as u64);
    }

    /// Seconds from a write's proposal on this node to its result, for writes that committed.
    pub fn latency_seconds(&self) -> HistogramSnapshot {
        self.inner.latency.snapshot(1e6)
    }

    /// Writes carried by each entry this node proposed (1 when a write went alone).
    pub fn batch_sizes(&self) -> HistogramSnapshot {
        self.inner.batch.snapshot(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_buckets() {
        let stats = WriteStats::default();
        stats.observe_batch(1);
        stats.observe_batch(3);
        stats.observe_batch(1000);
        let b = stats.batch_sizes();
        assert_eq!(b.count, 3);
        assert_eq!(b.sum, 1004.0);
        assert_eq!(b.buckets[0], (1.0, 1));
        assert_eq!(b.buckets[2], (4.0, 1));
        assert_eq!(b.buckets.last(), Some(&(f64::INFINITY, 1)));
        stats.observe_latency(Duration::from_millis(3));
        let l = stats.latency_seconds();
        assert_eq!(l.count, 1);
        assert!((l.sum - 0.003).abs() < 1e-9);
        assert_eq!(l.buckets[4], (0.005, 1));
        assert_eq!(l.buckets[6].0, 0.025);
    }
}
