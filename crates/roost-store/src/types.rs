//! The openraft type configuration shared by the store and the Raft wiring.

use std::fmt;
use std::io::Cursor;

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

openraft::declare_raft_types!(
    /// Roost's Raft types: log entries carry command envelopes.
    pub TypeConfig:
        D = Envelope,
        R = ApplyResult,
        NodeId = u64,
        Node = NodeInfo,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);
