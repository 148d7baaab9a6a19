//! The openraft type configuration shared by the store and the Raft wiring.

use std::fmt;
use std::io::Cursor;
use std::ops::Deref;
use std::sync::Arc;

use roost_core::{DomainError, Envelope, Outcome};
use serde::{Deserialize, Serialize};

/// How to reach a node: its gRPC address (clients and workers), its HTTP one, and its peer
/// address (the Raft service, for other nodes only).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub grpc_addr: String,
    pub http_addr: String,
    /// Empty in memberships recorded before nodes had a peer listener: their Raft service was
    /// on the gRPC address.
    #[serde(default)]
    pub peer_addr: String,
}

impl NodeInfo {
    /// Where other nodes reach this node's Raft service.
    pub fn peer(&self) -> &str {
        if self.peer_addr.is_empty() {
            &self.grpc_addr
        } else {
            &self.peer_addr
        }
    }
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "grpc={} http={} peer={}",
            self.grpc_addr,
            self.http_addr,
            self.peer()
        )
    }
}

/// What applying one entry returned. `result` is `None` for Raft's own entries (blank,
/// membership) and for a batch, whose results are in `batch`, one per envelope in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyResult {
    pub index: u64,
    pub result: Option<Result<Outcome, DomainError>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<Result<Outcome, DomainError>>,
}

/// A log entry's envelope, shared. openraft clones an entry each time it is read: into the log
/// tail, for each follower's replication and for apply. Deep clones of batches of commands were
/// 3% of a cluster's CPU at 64 clients, most of it the leader's (BENCHMARKS.md, "Where a
/// write's CPU goes"); this clone is a reference count. On the wire and in the log it is the
/// envelope itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedEnvelope(Arc<Envelope>);

impl From<Envelope> for SharedEnvelope {
    fn from(envelope: Envelope) -> Self {
        SharedEnvelope(Arc::new(envelope))
    }
}

impl Deref for SharedEnvelope {
    type Target = Envelope;

    fn deref(&self) -> &Envelope {
        &self.0
    }
}

impl Serialize for SharedEnvelope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SharedEnvelope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Envelope::deserialize(deserializer).map(SharedEnvelope::from)
    }
}

openraft::declare_raft_types!(
    /// Roost's Raft types: log entries carry command envelopes.
    pub TypeConfig:
        D = SharedEnvelope,
        R = ApplyResult,
        NodeId = u64,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

#[cfg(test)]
mod tests {
    use roost_core::{Actor, Command, Envelope, Timestamp};

    use super::SharedEnvelope;

    /// Logs and AppendEntries written before entries were shared hold bare envelopes: the
    /// shared one must be written and read as exactly that.
    #[test]
    fn a_shared_envelope_is_written_and_read_as_the_envelope_itself() {
        let envelope = Envelope {
            request_id: Some("r1".into()),
            at: Timestamp(1_763_769_600_123),
            actor: Actor::system(),
            command: Command::CreateCompany {
                id: "c1".into(),
                name: "Acme".into(),
                issue_prefix: "ACM".into(),
            },
            idempotency_key: Some("k".into()),
        };
        let bare = serde_json::to_string(&envelope).expect("encode");
        let shared = SharedEnvelope::from(envelope.clone());
        assert_eq!(serde_json::to_string(&shared).expect("encode"), bare);
        let read: SharedEnvelope = serde_json::from_str(&bare).expect("decode");
        assert_eq!(*read, envelope);
    }
}
