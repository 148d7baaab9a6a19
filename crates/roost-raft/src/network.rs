//! Traffic between nodes over tonic, one cached channel per peer: openraft's RPCs, and the
//! forwarding of client writes and read-index requests to the leader. openraft's messages travel
//! JSON-encoded inside `RaftPayload`; snapshot bytes travel beside the JSON. AppendEntries go
//! over one long-lived stream per replication (`append_stream.rs`), unary calls for the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::RaftPayload;
use roost_store::{NodeInfo, TypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::append_stream::{self, AppendStream, StreamFailure};
use crate::faults::NetworkFaults;
use crate::replication_watch::PeerClock;

type NodeId = u64;

/// The largest `roost.v1.Raft` message a node sends or accepts (both sides, `service.rs` too).
/// It must hold an AppendEntries of `config::MAX_ENTRIES_PER_APPEND` entries of up to
/// `proposer::MAX_BATCH` writes each (about 1 MB of JSON for 8 × 256 ordinary writes; a write
/// is at most `max_body_bytes`, 1 MiB, of JSON) and an InstallSnapshot chunk (openraft's
/// `snapshot_max_chunk_size`, 3 MiB by default). Without a cap a peer's 300 MB message was
/// buffered whole; an oversize one is now refused (tonic answers OUT_OF_RANGE)
/// from its length prefix, before it is read.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// What openraft's `RaftNetwork` methods return.
type RpcResult<T, E> = Result<T, RPCError<NodeId, NodeInfo, RaftError<NodeId, E>>>;

/// How long the leader waits before it tries again a peer it could not reach (openraft's
/// replication backoff). A restarted node holds off its elections for longer than two of these
/// (`node.rs`, `quiet_start`), so the leader reaches it before it could stand.
pub(crate) const UNREACHABLE_RETRY: Duration = Duration::from_millis(500);

/// How long after an exchange with a peer went unanswered, with no answer since, the next
/// exchange dials a new connection. A connection whose packets were dropped for a while (a partition
/// that healed) waits on TCP's retransmission timer, which doubles with each loss, for seconds
/// after the link is back, and HTTP/2's keepalive gives it up only after 10 s; a new
/// connection works at once (regression test `network_tests.rs`).
pub(crate) const REDIAL_AFTER: Duration = Duration::from_secs(1);

/// A cached channel, and since when its exchanges have gone unanswered.
struct Cached {
    channel: Channel,
    /// When an exchange first ended without an answer, with no answer since; `None` once one
    /// is answered.
    unanswered_since: Option<Instant>,
}

/// Creates per-peer clients, reusing one channel per peer address.
#[derive(Clone, Default)]
pub struct GrpcNetworkFactory {
    channels: Arc<Mutex<HashMap<String, Cached>>>,
    #[cfg_attr(not(feature = "test-util"), allow(dead_code))]
    faults: NetworkFaults,
    /// With the cluster's TLS on: the cluster CA and this node's certificate (`https://` peers).
    tls: Option<ClientTlsConfig>,
    /// When each member last answered this node or asked it for a vote
    /// (`replication_watch.rs`).
    pub(crate) peers: Arc<PeerClock>,
}

/// Why a message could not be exchanged with a peer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("peer {target} unreachable: {message}")]
    Unreachable { target: NodeId, message: String },
    #[error("rpc to peer {target} failed: {message}")]
    Failed { target: NodeId, message: String },
}

impl GrpcNetworkFactory {
    pub fn new(faults: NetworkFaults) -> Self {
        GrpcNetworkFactory {
            channels: Arc::default(),
            faults,
            tls: None,
            peers: Arc::default(),
        }
    }

