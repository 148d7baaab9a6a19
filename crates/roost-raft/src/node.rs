//! [`RaftNode`]: one node's Raft instance and its state, behind a cheap `Clone` handle. Any
//! node accepts writes and linearizable reads: a follower forwards them to the leader.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::Raft;
use roost_core::{DomainError, Envelope, Outcome};
use roost_proto::v1::RaftPayload;
use roost_store::{NodeInfo, StateReader, TypeConfig};
use serde::{Deserialize, Serialize};

use crate::config::RaftTiming;
use crate::error::Error;
use crate::faults::NetworkFaults;
use crate::network::{encode, GrpcNetworkFactory, PeerError, Rpc, UNREACHABLE_RETRY};
use crate::proposer::Proposer;
use crate::write_stats::WriteStats;

/// See [`RaftNode::leadership_watch`].
pub type LeadershipWatch =
    tokio::sync::watch::Receiver<openraft::metrics::RaftServerMetrics<u64, NodeInfo>>;

/// The committed result of one write: where it landed in the log and what it produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteOutcome {
    pub index: u64,
    pub result: Result<Outcome, DomainError>,
}

/// What one node asks another to do on its behalf (`roost.v1.Raft/Forward`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)] // one per forwarded request, moved once
pub(crate) enum ForwardRequest {
    /// Propose this envelope (sent to the leader).
    Write(Envelope),
    /// Membership changes (sent to the leader).
    AddNode {
        id: u64,
        info: NodeInfo,
        voter: bool,
    },
    RemoveNode {
        id: u64,
    },
    /// Report on yourself (sent to any member).
    Report,
    /// Stand for election now: the leader is stopping (`handover.rs`).
    Elect,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)] // one per forwarded request, moved once
pub(crate) enum ForwardReply {
    Written(WriteOutcome),
    Done,
    Report(Box<crate::membership::NodeReport>),
}

impl ForwardReply {
    /// The variant's name, for errors: a reply's content may be another tenant's object.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ForwardReply::Written(_) => "written",
            ForwardReply::Done => "done",
            ForwardReply::Report(_) => "report",
        }
    }
}

/// Why a forwarded request failed on the leader, as carried back over the wire.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum RemoteFailure {
    NotLeader {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    Unavailable {
        message: String,
    },
    Fatal {
        message: String,
    },
    Membership {
        message: String,
    },
    /// The leader measured a forwarded write past `MAX_WRITE_BYTES` (the forwarding node
    /// measures it first, so only a node of another version would let one through).
    TooLarge {
        bytes: usize,
    },
}

impl From<Error> for RemoteFailure {
    fn from(e: Error) -> Self {
        match e {
            Error::NotLeader {
                leader_id,
                leader_addr,
            } => RemoteFailure::NotLeader {
                leader_id,
                leader_addr,
            },
            Error::Unavailable { message } => RemoteFailure::Unavailable { message },
            Error::Membership { message } => RemoteFailure::Membership { message },
            Error::TooLarge { bytes } => RemoteFailure::TooLarge { bytes },
            other => RemoteFailure::Fatal {
                message: other.to_string(),
            },
        }
    }
}

impl From<RemoteFailure> for Error {
    fn from(f: RemoteFailure) -> Self {
        match f {
            RemoteFailure::NotLeader {
                leader_id,
                leader_addr,
            } => Error::NotLeader {
                leader_id,
                leader_addr,
            },
            RemoteFailure::Unavailable { message } => Error::Unavailable { message },
            RemoteFailure::Fatal { message } => Error::Fatal { message },
            RemoteFailure::Membership { message } => Error::Membership { message },
            RemoteFailure::TooLarge { bytes } => Error::TooLarge { bytes },
        }
    }
}

#[derive(Clone)]
pub struct RaftNode {
    pub(crate) id: u64,
    pub(crate) info: NodeInfo,
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) reader: StateReader,
    pub(crate) network: GrpcNetworkFactory,
    #[cfg_attr(not(feature = "test-util"), allow(dead_code))]
    pub(crate) faults: NetworkFaults,
    /// Membership changes go one at a time (parallel changes can leave a joint config).
    pub(crate) membership_lock: Arc<tokio::sync::Mutex<()>>,
    pub(crate) timing: RaftTiming,
    pub(crate) proposer: Proposer,
    write_stats: WriteStats,
    /// Set when this node stops: it proposes nothing more (`handover.rs`).
    pub(crate) stepping_down: Arc<std::sync::atomic::AtomicBool>,
    /// Set while this leader hands over because its replication to a member stopped
    /// (`replication_watch.rs`): it proposes nothing until that is done.
    pub(crate) paused: Arc<std::sync::atomic::AtomicBool>,
}

