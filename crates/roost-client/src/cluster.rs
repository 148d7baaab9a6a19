//! Cluster administration routes (`/api/cluster/*`) and their answers.

use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::{Result, RoostClient, API};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    #[serde(default)]
    pub peer_addr: String,
    #[serde(default)]
    pub voter: bool,
}

/// One node's report on itself.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    #[serde(default)]
    pub peer_addr: String,
    pub role: String,
    pub term: u64,
    pub leader_id: Option<u64>,
    pub last_log_index: u64,
    pub applied_index: u64,
    pub state_hash: String,
    pub state_index: u64,
    pub snapshot_index: Option<u64>,
    pub purged_index: u64,
    #[serde(default)]
    pub members: Vec<Member>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    pub member: Member,
    pub matched_index: u64,
    pub lag: u64,
    pub health: String,
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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AddNode<'a> {
    id: u64,
    grpc_addr: &'a str,
    http_addr: &'a str,
    peer_addr: &'a str,
    learner_only: bool,
}

#[derive(Serialize)]
struct Init<'a> {
    members: &'a [Member],
}

impl RoostClient {
    /// The cluster as its leader sees it (administrators only).
    pub async fn cluster_status(&self) -> Result<ClusterStatus> {
        self.get(&[API, "cluster", "status"], &[]).await
    }

    /// The answering node's report on itself.
    pub async fn node_report(&self) -> Result<NodeReport> {
        self.get(&[API, "cluster", "node"], &[]).await
    }

    pub async fn init_cluster(&self, members: &[Member]) -> Result<ClusterStatus> {
        self.post(&[API, "cluster", "init"], &Init { members })
            .await
    }

    /// Adds a node as a learner, waits for it to catch up, then makes it a voter.
    pub async fn add_node(&self, member: &Member, learner_only: bool) -> Result<ClusterStatus> {
        let body = AddNode {
            id: member.id,
            grpc_addr: &member.grpc_addr,
            http_addr: &member.http_addr,
            peer_addr: &member.peer_addr,
            learner_only,
        };
        self.post(&[API, "cluster", "nodes"], &body).await
    }

    pub async fn remove_node(&self, id: u64) -> Result<ClusterStatus> {
        self.send(
            Method::DELETE,
            &[API, "cluster", "nodes", &id.to_string()],
            &[],
            None::<&()>,
        )
        .await
    }
}
