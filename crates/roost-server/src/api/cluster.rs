//! Cluster administration: status, formation and membership changes (administrators only).

use std::collections::BTreeMap;

use roost_raft::{ClusterStatus, NodeInfo, NodeReport};

use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// A node to add or form a cluster with.
#[derive(Clone, Debug)]
pub struct NewMember {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    pub peer_addr: String,
}

fn validate(member: &NewMember) -> Result<NodeInfo, ApiError> {
    if member.id == 0 {
        return Err(ApiError::bad_request("node ids start at 1"));
    }
    for (field, addr) in [
        ("grpcAddr", &member.grpc_addr),
        ("httpAddr", &member.http_addr),
        ("peerAddr", &member.peer_addr),
    ] {
        let ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(ApiError::bad_request(format!(
                "{field} must be host:port, not `{addr}`"
            )));
        }
    }
    Ok(NodeInfo {
        grpc_addr: member.grpc_addr.clone(),
        http_addr: member.http_addr.clone(),
        peer_addr: member.peer_addr.clone(),
    })
}

impl Api {
    pub async fn cluster_status(&self, caller: &Caller) -> Result<ClusterStatus, ApiError> {
        caller.require_admin()?;
        Ok(self.node().cluster_status().await?)
    }

    /// This node's own report; any authenticated caller may ask (health checks).
    pub fn node_report(&self, _caller: &Caller) -> NodeReport {
        self.node().report()
    }

    pub async fn init_cluster(
        &self,
        caller: &Caller,
        members: &[NewMember],
    ) -> Result<ClusterStatus, ApiError> {
        caller.require_admin()?;
        if members.is_empty() {
            return Err(ApiError::bad_request("name at least one member"));
        }
        let mut nodes = BTreeMap::new();
        for m in members {
            if nodes.insert(m.id, validate(m)?).is_some() {
                return Err(ApiError::bad_request(format!(
                    "node {} is named twice",
                    m.id
                )));
            }
        }
        let _formed = self.node().init_cluster(nodes).await?;
        self.cluster_status(caller).await
    }

    pub async fn add_node(
        &self,
        caller: &Caller,
        member: &NewMember,
        voter: bool,
    ) -> Result<ClusterStatus, ApiError> {
        caller.require_admin()?;
        let info = validate(member)?;
        self.node().add_node(member.id, info, voter).await?;
        self.cluster_status(caller).await
    }

    pub async fn remove_node(&self, caller: &Caller, id: u64) -> Result<ClusterStatus, ApiError> {
        caller.require_admin()?;
        self.node().remove_node(id).await?;
        self.cluster_status(caller).await
    }
}
