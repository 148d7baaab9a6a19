//! A follower's relay of worker connections to the leader. A worker that dials a follower is
//! served through it, over a few HTTP/2 connections the follower shares among every worker it
//! relays, rather than sent on to dial the leader itself. The leader then holds one stream per
//! relayed worker, not a connection: the HTTP/2 buffers of a connection (28.6 KiB, BENCHMARKS.md
//! "Lighter connected workers") and the work of its TLS, frames and pings are the followers'.
//! Nomad's clients reach any server and are forwarded to the leader the same way.
//!
//! The relay changes nothing of what a worker may do. The follower checks the worker's
//! certificate (with TLS) and its credential; the leader admits it by the credential in its
//! `Register`, exactly as one that dials it. Relayed streams reach the leader on its peer
//! listener, which with TLS serves only nodes of the cluster (`lib.rs`): that they arrive there
//! is what marks them relayed, and a relayed worker is never relayed again.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use roost_proto::v1::worker_client::WorkerClient;
use roost_proto::v1::{server_message, worker_message, Register, ServerMessage, WorkerMessage};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::{Status, Streaming};
use tracing::debug;

use super::connection::Outbound;
use super::Workers;
use crate::grpc::{MAX_REPLY_BYTES, MAX_REQUEST_BYTES};

/// Relayed workers on one connection to the leader at most, or fewer when a node serves fewer
/// streams on one connection (`[limits] grpc_max_concurrent_streams`, 1024 by default): past
/// that a new stream would wait for one to close rather than fail.
const STREAMS_PER_CONNECTION: usize = 256;

/// The flow-control window of each relayed stream, and of a whole relay connection: enough for
/// every stream on it, so that a worker whose messages are not read for a while (its queue is
/// full: `Workers::serve`) holds up its own stream only, not the others on its connection. Set
/// on the leader's peer listener (`lib.rs`) and on the follower's end. A window is credit, not
/// memory: only what a stream's reader leaves unread is held.
pub(crate) const RELAY_STREAM_WINDOW: u32 = 1 << 20;
pub(crate) const RELAY_CONNECTION_WINDOW: u32 = RELAY_STREAM_WINDOW * STREAMS_PER_CONNECTION as u32;

/// How long the leader may take to answer a relayed registration. It commits a few entries
/// first (the credential, the registration, the runs the worker reports); the worker gives up
/// sooner on its own, after its lease (`roost-worker/src/connection.rs`).
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);

/// A worker's messages waiting for the leader's connection: a worker sends a few at a time.
const QUEUE: usize = 64;

/// This node's connections to the leader for the workers it relays: a cheap `Clone` handle.
#[derive(Clone)]
pub(super) struct Relay {
    pool: Arc<Mutex<Pool>>,
    /// Relayed workers on one connection at most.
    streams: usize,
}

/// The connections to one leader. Each carries a count of the relayed workers on it: a clone of
/// its `Arc<()>` is held for as long as a relayed worker's streams are.
#[derive(Default)]
struct Pool {
    leader: String,
    connections: Vec<(Channel, Place)>,
}

/// A relayed worker's place on its connection, given back when dropped.
type Place = Arc<()>;

impl Pool {
    /// A connection to `leader` with room for one more worker, and that worker's place on it.
    /// Connections to an earlier leader are forgotten (their workers keep them until they end),
    /// and so are those no relayed worker uses any more.
    fn lease(
        &mut self,
        leader: &str,
        streams: usize,
        dial: impl FnOnce(&str) -> Result<Channel, Status>,
    ) -> Result<(Channel, Place), Status> {
        if self.leader != leader {
            self.leader = leader.to_string();
            self.connections.clear();
        }
        self.prune();
        let room = self
            .connections
            .iter()
            .find(|(_, workers)| Arc::strong_count(workers) - 1 < streams);
        if let Some((channel, workers)) = room {
            return Ok((channel.clone(), workers.clone()));
        }
        let channel = dial(leader)?;
        let workers = Arc::new(());
        self.connections.push((channel.clone(), workers.clone()));
        Ok((channel, workers))
    }

    /// Closes the connections no relayed worker uses any more.
    fn prune(&mut self) {
        self.connections
            .retain(|(_, workers)| Arc::strong_count(workers) > 1);
    }
}