fn leader_unknown() -> Error {
    Error::Unavailable {
        message: "no leader is known yet".into(),
    }
}

impl RaftNode {
    /// Opens the data directory and starts Raft on it. State applied before a restart is
    /// already in `state.db`; openraft replays any committed entries after it.
    pub async fn start(
        id: u64,
        info: NodeInfo,
        data_dir: &Path,
        timing: &RaftTiming,
    ) -> Result<RaftNode, Error> {
        Self::start_with_peer_tls(id, info, data_dir, timing, NetworkFaults::default(), None).await
    }

    /// As [`RaftNode::start`], with a fault handle the test harness can flip.
    #[cfg(feature = "test-util")]
    pub async fn start_with_faults(
        id: u64,
        info: NodeInfo,
        data_dir: &Path,
        timing: &RaftTiming,
        faults: NetworkFaults,
    ) -> Result<RaftNode, Error> {
        Self::start_with_peer_tls(id, info, data_dir, timing, faults, None).await
    }

    /// As [`RaftNode::start`], reaching peers over TLS with `peer_tls` (the cluster CA and this
    /// node's certificate) when the cluster has TLS on; `faults` can be flipped only with the
    /// `test-util` feature (a default one otherwise).
    pub async fn start_with_peer_tls(
        id: u64,
        info: NodeInfo,
        data_dir: &Path,
        timing: &RaftTiming,
        faults: NetworkFaults,
        peer_tls: Option<tonic::transport::ClientTlsConfig>,
    ) -> Result<RaftNode, Error> {
        let (log, sm, reader) = roost_store::open(data_dir, id).await?;
        let config = Arc::new(timing.to_openraft("roost")?);
        let network = GrpcNetworkFactory::with_tls(faults.clone(), peer_tls);
        let raft = Raft::new(id, config, network.clone(), log, sm)
            .await
            .map_err(|e| Error::Fatal {
                message: e.to_string(),
            })?;
        quiet_start(&raft, timing);
        let write_stats = WriteStats::default();
        let proposer = Proposer::spawn(raft.clone(), timing.write_timeout(), write_stats.clone());
        Ok(RaftNode {
            id,
            info,
            proposer,
            write_stats,
            raft,
            reader,
            network,
            faults,
            membership_lock: Arc::default(),
            timing: timing.clone(),
            stepping_down: Arc::default(),
            paused: Arc::default(),
        })
    }

    /// What changes with a leadership or membership change (this node's state, its leader and
    /// vote, the membership), updated only when one of them does. Tasks that wait for such a
    /// change wait on this: openraft's full metrics change several times per write, and each
    /// change wakes every task waiting on them (the binary's main thread was woken six times
    /// per write on the leader, BENCHMARKS.md "Fewer wake-ups per write").
    pub fn leadership_watch(&self) -> LeadershipWatch {
        self.raft.server_metrics()
    }

