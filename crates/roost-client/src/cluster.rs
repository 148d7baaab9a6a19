//! Cluster administration routes (`/api/cluster/*`) and their answers.

use reqwest::Method;
use serde::Serialize;

use crate::{Result, RoostClient, API};

/// The cluster's shapes, as the nodes write them (`roost_core::cluster_view`); a member to add
/// or to form a cluster with is a `Member`.
pub use roost_core::cluster_view::{ClusterStatus, MemberInfo as Member, MemberStatus, NodeReport};

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