    /// As [`GrpcNetworkFactory::new`], reaching peers over TLS with `tls`.
    pub fn with_tls(faults: NetworkFaults, tls: Option<ClientTlsConfig>) -> Self {
        GrpcNetworkFactory {
            tls,
            ..Self::new(faults)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached channel to a peer's gRPC address (TLS when the cluster has it on), or a new
    /// one when an exchange on it has gone unanswered for [`REDIAL_AFTER`] with no answer
    /// since.
    pub(crate) fn channel(&self, addr: &str) -> Result<Channel, String> {
        let now = Instant::now();
        let mut channels = self.lock();
        if let Some(cached) = channels.get(addr) {
            match cached.unanswered_since {
                Some(since) if now.saturating_duration_since(since) >= REDIAL_AFTER => {
                    tracing::debug!(
                        peer = addr,
                        "no answer on this connection for {REDIAL_AFTER:?}: dialing a new one"
                    );
                }
                _ => return Ok(cached.channel.clone()),
            }
        }
        let channel = self.dial(addr)?;
        channels.insert(
            addr.to_string(),
            Cached {
                channel: channel.clone(),
                unanswered_since: None,
            },
        );
        Ok(channel)
    }

    /// The peer at `addr` answered an exchange (with a result or an error of its own): its
    /// connection works. An answer to AppendEntries or InstallSnapshot also shows that node
    /// `target` hears this node's replication (`replication_watch.rs`); other requests (a
    /// forwarded status report, a vote) would not show that.
    fn answered(&self, target: NodeId, addr: &str, replication: bool) {
        if let Some(cached) = self.lock().get_mut(addr) {
            cached.unanswered_since = None;
        }
        if replication {
            self.peers.answered(target);
        }
    }

    /// An exchange with the peer at `addr` ended without its answer (failed, timed out, or
    /// dropped by openraft's own timeout): the connection is suspect from now, if it was not.
    fn unanswered(&self, addr: &str) {
        if let Some(cached) = self.lock().get_mut(addr) {
            cached.unanswered_since.get_or_insert_with(Instant::now);
        }
    }

    /// A new lazy channel to `addr`: nothing is dialled before its first call.
    pub(crate) fn dial(&self, addr: &str) -> Result<Channel, String> {
        self.endpoint(addr).map(|e| e.connect_lazy())
    }

    /// How this node reaches `addr`: TLS when the cluster has it on, short dials, pings.
    pub(crate) fn endpoint(&self, addr: &str) -> Result<Endpoint, String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| format!("bad peer address {addr}: {e}"))?;
        if let Some(tls) = &self.tls {
            endpoint = endpoint
                .tls_config(tls.clone())
                .map_err(|e| format!("TLS for peer {addr}: {e}"))?;
        }
        Ok(endpoint
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(1))
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(5)))
    }

    fn client(&self, addr: &str) -> Result<RaftClient<Channel>, String> {
        self.channel(addr).map(|ch| {
            RaftClient::new(ch)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES)
        })
    }

    /// Fails if the link to `target` is blocked, and waits the injected delay.
    #[cfg(feature = "test-util")]
    async fn injected_faults(&self, target: NodeId) -> Result<(), PeerError> {
        if self.faults.is_blocked(target) {
            return Err(PeerError::Unreachable {
                target,
                message: "link blocked".into(),
            });
        }
        let delay = self.faults.delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    /// Without `test-util` no fault can be injected.
    #[cfg(not(feature = "test-util"))]
    async fn injected_faults(&self, _target: NodeId) -> Result<(), PeerError> {
        Ok(())
    }

    /// Sends one AppendEntries payload to `target` on `stream` (opened if there is none),
    /// honouring injected faults and `timeout`. `Ok(None)`: the peer serves no stream.
    pub(crate) async fn exchange_streamed(
        &self,
        target: NodeId,
        addr: &str,
        stream: &mut Option<AppendStream>,
        payload: RaftPayload,
        timeout: Duration,
    ) -> Result<Option<RaftPayload>, PeerError> {
        self.injected_faults(target).await?;
        let mut pending = Pending::new(self, addr);
        match append_stream::exchange(stream, || self.client(addr), payload, timeout).await {
            Ok(reply) => {
                pending.answered(target, true);
                Ok(Some(reply))
            }
            Err(StreamFailure::Unimplemented) => {
                pending.answered(target, true);
                Ok(None)
            }
            Err(StreamFailure::Unreachable(message)) => {
                Err(PeerError::Unreachable { target, message })
            }
            Err(StreamFailure::Failed(message)) => Err(PeerError::Failed { target, message }),
        }
    }

    /// Sends one payload to `target` at `addr`, honouring injected faults and `timeout`.
    pub(crate) async fn exchange(
        &self,
        target: NodeId,
        addr: &str,
        rpc: Rpc,
        payload: RaftPayload,
        timeout: Duration,
    ) -> Result<RaftPayload, PeerError> {
        self.injected_faults(target).await?;
        let mut pending = Pending::new(self, addr);
        let mut client = self
            .client(addr)
            .map_err(|message| PeerError::Unreachable { target, message })?;
        let mut request = tonic::Request::new(payload);
        request.set_timeout(timeout);
        let reply = match rpc {
            Rpc::AppendEntries => client.append_entries(request).await,
            Rpc::Vote => client.vote(request).await,
            Rpc::InstallSnapshot => client.install_snapshot(request).await,
            Rpc::Forward => client.forward(request).await,
            Rpc::ReadIndex => client.read_index(request).await,
        };
        let replication = matches!(rpc, Rpc::AppendEntries | Rpc::InstallSnapshot);
        match reply {
            Ok(r) => {
                pending.answered(target, replication);
                Ok(r.into_inner())
            }
            Err(status) if answered_with(&status) => {
                pending.answered(target, replication);
                Err(PeerError::Failed {
                    target,
                    message: status.to_string(),
                })
            }
            Err(status) if status.code() == tonic::Code::Unavailable => {
                Err(PeerError::Unreachable {
                    target,
                    message: status.message().to_string(),
                })
            }
            Err(status) => Err(PeerError::Failed {
                target,
                message: status.to_string(),
            }),
        }
    }
}

/// An exchange under way with the peer at an address: unless it is answered, its end (or
/// its drop by openraft's own timeout, before any code of ours sees it) marks the connection
/// as unanswered ([`GrpcNetworkFactory::unanswered`]).
struct Pending<'a> {
    network: &'a GrpcNetworkFactory,
    addr: &'a str,
    answered: bool,
}