    /// Waits until some node is leader, as this node sees it.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<u64, Error> {
        let mut metrics = self.leadership_watch();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if let Some(leader) = metrics.borrow().current_leader {
                    return Ok(leader);
                }
                if metrics.changed().await.is_err() {
                    return Err(Error::Fatal {
                        message: "raft stopped".into(),
                    });
                }
            }
        })
        .await;
        match waited {
            Ok(r) => r,
            Err(_) => Err(Error::Unavailable {
                message: format!("no leader after {timeout:?}"),
            }),
        }
    }

    /// Proposes a command and waits until it is committed and applied on this node. On a
    /// follower the command is forwarded to the leader.
    pub async fn write(&self, envelope: Envelope) -> Result<WriteOutcome, Error> {
        match self.write_local(envelope.clone()).await {
            Err(Error::NotLeader {
                leader_id: Some(leader),
                ..
            }) if leader != self.id => {
                let outcome = self.forward_write(leader, &envelope).await?;
                // Read-your-writes on this node: wait until the entry is applied here too.
                self.reader
                    .wait_applied(outcome.index, self.timing.write_timeout())
                    .await;
                Ok(outcome)
            }
            Err(Error::NotLeader { .. }) => Err(leader_unknown()),
            other => other,
        }
    }

    /// Proposes on this node only (through the group-commit queue); fails with `NotLeader`
    /// on a follower.
    pub(crate) async fn write_local(&self, envelope: Envelope) -> Result<WriteOutcome, Error> {
        if self.stepping_down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Unavailable {
                message: "this node is stopping; retry on another".into(),
            });
        }
        if self.paused.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Unavailable {
                message: "this node is handing its leadership over; retry in a moment".into(),
            });
        }
        // Measured once here, for the bound and for the proposer's batches.
        let bytes = crate::proposer::json_len(&envelope);
        if bytes > crate::MAX_WRITE_BYTES {
            return Err(Error::TooLarge { bytes });
        }
        let written = self
            .proposer
            .propose(envelope, bytes, self.timing.write_timeout())
            .await?;
        self.with_first_outcome(written).await
    }

    /// A repeat of a keyed write answers with the first outcome, which only the key's row in
    /// `state.db` keeps (`roost_core::Outcome::Repeated`). Read here, on the node that proposed
    /// it, so neither a forwarding node nor any caller sees the marker.
    async fn with_first_outcome(&self, written: WriteOutcome) -> Result<WriteOutcome, Error> {
        let Ok(Outcome::Repeated { key, at }) = &written.result else {
            return Ok(written);
        };
        let first = self.reader.remembered_outcome(key, *at).await?;
        Ok(WriteOutcome {
            index: written.index,
            result: first.unwrap_or_else(|| {
                Err(DomainError::conflict(
                    "this Idempotency-Key's first write passed the 24 hours it is remembered for \
                     while the retry was answered, so its outcome is gone; look the object up, or \
                     send the request with a new key if it should apply again",
                ))
            }),
        })
    }

    async fn forward_write(&self, leader: u64, envelope: &Envelope) -> Result<WriteOutcome, Error> {
        let timeout = self.timing.write_timeout() + Duration::from_secs(1);
        let request = ForwardRequest::Write(envelope.clone());
        // A leader that dies mid-request would hold the caller until the timeout; once this
        // node sees another leader (or none), answer at once so the client can retry (with its
        // idempotency key) where the cluster is now.
        let reply = tokio::select! {
            reply = self.forward(leader, &request, timeout) => reply?,
            () = self.leader_moved_from(leader) => {
                return Err(Error::Unavailable {
                    message: format!(
                        "leader {leader} lost its leadership while the write was in flight; its \
                         outcome is unknown: retry with the same idempotency key"
                    ),
                })
            }
        };
        match reply {
            ForwardReply::Written(outcome) => Ok(outcome),
            other => Err(Error::Fatal {
                message: format!("unexpected forward reply of kind {}", other.kind()),
            }),
        }
    }

    /// Resolves when this node no longer sees `leader` as the leader.
    async fn leader_moved_from(&self, leader: u64) {
        let mut metrics = self.leadership_watch();
        loop {
            if metrics.borrow().current_leader != Some(leader) {
                return;
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    }

    /// Where member `id`'s Raft service listens, from the membership this node knows.
    fn peer_addr_of(&self, id: u64) -> Result<String, Error> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.peer().to_string())
            .ok_or_else(|| Error::Unavailable {
                message: format!("node {id} is not in the membership this node knows"),
            })
    }

    /// Sends `request` to node `target`'s peer listener and decodes its reply.
    pub(crate) async fn forward(
        &self,
        target: u64,
        request: &ForwardRequest,
        timeout: Duration,
    ) -> Result<ForwardReply, Error> {
        let addr = self.peer_addr_of(target)?;
        let addr = addr.as_str();
        let json = encode(request).map_err(|e| Error::Fatal {
            message: e.to_string(),
        })?;
        let reply = self
            .network
            .exchange(
                target,
                addr,
                Rpc::Forward,
                RaftPayload {
                    json,
                    data: Vec::new(),
                    seq: 0,
                },
                timeout,
            )
            .await
            .map_err(|e| peer_unavailable(target, e))?;
        let result: Result<ForwardReply, RemoteFailure> = serde_json::from_slice(&reply.json)
            .map_err(|e| Error::Fatal {
                message: e.to_string(),
            })?;
        result.map_err(Error::from)
    }

    /// Runs a forwarded request on this node, without forwarding it again.
    pub(crate) async fn serve_forwarded(
        &self,
        request: ForwardRequest,
    ) -> Result<ForwardReply, Error> {
        match request {
            ForwardRequest::Write(envelope) => {
                self.write_local(envelope).await.map(ForwardReply::Written)
            }
            ForwardRequest::AddNode { id, info, voter } => self
                .add_node_local(id, info, voter)
                .await
                .map(|()| ForwardReply::Done),
            ForwardRequest::RemoveNode { id } => self
                .remove_node_local(id)
                .await
                .map(|()| ForwardReply::Done),
            ForwardRequest::Report => Ok(ForwardReply::Report(Box::new(self.report()))),
            ForwardRequest::Elect => self.stand_for_election().await.map(|()| ForwardReply::Done),
        }
    }

    /// Read barrier: returns once this node's state reflects every write acknowledged before
    /// the call. On the leader that is ReadIndex (leadership confirmed by a quorum, then wait
    /// for apply); a follower asks the leader for the index and waits to apply it locally.
    pub async fn linearizable_read(&self) -> Result<(), Error> {
        match self.read_index_local().await {
            Ok(index) => self.wait_applied(index).await,
            Err(Error::NotLeader {
                leader_id: Some(leader),
                ..
            }) if leader != self.id => {
                let addr = self.peer_addr_of(leader)?;
                let asked = self.network.exchange(
                    leader,
                    &addr,
                    Rpc::ReadIndex,
                    RaftPayload::default(),
                    self.timing.write_timeout(),
                );
                let reply = tokio::select! {
                    reply = asked => reply.map_err(|e| peer_unavailable(leader, e))?,
                    () = self.leader_moved_from(leader) => {
                        return Err(Error::Unavailable {
                            message: format!("leader {leader} lost its leadership"),
                        })
                    }
                };
                let result: Result<u64, RemoteFailure> = serde_json::from_slice(&reply.json)
                    .map_err(|e| Error::Fatal {
                        message: e.to_string(),
                    })?;
                self.wait_applied(result.map_err(Error::from)?).await
            }
            Err(Error::NotLeader { .. }) => Err(leader_unknown()),
            Err(e) => Err(e),
        }
    }

    async fn wait_applied(&self, index: u64) -> Result<(), Error> {
        if self
            .reader
            .wait_applied(index, self.timing.write_timeout())
            .await
        {
            Ok(())
        } else {
            Err(Error::Unavailable {
                message: format!("this node has not applied index {index} yet"),
            })
        }
    }

    /// On the leader: the index a linearizable read must wait for.
    pub(crate) async fn read_index_local(&self) -> Result<u64, Error> {
        let timeout = self.timing.write_timeout();
        let deadline = tokio::time::Instant::now() + timeout;
        // Set at the first unconfirmed check: asking again is worth it for one election window
        // (a busy follower answers late); a leader unconfirmed for longer has most likely been
        // replaced, and a quick 503 sends the client to the new one.
        let mut retry_until: Option<tokio::time::Instant> = None;
        loop {
            let confirmed = tokio::time::timeout_at(deadline, self.raft.ensure_linearizable());
            return match confirmed.await {
                Err(_) => Err(Error::Unavailable {
                    message: format!("leadership not confirmed within {timeout:?}"),
                }),
                Ok(Ok(read_log_id)) => Ok(read_log_id.map(|l| l.index).unwrap_or(0)),
                Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
                    Err(Error::NotLeader {
                        leader_id: f.leader_id,
                        leader_addr: f.leader_node.map(|n| n.grpc_addr),
                    })
                }
                // openraft gives the followers one heartbeat interval to confirm the leadership;
                // a follower busy with a large append can miss that while the leadership
                // stands, so ask again, one interval later, for up to one election window.
                Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e)))) => {
                    let now = tokio::time::Instant::now();
                    let until = *retry_until
                        .get_or_insert_with(|| (now + self.timing.election_window()).min(deadline));
                    let pause = self.timing.heartbeat_interval();
                    if now + pause < until {
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Err(Error::no_quorum(e))
                }
                Ok(Err(RaftError::Fatal(f))) => Err(Error::core_stopped(f)),
            };
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn info(&self) -> &NodeInfo {
        &self.info
    }

    pub fn reader(&self) -> &StateReader {
        &self.reader
    }

    /// The proposer's latency and batch size histograms (`write_stats.rs`).
    pub fn write_stats(&self) -> &WriteStats {
        &self.write_stats
    }

    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// A gRPC channel to another node's address, over TLS when the cluster has it on (cached).
    pub fn peer_channel(&self, grpc_addr: &str) -> Result<tonic::transport::Channel, Error> {
        self.network
            .channel(grpc_addr)
            .map_err(|message| Error::Unavailable { message })
    }

    /// A new gRPC channel to another node's peer address, not shared with anything else, set
    /// up by `configure` (a follower's relay of workers has connections of its own, with flow
    /// control windows of their own: `roost-server/src/workers/relay.rs`). Nothing is dialled
    /// before its first call.
    pub fn dial_peer(
        &self,
        peer_addr: &str,
        configure: impl FnOnce(tonic::transport::Endpoint) -> tonic::transport::Endpoint,
    ) -> Result<tonic::transport::Channel, Error> {
        self.network
            .endpoint(peer_addr)
            .map(|e| configure(e).connect_lazy())
            .map_err(|message| Error::Unavailable { message })
    }

    #[cfg(feature = "test-util")]
    pub fn faults(&self) -> &NetworkFaults {
        &self.faults
    }

    /// Resolves when this node's Raft core has stopped on its own (a fatal error; openraft
    /// then answers nothing again), with the reason. Never resolves while Raft runs.
    pub async fn stopped(&self) -> String {
        // The core drops its senders when it stops, after its last full metrics say why.
        let mut core_alive = self.leadership_watch();
        while core_alive.changed().await.is_ok() {}
        match &self.raft.metrics().borrow().running_state {
            Err(fatal) => fatal.to_string(),
            Ok(()) => "the Raft core is gone".to_string(),
        }
    }

    /// Stops the Raft core, then commits what was applied to `state.db`. Every acknowledged
    /// write is already fsynced in the log (`log_writer.rs`); the commit spares the replay.
    pub async fn shutdown(&self) {
        self.stop_proposing();
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(node_id = self.id, error = %e, "raft shutdown failed");
        }
        if let Err(e) = self.reader.flush() {
            tracing::warn!(node_id = self.id, error = %e, "state.db: final commit failed; the log will replay it");
        }
    }
}

