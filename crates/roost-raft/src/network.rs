//! Raft traffic between nodes over tonic, one cached channel per peer. openraft's messages
//! travel JSON-encoded inside `RaftPayload`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::RaftPayload;
use roost_store::{NodeInfo, TypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

type NodeId = u64;

/// Creates per-peer clients, reusing one channel per peer address.
#[derive(Clone, Default)]
pub struct GrpcNetworkFactory {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

impl GrpcNetworkFactory {
    fn channel(&self, addr: &str) -> Result<Channel, String> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ch) = channels.get(addr) {
            return Ok(ch.clone());
        }
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("bad peer address {addr}: {e}"))?
            .tcp_nodelay(true)
            .connect_timeout(std::time::Duration::from_secs(1));
        let ch = endpoint.connect_lazy();
        channels.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }
}

pub struct GrpcNetwork {
    target: NodeId,
    client: Result<RaftClient<Channel>, String>,
}

impl RaftNetworkFactory<TypeConfig> for GrpcNetworkFactory {
    type Network = GrpcNetwork;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> GrpcNetwork {
        let client = self.channel(&node.grpc_addr).map(|ch| {
            RaftClient::new(ch).max_decoding_message_size(usize::MAX).max_encoding_message_size(usize::MAX)
        });
        GrpcNetwork { target, client }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Transport(String);

impl GrpcNetwork {
    async fn call<Req, Resp, E>(
        &mut self,
        rpc: &'static str,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, NodeInfo, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let client = match &mut self.client {
            Ok(c) => c,
            Err(e) => return Err(RPCError::Unreachable(Unreachable::new(&Transport(e.clone())))),
        };
        let json = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let mut request = tonic::Request::new(RaftPayload { json });
        request.set_timeout(option.hard_ttl());
        let reply = match rpc {
            "append_entries" => client.append_entries(request).await,
            "vote" => client.vote(request).await,
            _ => client.install_snapshot(request).await,
        };
        let reply = match reply {
            Ok(r) => r.into_inner(),
            Err(status) if status.code() == tonic::Code::Unavailable => {
                return Err(RPCError::Unreachable(Unreachable::new(&status)))
            }
            Err(status) => return Err(RPCError::Network(NetworkError::new(&status))),
        };
        let result: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&reply.json).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for GrpcNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        self.call("append_entries", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.call("install_snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        self.call("vote", &rpc, &option).await
    }
}
