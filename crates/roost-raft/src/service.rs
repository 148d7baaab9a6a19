//! The receiving side of node-to-node traffic: the `roost.v1.Raft` gRPC service.

use std::pin::Pin;

use futures::Stream;
use openraft::raft::InstallSnapshotRequest;
use openraft::Raft;
use roost_proto::v1::raft_server::{Raft as RaftRpc, RaftServer};
use roost_proto::v1::RaftPayload;
use roost_store::TypeConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use crate::bounds;
use crate::network::MAX_MESSAGE_BYTES;
use crate::node::{ForwardRequest, RaftNode, RemoteFailure};

pub struct RaftService {
    node: RaftNode,
    /// Becomes true when the server stops: open AppendEntries streams then end, or a graceful
    /// shutdown would wait for the leader to close them.
    stop: watch::Receiver<bool>,
}

impl RaftService {
    pub fn new(node: RaftNode, stop: watch::Receiver<bool>) -> Self {
        RaftService { node, stop }
    }

    /// The tonic service, its messages capped at `network::MAX_MESSAGE_BYTES` both ways.
    pub fn server(node: RaftNode, stop: watch::Receiver<bool>) -> RaftServer<RaftService> {
        RaftServer::new(RaftService::new(node, stop))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

fn decode<T: DeserializeOwned>(payload: &RaftPayload) -> Result<T, Status> {
    serde_json::from_slice(&payload.json)
        .map_err(|e| Status::invalid_argument(format!("undecodable raft message: {e}")))
}

/// A decoded request whose terms and indexes openraft can do arithmetic on (`bounds.rs`).
fn bounded<T>(request: T, check: fn(&T) -> Result<(), bounds::OutOfBounds>) -> Result<T, Status> {
    check(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok(request)
}

/// Decodes `payload` as each message nodes exchange, as they decode them: the requests this
/// service answers (`decode`), and the replies `network.rs` and `node.rs` read. Says how many
/// kinds it decoded as. For the fuzz targets (crates/roost-fuzz); not an API.
#[doc(hidden)]
pub fn decode_any(payload: &RaftPayload) -> usize {
    use openraft::error::{InstallSnapshotError, RaftError};
    use openraft::raft::{
        AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotResponse, VoteRequest,
        VoteResponse,
    };
    fn reply<T: DeserializeOwned>(payload: &RaftPayload) -> bool {
        serde_json::from_slice::<T>(&payload.json).is_ok()
    }
    [
        decode::<AppendEntriesRequest<TypeConfig>>(payload).is_ok(),
        decode::<VoteRequest<u64>>(payload).is_ok(),
        decode::<InstallSnapshotRequest<TypeConfig>>(payload).is_ok(),
        decode::<ForwardRequest>(payload).is_ok(),
        reply::<Result<AppendEntriesResponse<u64>, RaftError<u64>>>(payload),
        reply::<Result<VoteResponse<u64>, RaftError<u64>>>(payload),
        reply::<Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>>(
            payload,
        ),
        reply::<Result<crate::node::ForwardReply, RemoteFailure>>(payload),
        reply::<Result<u64, RemoteFailure>>(payload),
    ]
    .into_iter()
    .filter(|decoded| *decoded)
    .count()
}

fn encode<T: Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    encode_payload(value, 0).map(Response::new)
}

/// A reply: `value` as JSON, carrying the number `seq` of the request it answers.
fn encode_payload<T: Serialize>(value: &T, seq: u64) -> Result<RaftPayload, Status> {
    serde_json::to_vec(value)
        .map(|json| RaftPayload {
            json,
            data: Vec::new(),
            seq,
        })
        .map_err(|e| Status::internal(format!("unencodable raft reply: {e}")))
}

/// The replies of an AppendEntries stream.
pub type AppendReplies = Pin<Box<dyn Stream<Item = Result<RaftPayload, Status>> + Send>>;

/// Answers each AppendEntries on `incoming` in order, one at a time, as the unary call does;
/// ends when the leader closes its side, after the first error (the leader then opens a new
/// stream), or when the server stops.
fn append_replies(
    incoming: Streaming<RaftPayload>,
    raft: Raft<TypeConfig>,
    stop: watch::Receiver<bool>,
) -> AppendReplies {
    Box::pin(futures::stream::unfold(
        Some((incoming, raft, stop)),
        |state| async move {
            let (mut incoming, raft, mut stop) = state?;
            let next = tokio::select! {
                next = incoming.message() => next,
                _ = stop.wait_for(|stopped| *stopped) => return None,
            };
            let reply = match next {
                Ok(Some(payload)) => match decode(&payload)
                    .and_then(|request| bounded(request, bounds::check_append))
                {
                    Ok(request) => encode_payload(&raft.append_entries(request).await, payload.seq),
                    Err(status) => Err(status),
                },
                Ok(None) => return None,
                Err(status) => Err(status),
            };
            let next = reply.is_ok().then_some((incoming, raft, stop));
            Some((reply, next))
        },
    ))
}

#[tonic::async_trait]
impl RaftRpc for RaftService {
    async fn append_entries(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let request = bounded(decode(req.get_ref())?, bounds::check_append)?;
        let result = self.node.raft.append_entries(request).await;
        encode(&result)
    }

    type AppendEntriesStreamStream = AppendReplies;

    async fn append_entries_stream(
        &self,
        req: Request<Streaming<RaftPayload>>,
    ) -> Result<Response<AppendReplies>, Status> {
        Ok(Response::new(append_replies(
            req.into_inner(),
            self.node.raft.clone(),
            self.stop.clone(),
        )))
    }

    async fn vote(&self, req: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let request = bounded(decode(req.get_ref())?, bounds::check_vote)?;
        if let Some(candidate) = request.vote.leader_id().voted_for() {
            self.node.network.peers.asked(candidate);
        }
        let result = self.node.raft.vote(request).await;
        encode(&result)
    }

    async fn install_snapshot(
        &self,
        req: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let payload = req.into_inner();
        let mut rpc = bounded(decode(&payload)?, bounds::check_snapshot)?;
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