fn peer_unavailable(leader: u64, e: PeerError) -> Error {
    Error::Unavailable {
        message: format!("cannot reach the leader (node {leader}): {e}"),
    }
}

/// Holds off this node's timed elections after it starts until the leader has had time to reach
/// it: the leader tries a peer it could not reach again only every [`UNREACHABLE_RETRY`], and a
/// follower restarted into a healthy cluster stood for election about 300 ms after it started
/// (openraft 0.9 keeps no time of the last heartbeat across a restart), at a higher term, and
/// deposed a working leader (regression test
/// `cluster::a_restarted_follower_does_not_depose_the_leader`; BENCHMARKS.md "Faster
/// failover"). Two retries: the first may dial a new connection that does not answer within
/// one heartbeat (openraft's timeout for an AppendEntries), and openraft then waits a retry
/// more (the test failed about 1 run in 12 with one). Knowing a leader proves nothing here: a
/// restarted node names the leader of its stored vote at once. A cluster whose voters all
/// restart at once elects its leader that much later (1,250-1,400 ms at the defaults). Not for a single voter, which has no one to wait for,
/// nor for a node with no membership yet (a cluster being formed);
/// `initialize` and a hand-over's `trigger().elect()` stand at once (the gate holds only the
/// election timer).
fn quiet_start(raft: &Raft<TypeConfig>, timing: &RaftTiming) {
    raft.runtime_config().elect(false);
    // Plus up to one `max` at random: voters that all restart at once would otherwise stand on
    // the same tick and split the vote.
    let jitter =
        std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), ())
            % timing.election_timeout_max_ms.max(1);
    let quiet = 2 * UNREACHABLE_RETRY
        + timing.election_timeout_max()
        + Duration::from_millis(timing.election_timeout_min_ms.saturating_add(jitter));
    let raft = raft.clone();
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        // The core reports the membership it loaded in its first metrics (the initial ones,
        // read before, hold none).
        let mut metrics = raft.metrics();
        let _ = tokio::time::timeout(quiet, metrics.changed()).await;
        let voters = metrics
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .count();
        if voters > 1 {
            tokio::time::sleep_until(started + quiet).await;
        }
        raft.runtime_config().elect(true);
    });
}
