//! The AppendEntries stream against fake peers on loopback: replies pair with their requests
//! even after one timed out or was dropped mid-flight, a reply that does not pair is refused,
//! and a peer without the stream is told apart from a failing one.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::raft_server::{Raft, RaftServer};
use roost_proto::v1::RaftPayload;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status, Streaming};

use crate::append_stream::{exchange, AppendStream, StreamFailure};

/// A peer whose stream echoes each request after the delay in milliseconds its JSON names
/// (twice if the JSON is `"twice"`; and then ends the stream if it is `"last"`), or
/// (`streams: false`) serves no stream at all.
struct EchoPeer {
    streams: bool,
}

type Replies = Pin<Box<dyn Stream<Item = Result<RaftPayload, Status>> + Send>>;

#[tonic::async_trait]
impl Raft for EchoPeer {
    async fn append_entries(
        &self,
        _: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    type AppendEntriesStreamStream = Replies;

    async fn append_entries_stream(
        &self,
        req: Request<Streaming<RaftPayload>>,
    ) -> Result<Response<Replies>, Status> {
        if !self.streams {
            return Err(Status::unimplemented("an older peer"));
        }
        let replies = futures::stream::unfold(
            (req.into_inner(), None::<RaftPayload>, false),
            |(mut incoming, again, ended)| async move {
                if let Some(payload) = again {
                    return Some((Ok(payload), (incoming, None, ended)));
                }
                if ended {
                    return None;
                }
                let payload = incoming.message().await.ok()??;
                let ended = payload.json == b"\"last\"";
                let again = (payload.json == b"\"twice\"").then(|| payload.clone());
                let delay_ms: u64 = serde_json::from_slice(&payload.json).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                Some((Ok(payload), (incoming, again, ended)))
            },
        );
        Ok(Response::new(Box::pin(replies)))
    }

    async fn vote(&self, _: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn install_snapshot(
        &self,
        _: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn forward(&self, _: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn read_index(&self, _: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }
}

/// A fake peer on loopback; its connections send at once, as a node's peer listener does
/// (Nagle's delay would hold each new stream's answer for 40 ms).
pub(crate) async fn start_peer(streams: bool) -> SocketAddr {
    use futures::StreamExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|c| {
            let _ = c.set_nodelay(true);
        })
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RaftServer::new(EchoPeer { streams }))
            .serve_with_incoming(incoming),
    );
    addr
}

fn client_of(addr: SocketAddr) -> impl Fn() -> Result<RaftClient<Channel>, String> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    move || Ok(RaftClient::new(channel.clone()))
}

/// Long enough for any exchange with a fast peer.
const PATIENT: Duration = Duration::from_secs(5);

/// The delay named by the reply to a `delayed(delay_ms)` request (`None` if it failed).
async fn echoed(
    stream: &mut Option<AppendStream>,
    client: &impl Fn() -> Result<RaftClient<Channel>, String>,
    delay_ms: u64,
) -> Option<u64> {
    let reply = exchange(stream, client, delayed(delay_ms), PATIENT)
        .await
        .ok()?;
    serde_json::from_slice(&reply.json).ok()
}

/// A request whose reply the echo peer sends after `delay_ms`.
pub(crate) fn delayed(delay_ms: u64) -> RaftPayload {
    RaftPayload {
        json: delay_ms.to_string().into_bytes(),
        data: Vec::new(),
        seq: 0,
    }
}

/// Regression: the stream stayed in its slot while an exchange ran, so when openraft dropped
/// the exchange on its own timeout (its heartbeat interval, shorter than ours), the unread
/// reply was taken for the next request's, and every later reply was one request late.
#[tokio::test]
async fn an_exchange_dropped_by_its_caller_leaves_no_reply_behind() {
    let client = client_of(start_peer(true).await);
    let mut stream: Option<AppendStream> = None;
    assert_eq!(echoed(&mut stream, &client, 1).await, Some(1));

    // The caller's own timeout (50 ms) ends the exchange before ours (5 s) would.
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        exchange(&mut stream, &client, delayed(300), PATIENT),
    )
    .await;
    assert!(dropped.is_err(), "the peer answers after 300 ms");
    assert!(
        stream.is_none(),
        "a dropped exchange takes its stream with it"
    );

    assert_eq!(echoed(&mut stream, &client, 2).await, Some(2));
}

#[tokio::test]
async fn a_reply_that_repeats_another_requests_number_is_refused() {
    let client = client_of(start_peer(true).await);
    let mut stream: Option<AppendStream> = None;
    let twice = RaftPayload {
        json: b"\"twice\"".to_vec(),
        ..delayed(0)
    };
    assert!(exchange(&mut stream, &client, twice, PATIENT).await.is_ok());
    // The peer's second copy of the first reply arrives where the second reply belongs.
    let unpaired = exchange(&mut stream, &client, delayed(0), PATIENT).await;
    assert!(matches!(unpaired, Err(StreamFailure::Failed(_))));
    assert!(stream.is_none());
    assert_eq!(echoed(&mut stream, &client, 3).await, Some(3));
}

#[tokio::test]
async fn each_reply_answers_its_own_request_even_after_a_timed_out_one() {
    let client = client_of(start_peer(true).await);
    let mut stream: Option<AppendStream> = None;

    assert_eq!(echoed(&mut stream, &client, 1).await, Some(1));
    assert!(
        stream.is_some(),
        "a successful exchange keeps its stream open"
    );

    // The peer answers after 500 ms; the caller gives up after 50 and must drop the stream,
    // or the late reply would be read as the answer to the next request.
    let slow = exchange(
        &mut stream,
        &client,
        delayed(500),
        Duration::from_millis(50),
    )
    .await;
    assert!(matches!(slow, Err(StreamFailure::Failed(_))));
    assert!(stream.is_none(), "a timed-out exchange drops its stream");

    assert_eq!(echoed(&mut stream, &client, 2).await, Some(2));
}

#[tokio::test]
async fn a_peer_without_the_stream_is_told_apart_from_a_failing_one() {
    let client = client_of(start_peer(false).await);
    let mut stream = None;
    let reply = exchange(&mut stream, &client, delayed(0), PATIENT).await;
    assert!(matches!(reply, Err(StreamFailure::Unimplemented)));
    assert!(stream.is_none());
}

#[tokio::test]
async fn an_unreachable_peer_fails_within_the_timeout() {
    // A port nothing listens on: bind one, then free it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = client_of(addr);
    let mut stream = None;
    let reply = exchange(&mut stream, &client, delayed(0), PATIENT).await;
    assert!(matches!(
        reply,
        Err(StreamFailure::Unreachable(_) | StreamFailure::Failed(_))
    ));
    assert!(stream.is_none());
}

/// Regression: a stream held from the last exchange had closed since (the peer restarted), and
/// the next request failed on it instead of opening a new stream; openraft then waited its
/// backoff (500 ms) before it tried again, long enough for a restarted follower to stand for
/// election (`cluster::a_restarted_follower_does_not_depose_the_leader`).
#[tokio::test]
async fn a_request_on_a_stream_that_closed_since_goes_on_a_new_one() {
    let client = client_of(start_peer(true).await);
    let mut stream: Option<AppendStream> = None;
    let last = RaftPayload {
        json: b"\"last\"".to_vec(),
        ..delayed(0)
    };
    assert!(exchange(&mut stream, &client, last, PATIENT).await.is_ok());
    let deadline = tokio::time::Instant::now() + PATIENT;
    while !stream.as_ref().is_some_and(AppendStream::is_closed) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the peer's end of the stream never closed the held stream"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(echoed(&mut stream, &client, 4).await, Some(4));
}
