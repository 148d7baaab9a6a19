//! Raft timing, configurable per cluster.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Entries per AppendEntries message at most (openraft's default is 300). An entry may carry up
/// to `proposer::MAX_BATCH` writes, and openraft gives each message one heartbeat interval to
/// be sent, decoded and fsynced by the follower: 8 × 256 writes (about 1 MB of JSON) fits in
/// 100 ms; 300 entries of 64 did not, and a follower catching up timed out on every message
/// for ever (regression test
/// `cluster::a_node_down_during_10000_writes_catches_up_when_restarted`). A shorter heartbeat
/// gets proportionally fewer ([`RaftTiming::entries_per_append`]).
pub(crate) const MAX_ENTRIES_PER_APPEND: u64 = 8;

/// The heartbeat interval in which [`MAX_ENTRIES_PER_APPEND`] entries fit.
const FULL_APPEND_HEARTBEAT_MS: u64 = 100;

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
            // openraft 0.9 ticks every 1.5 heartbeat intervals (45 ms), sends a heartbeat on a
            // tick when one is due and checks the election timer on each. Its followers refuse
            // votes for `max` after the last heartbeat (the leader lease) and stand for election
            // `max + rand(min, max)` after it: 250-300 ms of silence here, five or more
            // heartbeats missed, where 350-600 ms gave 950-1200 ms (a failover p50 of 1.15 s
            // against 0.33 s now; no election in a 10-minute run at 256 clients on 2 cores:
            // BENCHMARKS.md, "Faster failover"). Peers more than ~20 ms apart need more.
            heartbeat_interval_ms: 30,
            election_timeout_min_ms: 100,
            election_timeout_max_ms: 150,
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
            max_payload_entries: self.entries_per_append(),
            ..Default::default()
        };
        config.validate().map_err(|e| crate::Error::Config {
            message: e.to_string(),
        })
    }

    /// Entries per AppendEntries at this heartbeat interval: each message must be answered
    /// within one interval (openraft's timeout for it), so the full
    /// [`MAX_ENTRIES_PER_APPEND`] only from 100 ms up, 2 at the default 30 ms, never none.
    pub(crate) fn entries_per_append(&self) -> u64 {
        (self
            .heartbeat_interval_ms
            .saturating_mul(MAX_ENTRIES_PER_APPEND)
            / FULL_APPEND_HEARTBEAT_MS)
            .clamp(1, MAX_ENTRIES_PER_APPEND)
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }

    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.heartbeat_interval_ms)
    }

    /// The longest a follower waits without hearing from its leader before it stands:
    /// openraft 0.9's leader lease (`max`) plus the longest election timeout.
    pub fn election_window(&self) -> Duration {
        Duration::from_millis(
            self.election_timeout_max_ms
                .saturating_add(self.election_timeout_max_ms),
        )
    }

    pub fn election_timeout_max(&self) -> Duration {
        Duration::from_millis(self.election_timeout_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_heartbeat(heartbeat_interval_ms: u64) -> RaftTiming {
        RaftTiming {
            heartbeat_interval_ms,
            ..RaftTiming::default()
        }
    }

    /// openraft waits one heartbeat interval for an AppendEntries reply: a shorter interval
    /// sends fewer entries per message, but always at least one, and a huge one no more than
    /// the message size allows.
    #[test]
    fn entries_per_append_follow_the_heartbeat_interval() {
        assert_eq!(
            with_heartbeat(100).entries_per_append(),
            MAX_ENTRIES_PER_APPEND
        );
        assert_eq!(with_heartbeat(50).entries_per_append(), 4);
        assert_eq!(RaftTiming::default().entries_per_append(), 2);
        assert_eq!(with_heartbeat(5).entries_per_append(), 1);
        assert_eq!(
            with_heartbeat(u64::MAX).entries_per_append(),
            MAX_ENTRIES_PER_APPEND
        );
    }

    /// The defaults make a valid openraft configuration that sends at least one entry.
    #[test]
    fn the_default_timing_is_a_valid_openraft_configuration() {
        let config = RaftTiming::default().to_openraft("roost").expect("valid");
        assert!(config.max_payload_entries >= 1);
        assert!(config.election_timeout_min > config.heartbeat_interval);
    }
}