impl Relay {
    /// A relay of at most `max_streams` workers on one connection, and at most
    /// [`STREAMS_PER_CONNECTION`].
    pub(super) fn new(max_streams: u32) -> Self {
        let streams = usize::try_from(max_streams).unwrap_or(usize::MAX);
        Relay {
            pool: Arc::default(),
            streams: streams.clamp(1, STREAMS_PER_CONNECTION),
        }
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Workers relayed through this node right now, on connections to the current leader
    /// (those still on an earlier leader's are on their way out). Read at each metrics scrape,
    /// which also closes the connections no worker uses any more.
    pub(super) fn relayed(&self) -> usize {
        let mut pool = self.pool();
        pool.prune();
        pool.connections
            .iter()
            .map(|(_, workers)| Arc::strong_count(workers) - 1)
            .sum()
    }
}

/// A message of the leader's, as the relayed worker gets it. A redirect names no address: the
/// worker dials the servers it was given again, in turn, rather than the leader itself, so the
/// connections stay spread over the servers its operator named.
fn relayed(mut message: ServerMessage) -> ServerMessage {
    if let Some(server_message::Body::Redirect(r)) = &mut message.body {
        r.leader_grpc_addr.clear();
    }
    message
}

impl Workers {
    /// Serves a worker through this node, which does not lead: its `Register` and every message
    /// after it go to the leader at `leader` (its peer address), and the leader's answers come
    /// back. A refusal of the leader's is the worker's answer as it is.
    pub(super) async fn relay(
        &self,
        leader: &str,
        register: Register,
        mut inbound: Streaming<WorkerMessage>,
    ) -> Result<Outbound, Status> {
        let (channel, place) = self
            .relay
            .pool()
            .lease(leader, self.relay.streams, |addr| {
                let windows = |e: tonic::transport::Endpoint| {
                    e.initial_stream_window_size(RELAY_STREAM_WINDOW)
                        .initial_connection_window_size(RELAY_CONNECTION_WINDOW)
                };
                self.api.node().dial_peer(addr, windows).map_err(|e| {
                    Status::unavailable(format!("this node cannot relay to the leader: {e}"))
                })
            })?;
        let (up, queued) = mpsc::channel(QUEUE);
        let first = WorkerMessage {
            body: Some(worker_message::Body::Register(register)),
        };
        up.try_send(first)
            .map_err(|_| Status::internal("the relay's queue refused the registration"))?;
        let mut client = WorkerClient::new(channel)
            .max_encoding_message_size(MAX_REQUEST_BYTES)
            .max_decoding_message_size(MAX_REPLY_BYTES);
        let to_leader = tokio_stream::wrappers::ReceiverStream::new(queued);
        let attached = tokio::time::timeout(ATTACH_TIMEOUT, client.attach(to_leader))
            .await
            .map_err(|_| {
                Status::unavailable(format!(
                    "the leader at {leader} did not answer this worker's registration within \
                 {ATTACH_TIMEOUT:?}; dial again"
                ))
            })?;
        let from_leader = match attached {
            Ok(answer) => answer.into_inner(),
            Err(status) if status.code() == tonic::Code::Unavailable => {
                return Err(Status::unavailable(format!(
                    "this node relays workers to the leader at {leader} and cannot reach it \
                     ({}); dial another server",
                    status.message()
                )));
            }
            Err(refusal) => return Err(refusal),
        };
        // The worker's messages, until it or the leader ends the connection. Its place on the
        // shared connection is held as long as this runs.
        tokio::spawn(async move {
            let _place = place;
            loop {
                match inbound.message().await {
                    Ok(Some(message)) => {
                        if up.send(message).await.is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        debug!(error = %e, "relayed worker's stream failed");
                        break;
                    }
                }
            }
        });
        // A stopping node ends the streams it relays, so its stop does not wait out its grace
        // for them; the workers dial another server.
        let mut stopping = self.api.stopping();
        let stopped = async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        };
        let to_worker = from_leader.map(|m| m.map(relayed));
        Ok(Box::pin(futures::StreamExt::take_until(to_worker, stopped)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lazy(addr: &str) -> Result<Channel, Status> {
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map(|e| e.connect_lazy())
            .map_err(|e| Status::internal(e.to_string()))
    }

    #[tokio::test]
    async fn relayed_workers_share_connections_up_to_a_bound_and_follow_the_leader() {
        let mut pool = Pool::default();
        let mut places = Vec::new();
        for _ in 0..STREAMS_PER_CONNECTION + 1 {
            let lease = pool.lease("10.0.0.1:7443", STREAMS_PER_CONNECTION, lazy);
            places.push(lease.expect("lease").1);
        }
        assert_eq!(
            pool.connections.len(),
            2,
            "a second connection past the bound"
        );
        // Every worker of the first connection leaves: it is closed at the next lease.
        places.drain(..STREAMS_PER_CONNECTION);
        let (_, next) = pool
            .lease("10.0.0.1:7443", STREAMS_PER_CONNECTION, lazy)
            .expect("lease");
        assert_eq!(pool.connections.len(), 1);
        assert_eq!(
            Arc::strong_count(&next),
            3,
            "the connection still in use is shared"
        );
        // Another leader: only connections to it are handed out.
        let (_, other) = pool
            .lease("10.0.0.2:7443", STREAMS_PER_CONNECTION, lazy)
            .expect("lease");
        assert_eq!(pool.leader, "10.0.0.2:7443");
        assert_eq!(pool.connections.len(), 1);
        assert_eq!(Arc::strong_count(&other), 2);
    }

    #[test]
    fn a_relayed_redirect_names_no_address() {
        let redirect = ServerMessage {
            body: Some(server_message::Body::Redirect(roost_proto::v1::Redirect {
                leader_grpc_addr: "10.0.0.2:7443".into(),
                message: "this node no longer leads".into(),
            })),
        };
        match relayed(redirect).body {
            Some(server_message::Body::Redirect(r)) => {
                assert!(r.leader_grpc_addr.is_empty());
                assert_eq!(r.message, "this node no longer leads");
            }
            other => panic!("not a redirect: {other:?}"),
        }
    }
}