impl<'a> Pending<'a> {
    fn new(network: &'a GrpcNetworkFactory, addr: &'a str) -> Self {
        Pending {
            network,
            addr,
            answered: false,
        }
    }

    fn answered(&mut self, target: NodeId, replication: bool) {
        self.answered = true;
        self.network.answered(target, self.addr, replication);
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.network.unanswered(self.addr);
        }
    }
}

/// Whether a failed call's status came from the peer itself (an answer), rather than from the
/// transport or a deadline.
fn answered_with(status: &tonic::Status) -> bool {
    !matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::Cancelled
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unknown
    )
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Rpc {
    AppendEntries,
    Vote,
    InstallSnapshot,
    Forward,
    ReadIndex,
}

pub struct GrpcNetwork {
    target: NodeId,
    addr: String,
    factory: GrpcNetworkFactory,
    /// The open AppendEntries stream to the target, if any.
    appends: Option<AppendStream>,
    /// The target serves no AppendEntries stream (an older version): unary calls only.
    unary_appends: bool,
}

impl RaftNetworkFactory<TypeConfig> for GrpcNetworkFactory {
    type Network = GrpcNetwork;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> GrpcNetwork {
        GrpcNetwork {
            target,
            addr: node.peer().to_string(),
            factory: self.clone(),
            appends: None,
            unary_appends: false,
        }
    }
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(value)
}

impl GrpcNetwork {
    async fn call<Req, Resp, E>(
        &mut self,
        rpc: Rpc,
        req: &Req,
        data: Vec<u8>,
        option: &RPCOption,
    ) -> RpcResult<(Resp, Vec<u8>), E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload = request_payload(req, data)?;
        let reply = self
            .factory
            .exchange(self.target, &self.addr, rpc, payload, option.hard_ttl())
            .await
            .map_err(rpc_error)?;
        self.reply(reply)
    }

    /// AppendEntries on the stream to the target; `Ok(None)` if the target serves none.
    async fn append_streamed(
        &mut self,
        req: &AppendEntriesRequest<TypeConfig>,
        option: &RPCOption,
    ) -> RpcResult<Option<AppendEntriesResponse<NodeId>>, openraft::error::Infallible> {
        let payload = request_payload(req, Vec::new())?;
        let reply = self
            .factory
            .exchange_streamed(
                self.target,
                &self.addr,
                &mut self.appends,
                payload,
                option.hard_ttl(),
            )
            .await
            .map_err(rpc_error)?;
        match reply {
            Some(reply) => self.reply(reply).map(|(r, _)| Some(r)),
            None => Ok(None),
        }
    }

    /// AppendEntries on the stream, or unary to a peer that serves no stream.
    async fn send_append(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        if !self.unary_appends {
            if let Some(reply) = self.append_streamed(&rpc, &option).await? {
                return Ok(reply);
            }
            tracing::warn!(
                target_node = self.target,
                "peer serves no AppendEntriesStream; using unary AppendEntries"
            );
            self.unary_appends = true;
        }
        self.call(Rpc::AppendEntries, &rpc, Vec::new(), &option)
            .await
            .map(|(r, _)| r)
    }

    /// A peer's reply: openraft's result in the JSON, and the bytes beside it.
    #[allow(clippy::result_large_err)] // openraft's error type, as its RaftNetwork returns it
    fn reply<Resp, E>(&self, reply: RaftPayload) -> RpcResult<(Resp, Vec<u8>), E>
    where
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let result: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&reply.json)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result
            .map(|r| (r, reply.data))
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// A request: `req` as JSON, `data` beside it (the stream numbers it when it sends it).
#[allow(clippy::result_large_err)] // openraft's error type, as its RaftNetwork returns it
fn request_payload<Req: Serialize, E: std::error::Error>(
    req: &Req,
    data: Vec<u8>,
) -> Result<RaftPayload, RPCError<NodeId, NodeInfo, E>> {
    let json = encode(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
    Ok(RaftPayload { json, data, seq: 0 })
}

fn rpc_error<E: std::error::Error>(e: PeerError) -> RPCError<NodeId, NodeInfo, E> {
    match e {
        PeerError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&e)),
        PeerError::Failed { .. } => RPCError::Network(NetworkError::new(&e)),
    }
}

impl RaftNetwork<TypeConfig> for GrpcNetwork {
    /// A peer the leader could not reach is tried again after [`UNREACHABLE_RETRY`]
    /// (openraft's default, written out because `node.rs`'s quiet start depends on it).
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(UNREACHABLE_RETRY))
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        self.send_append(rpc, option).await
    }

    async fn install_snapshot(
        &mut self,
        mut rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, NodeInfo, RaftError<NodeId, InstallSnapshotError>>,
    > {
        // JSON would spell every byte of the chunk as a number; send the bytes as bytes.
        let data = std::mem::take(&mut rpc.data);
        self.call(Rpc::InstallSnapshot, &rpc, data, &option)
            .await
            .map(|(r, _)| r)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        self.call(Rpc::Vote, &rpc, Vec::new(), &option)
            .await
            .map(|(r, _)| r)
    }
}
