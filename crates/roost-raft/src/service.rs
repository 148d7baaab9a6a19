//! The receiving side of Raft traffic: the `roost.v1.Raft` gRPC service.

use openraft::Raft;
use roost_proto::v1::raft_server::Raft as RaftRpc;
use roost_proto::v1::RaftPayload;
use roost_store::TypeConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status};

pub struct RaftService {
    raft: Raft<TypeConfig>,
}

impl RaftService {
    pub fn new(raft: Raft<TypeConfig>) -> Self {
        RaftService { raft }
    }
}

fn decode<T: DeserializeOwned>(req: Request<RaftPayload>) -> Result<T, Status> {
    serde_json::from_slice(&req.into_inner().json)
        .map_err(|e| Status::invalid_argument(format!("undecodable raft message: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    serde_json::to_vec(value)
        .map(|json| Response::new(RaftPayload { json }))
        .map_err(|e| Status::internal(format!("unencodable raft reply: {e}")))
}

#[tonic::async_trait]
impl RaftRpc for RaftService {
    async fn append_entries(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let result = self.raft.append_entries(decode(req)?).await;
        encode(&result)
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let result = self.raft.vote(decode(req)?).await;
        encode(&result)
    }

    async fn install_snapshot(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let result = self.raft.install_snapshot(decode(req)?).await;
        encode(&result)
    }
}
