//! Raft timing, configurable per cluster.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Entries per AppendEntries message (openraft's default is 300). An entry may carry up to
/// `proposer::MAX_BATCH` writes, and openraft gives each message one heartbeat interval to be
/// sent, decoded and fsynced by the follower: 8 × 256 writes (about 1 MB of JSON) fits; 300
/// entries of 64 did not, and a follower catching up timed out on every message for ever
/// (regression test `cluster::a_node_down_during_10000_writes_catches_up_when_restarted`).
pub(crate) const MAX_ENTRIES_PER_APPEND: u64 = 8;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RaftTiming {
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot (and allow purging the log) after this many applied entries.
    pub snapshot_after_entries: u64,
    /// Log entries kept behind a snapshot, so a briefly lagging follower needs no snapshot.
    pub keep_entries_after_snapshot: u64,
    pub install_snapshot_timeout_ms: u64,
    /// How long a write or a read barrier may wait for a quorum before the client is told to
    /// retry (503).
    pub write_timeout_ms: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming {
            heartbeat_interval_ms: 100,
            // openraft 0.9 followers refuse votes for `max` after the last heartbeat (the
            // leader lease) and stand for election `max + rand(min, max)` after it: 950-1200 ms
            // here, etcd's silence window (1000 ms at its defaults) rather than 1500-2000 ms.
            election_timeout_min_ms: 350,
            election_timeout_max_ms: 600,
            snapshot_after_entries: 10_000,
            keep_entries_after_snapshot: 1_000,
            install_snapshot_timeout_ms: 10_000,
            write_timeout_ms: 5_000,
        }
    }
}

impl RaftTiming {
    pub(crate) fn to_openraft(&self, cluster_name: &str) -> Result<openraft::Config, crate::Error> {
        let config = openraft::Config {
            cluster_name: cluster_name.to_string(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_after_entries),
            max_in_snapshot_log_to_keep: self.keep_entries_after_snapshot,
            max_payload_entries: MAX_ENTRIES_PER_APPEND,
            ..Default::default()
        };
        config.validate().map_err(|e| crate::Error::Config {
            message: e.to_string(),
        })
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }

    pub fn election_timeout_max(&self) -> Duration {
        Duration::from_millis(self.election_timeout_max_ms)
    }
}
