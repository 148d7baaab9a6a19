//! The openraft type configuration shared by the store and the Raft wiring.

use std::fmt;
use std::io::Cursor;

use roost_core::{DomainError, Envelope, Outcome};
use serde::{Deserialize, Serialize};

/// How to reach a node: its gRPC address (clients, workers and Raft traffic) and its HTTP one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub grpc_addr: String,
    pub http_addr: String,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "grpc={} http={}", self.grpc_addr, self.http_addr)
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
