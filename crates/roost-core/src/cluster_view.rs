//! The cluster as `cluster status` and `cluster node` show it: written by the nodes (roost-raft
//! fills them from openraft's metrics), read by the client and the CLI, one definition for both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::entity::string_enum;

string_enum!(
    /// A node's part in Raft, from openraft's server state.
    NodeRole {
        Leader => "leader",
        Follower => "follower",
        Candidate => "candidate",
        Learner => "learner",
        Shutdown => "shutdown",
    }
);

string_enum!(
    /// A member as the leader sees it: itself, or a follower that answers and keeps up, falls
    /// behind, or does not answer.
    MemberHealth {
        Leader => "leader",
        Healthy => "healthy",
        Lagging => "lagging",
        Unreachable => "unreachable",
    }
);

/// A member of the cluster as recorded in the committed membership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberInfo {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    /// Where the other nodes reach its Raft service (its `peer_listen`).
    #[serde(default)]
    pub peer_addr: String,
    /// A voter counts toward quorum; a learner only replicates (every member of a new cluster is
    /// a voter).
    #[serde(default = "voter")]
    pub voter: bool,
}

fn voter() -> bool {
    true
}

/// A member as the leader sees it, with its own report when it answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    pub member: MemberInfo,
    pub matched_index: u64,
    pub lag: u64,
    pub health: MemberHealth,
    pub report: Option<NodeReport>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub leader_id: Option<u64>,
    pub term: u64,
    pub last_log_index: u64,
    pub members: Vec<MemberStatus>,
}

/// What a node knows about itself and, when it leads, about replication.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    #[serde(default)]
    pub peer_addr: String,
    pub role: NodeRole,
    pub term: u64,
    pub leader_id: Option<u64>,
    pub last_log_index: u64,
    pub applied_index: u64,
    pub state_hash: String,
    pub state_index: u64,
    pub snapshot_index: Option<u64>,
    pub purged_index: u64,
    #[serde(default)]
    pub members: Vec<MemberInfo>,
    /// On the leader: the last log index each member is known to hold.
    #[serde(default)]
    pub matched: BTreeMap<u64, u64>,
}
