//! AppendEntries to one follower over one long-lived gRPC stream (`AppendEntriesStream`)
//! instead of a unary call each: a message then costs no HTTP/2 stream of its own (request and
//! response headers, trailers, stream setup and teardown on both nodes). openraft 0.9 keeps one
//! AppendEntries in flight per follower and awaits its reply, so requests and replies pair up in
//! order. The stream is taken out of its slot for an exchange and put back only after the
//! reply: if the exchange fails, times out or is dropped by openraft (its own timeout), the
//! stream goes with it, and the next request opens a new one. A late reply can therefore never
//! be read as the next request's; each reply also repeats its request's number, checked here.

use std::time::Duration;

use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::RaftPayload;
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// An open stream: requests go in through `requests`, replies come back in order.
pub(crate) struct AppendStream {
    requests: mpsc::Sender<RaftPayload>,
    replies: tonic::Streaming<RaftPayload>,
    /// The number of the last request sent.
    seq: u64,
}

/// Why an exchange on the stream failed.
pub(crate) enum StreamFailure {
    /// The peer does not serve `AppendEntriesStream` (an older version): use unary calls.
    Unimplemented,
    /// The peer cannot be reached now.
    Unreachable(String),
    /// The exchange failed otherwise (timeout, reset, refused or unpaired message).
    Failed(String),
}

impl From<tonic::Status> for StreamFailure {
    fn from(status: tonic::Status) -> Self {
        match status.code() {
            tonic::Code::Unimplemented => StreamFailure::Unimplemented,
            tonic::Code::Unavailable => StreamFailure::Unreachable(status.message().to_string()),
            _ => StreamFailure::Failed(status.to_string()),
        }
    }
}

fn closed() -> StreamFailure {
    StreamFailure::Failed("the append stream closed".into())
}

impl AppendStream {
    /// Opens a stream with `first` as its first request. The request is queued before the
    /// call, so it leaves with the stream's headers instead of a round trip after them.
    async fn open(
        mut client: RaftClient<Channel>,
        mut first: RaftPayload,
    ) -> Result<AppendStream, StreamFailure> {
        // One request waits in the channel at most: openraft sends the next only after a reply.
        let (requests, outgoing) = mpsc::channel(1);
        first.seq = 1;
        requests.try_send(first).map_err(|_| closed())?;
        let outgoing = futures::stream::unfold(outgoing, |mut rx| async move {
            rx.recv().await.map(|payload| (payload, rx))
        });
        let replies = client.append_entries_stream(outgoing).await?.into_inner();
        Ok(AppendStream {
            requests,
            replies,
            seq: 1,
        })
    }

    /// Queues `payload` as the next request; gives it back if the stream has closed, so it can
    /// go on a new stream without a copy.
    async fn send(&mut self, mut payload: RaftPayload) -> Result<(), RaftPayload> {
        payload.seq = self.seq + 1;
        self.requests.send(payload).await.map_err(|e| e.0)?;
        self.seq += 1;
        Ok(())
    }

    /// Whether the peer's end has gone: a request sent now would be refused.
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.requests.is_closed()
    }

    /// The reply to the last request sent.
    async fn reply(&mut self) -> Result<RaftPayload, StreamFailure> {
        let reply = self.replies.message().await?.ok_or_else(closed)?;
        if reply.seq != self.seq {
            return Err(StreamFailure::Failed(format!(
                "append stream reply {} to request {}",
                reply.seq, self.seq
            )));
        }
        Ok(reply)
    }
}

/// Sends `payload` on `stream`, opening one if there is none, within `timeout`. The stream is
/// back in `stream` only if the exchange completed.
pub(crate) async fn exchange(
    stream: &mut Option<AppendStream>,
    client: impl FnOnce() -> Result<RaftClient<Channel>, String>,
    payload: RaftPayload,
    timeout: Duration,
) -> Result<RaftPayload, StreamFailure> {
    let held = stream.take();
    let attempt = async move {
        // A held stream closes when its connection does (the peer restarted): the request,
        // which never left, then opens a new stream at once. A stopping peer's last answer
        // (its core stopped: `Unreachable`) starts openraft's backoff (`network.rs`,
        // `UNREACHABLE_RETRY`) and leaves the stream held; failing the next request on it kept
        // the backoff for a second round, long enough for the restarted follower to stand for
        // election (regression test `cluster::a_restarted_follower_does_not_depose_the_leader`).
        let unsent = match held {
            Some(mut open) => match open.send(payload).await {
                Ok(()) => Ok(open),
                Err(unsent) => Err(unsent),
            },
            None => Err(payload),
        };
        let mut open = match unsent {
            Ok(open) => open,
            Err(payload) => {
                let client = client().map_err(StreamFailure::Unreachable)?;
                AppendStream::open(client, payload).await?
            }
        };
        let reply = open.reply().await?;
        Ok((open, reply))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok((open, reply))) => {
            *stream = Some(open);
            Ok(reply)
        }
        Ok(Err(failure)) => Err(failure),
        Err(_) => Err(StreamFailure::Failed(format!(
            "no append reply within {timeout:?}"
        ))),
    }
}
