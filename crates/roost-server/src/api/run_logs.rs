//! A run's log for a reader on any node: the live output, which only the leader holds (workers
//! send it there), while the run runs; the committed tail once it has ended. A follower relays
//! a live run's log from the leader over gRPC with the reader's own token.

use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use roost_core::Run;
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::StreamRunLogRequest;
use tokio::sync::mpsc;

use super::views::check_run_log_access;
use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// At most this many bytes per chunk sent to a reader.
const CHUNK_BYTES: usize = 64 * 1024;

/// Bytes of a run's log starting at `offset`; `ended` marks the last chunk of an ended run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogChunk {
    pub offset: u64,
    pub data: Vec<u8>,
    pub ended: bool,
}

pub type LogStream = BoxStream<'static, Result<LogChunk, ApiError>>;

/// The committed tail of an ended run from `offset` on (from the tail's start if `offset` is
/// older than what the cluster keeps).
fn tail_from(run: &Run, offset: u64) -> LogChunk {
    let tail = run.log_tail.as_bytes();
    let tail_start = run.log_bytes.saturating_sub(tail.len() as u64);
    let from = offset.max(tail_start).min(tail_start + tail.len() as u64);
    LogChunk {
        offset: from,
        data: tail[(from - tail_start) as usize..].to_vec(),
        ended: true,
    }
}

impl Api {
    /// Streams `run_id`'s log from `offset`. Without `follow` it returns what is there now;
    /// with it, it lasts until the run ends. `bearer` is the caller's token, presented to the
    /// leader when this node must relay.
    pub async fn run_log(
        &self,
        caller: &Caller,
        bearer: Option<&str>,
        run_id: &str,
        offset: u64,
        follow: bool,
    ) -> Result<LogStream, ApiError> {
        let run = self.visible_run(caller, run_id).await?;
        self.reader()
            .read(|s| check_run_log_access(caller, s, &run))?;
        let leadership = self.node().leadership();
        if !run.status.is_live() || leadership.is_leader {
            return Ok(self.local_log(run_id.to_string(), offset, follow));
        }
        let leader = leadership
            .leader_grpc_addr
            .ok_or_else(|| ApiError::Unavailable {
                message: "no leader to read the live log from".into(),
                retry_after_ms: 500,
                leader: None,
            })?;
        // The node's own channel to the leader: TLS with the cluster CA when the cluster has it.
        let channel = self
            .node()
            .peer_channel(&leader)
            .map_err(leader_unavailable)?;
        relay(channel, bearer, run_id, offset, follow).await
    }

    fn local_log(&self, run_id: String, offset: u64, follow: bool) -> LogStream {
        let (tx, rx) = mpsc::channel(8);
        let api = self.clone();
        tokio::spawn(async move {
            let mut versions = api.live_logs().watch();
            let mut applied = api.reader().applied_watch();
            let mut pos = offset;
            loop {
                versions.borrow_and_update();
                applied.borrow_and_update();
                let Some(run) = api.reader().read(|s| s.runs.get(&run_id).cloned()) else {
                    return;
                };
                let mut sent = false;
                while let Some((from, data)) = api.live_logs().read(&run_id, pos, CHUNK_BYTES) {
                    pos = from + data.len() as u64;
                    let chunk = LogChunk {
                        offset: from,
                        data,
                        ended: false,
                    };
                    if tx.send(Ok(chunk)).await.is_err() {
                        return;
                    }
                    sent = true;
                }
                if !run.status.is_live() {
                    let _ = tx.send(Ok(tail_from(&run, pos))).await;
                    return;
                }
                if !follow {
                    if !sent {
                        let empty = LogChunk {
                            offset: pos,
                            data: Vec::new(),
                            ended: false,
                        };
                        let _ = tx.send(Ok(empty)).await;
                    }
                    return;
                }
                tokio::select! {
                    _ = versions.changed() => {}
                    _ = applied.changed() => {}
                    () = tx.closed() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(rx).boxed()
    }
}

fn leader_unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::Unavailable {
        message: format!("cannot read the live log from the leader: {e}"),
        retry_after_ms: 500,
        leader: None,
    }
}

/// The leader's stream of a live run's log. The reader was authenticated and scoped here
/// already, so whatever fails on the way is the leader being unreachable.
async fn relay(
    channel: tonic::transport::Channel,
    bearer: Option<&str>,
    run_id: &str,
    offset: u64,
    follow: bool,
) -> Result<LogStream, ApiError> {
    let mut client = ControlClient::new(channel);
    let mut request = tonic::Request::new(StreamRunLogRequest {
        run_id: run_id.to_string(),
        offset,
        follow,
    });
    if let Some(token) = bearer {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| ApiError::unauthorized("malformed bearer token"))?;
        request.metadata_mut().insert("authorization", value);
    }
    let stream = client
        .stream_run_log(request)
        .await
        .map_err(|s| leader_unavailable(s.message()))?
        .into_inner();
    Ok(stream
        .map(|item| {
            item.map(|c| LogChunk {
                offset: c.offset,
                data: c.data,
                ended: c.ended,
            })
            .map_err(|s| leader_unavailable(s.message()))
        })
        .boxed())
}
