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

/// A log entry's envelope, shared. The log store clones an entry each time openraft reads it:
/// the tail's copy on append, each follower's replication, and apply. Deep clones of batches of
/// commands were 3% of a cluster's samples at 64 clients, on every node (BENCHMARKS.md, "Where
/// a write's CPU goes at 64 clients"); this clone is a reference count. On the wire and in the log it is the
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
    use openraft::{Entry, EntryPayload};
    use roost_core::Timestamp;

    use super::TypeConfig;

    /// A log row (and an AppendEntries entry, the same JSON) as nodes wrote it before entries
    /// were shared: it must read back and be written again byte for byte, so that old logs
    /// replay and old and new nodes replicate to each other.
    #[test]
    fn an_entry_written_before_entries_were_shared_reads_and_writes_the_same() {
        const ROW: &str = concat!(
            r#"{"log_id":{"leader_id":{"term":3,"node_id":1},"index":42},"#,
            r#""payload":{"Normal":{"at":"2025-11-22T00:00:00.123Z","#,
            r#""actor":{"kind":"system","id":"system","credentialId":null,"runId":null,"#,
            r#""companyId":null},"command":{"type":"create_company","id":"c1","name":"Acme","#,
            r#""issue_prefix":"ACM"},"idempotencyKey":"k","requestId":"r1"}}}"#
        );
        let entry: Entry<TypeConfig> = serde_json::from_str(ROW).expect("an old row reads");
        let EntryPayload::Normal(envelope) = &entry.payload else {
            panic!("a normal entry, got {:?}", entry.payload)
        };
        assert_eq!(envelope.at, Timestamp(1_763_769_600_123));
        assert_eq!(envelope.idempotency_key.as_deref(), Some("k"));
        assert_eq!(serde_json::to_string(&entry).expect("encode"), ROW);
    }
}
