//! AppendEntries to one follower over one long-lived gRPC stream (`AppendEntriesStream`)
//! instead of a unary call each: a message then costs no HTTP/2 stream of its own (request and
//! response headers, trailers, stream setup and teardown on both nodes). openraft 0.9 keeps one
//! AppendEntries in flight per follower and awaits its reply, so requests and replies pair up in
//! order; a stream that fails or times out is dropped, and the next request opens a new one, so
//! a late reply can never be taken for the next request's.

use std::time::Duration;

use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::RaftPayload;
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// An open stream: requests go in through `requests`, replies come back in order.
pub(crate) struct AppendStream {
    requests: mpsc::Sender<RaftPayload>,
    replies: tonic::Streaming<RaftPayload>,
}

/// Why an exchange on the stream failed.
pub(crate) enum StreamFailure {
    /// The peer does not serve `AppendEntriesStream` (an older version): use unary calls.
    Unimplemented,
    /// The peer cannot be reached now.
    Unreachable(String),
    /// The exchange failed otherwise (timeout, reset, refused message).
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

impl AppendStream {
    async fn open(mut client: RaftClient<Channel>) -> Result<AppendStream, StreamFailure> {
        // One request waits in the channel at most: openraft sends the next only after a reply.
        let (requests, outgoing) = mpsc::channel(1);
        let outgoing = futures::stream::unfold(outgoing, |mut rx| async move {
            rx.recv().await.map(|payload| (payload, rx))
        });
        let replies = client.append_entries_stream(outgoing).await?.into_inner();
        Ok(AppendStream { requests, replies })
    }

    async fn exchange(&mut self, payload: RaftPayload) -> Result<RaftPayload, StreamFailure> {
        let closed = || StreamFailure::Failed("the append stream closed".into());
        self.requests.send(payload).await.map_err(|_| closed())?;
        match self.replies.message().await? {
            Some(reply) => Ok(reply),
            None => Err(closed()),
        }
    }
}

/// Sends `payload` on `stream`, opening it first if there is none, within `timeout`. On any
/// failure the stream is dropped: its replies could no longer be paired with requests.
pub(crate) async fn exchange(
    stream: &mut Option<AppendStream>,
    client: impl FnOnce() -> Result<RaftClient<Channel>, String>,
    payload: RaftPayload,
    timeout: Duration,
) -> Result<RaftPayload, StreamFailure> {
    let attempt = async {
        let open = match stream.take() {
            Some(open) => open,
            None => AppendStream::open(client().map_err(StreamFailure::Unreachable)?).await?,
        };
        let open = stream.insert(open);
        open.exchange(payload).await
    };
    let result = match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(StreamFailure::Failed(format!(
            "no append reply within {timeout:?}"
        ))),
    };
    if result.is_err() {
        *stream = None;
    }
    result
}
