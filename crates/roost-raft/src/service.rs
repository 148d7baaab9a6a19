//! The receiving side of node-to-node traffic: the `roost.v1.Raft` gRPC service.

use openraft::raft::InstallSnapshotRequest;
use roost_proto::v1::raft_server::Raft as RaftRpc;
use roost_proto::v1::RaftPayload;
use roost_store::TypeConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status};

use crate::node::{ForwardRequest, RaftNode, RemoteFailure};

pub struct RaftService {
    node: RaftNode,
}

impl RaftService {
    pub fn new(node: RaftNode) -> Self {
        RaftService { node }
    }
}

fn decode<T: DeserializeOwned>(payload: &RaftPayload) -> Result<T, Status> {
    serde_json::from_slice(&payload.json)
        .map_err(|e| Status::invalid_argument(format!("undecodable raft message: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    serde_json::to_vec(value)
        .map(|json| {
            Response::new(RaftPayload {
                json,
                data: Vec::new(),
            })
        })
        .map_err(|e| Status::internal(format!("unencodable raft reply: {e}")))
}

#[tonic::async_trait]
impl RaftRpc for RaftService {
    async fn append_entries(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let result = self.node.raft.append_entries(decode(req.get_ref())?).await;
        encode(&result)
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let result = self.node.raft.vote(decode(req.get_ref())?).await;
        encode(&result)
    }

    async fn install_snapshot(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let payload = req.into_inner();
        let mut rpc: InstallSnapshotRequest<TypeConfig> = decode(&payload)?;
        rpc.data = payload.data;
        let result = self.node.raft.install_snapshot(rpc).await;
        encode(&result)
    }

    async fn forward(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let request: ForwardRequest = decode(req.get_ref())?;
        let result = self
            .node
            .serve_forwarded(request)
            .await
            .map_err(RemoteFailure::from);
        encode(&result)
    }

    async fn read_index(
        &self,
        _req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let result = self
            .node
            .read_index_local()
            .await
            .map_err(RemoteFailure::from);
        encode(&result)
    }
}
