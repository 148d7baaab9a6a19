//! Issue 21's limits, against real in-process nodes: hostile Raft messages (an absurd term, an
//! oversize message) are refused and the node lives on; slow and idle HTTP clients are
//! disconnected; a caller past its rate (an agent with all its keys) gets 429 with `Retry-After`.

use std::time::Duration;

use anyhow::{ensure, Context};
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::{CreateCompanyRequest, RaftPayload};
use roost_testkit::{wait_for, TestNode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(20);

/// A Raft client of the node's peer listener (plaintext on loopback: no certificates here).
async fn raft_client(node: &TestNode) -> anyhow::Result<RaftClient<tonic::transport::Channel>> {
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", node.server().peer_addr()))?
            .connect()
            .await?;
    // The test's own side sends whatever it likes; the node's caps are what is tested.
    Ok(RaftClient::new(channel).max_encoding_message_size(usize::MAX))
}

fn payload(json: serde_json::Value) -> RaftPayload {
    RaftPayload {
        json: json.to_string().into_bytes(),
        data: Vec::new(),
        seq: 0,
    }
}

/// The node still takes writes and answers reads.
async fn serves(node: &TestNode) -> anyhow::Result<()> {
    node.issue(json!({ "title": "still alive" })).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_entries_with_term_u64_max_is_refused_not_a_panic() -> anyhow::Result<()> {
    let mut node = TestNode::start().await?;
    let mut raft = raft_client(&node).await?;
    // openraft 0.9's JSON for a leader's vote and log ids (`leader_id`: term and node id).
    let vote = json!({ "leader_id": { "term": u64::MAX, "node_id": 2 }, "committed": true });
    let append = json!({
        "vote": vote, "prev_log_id": null, "entries": [], "leader_commit": null,
    });
    let refused = raft
        .append_entries(payload(append.clone()))
        .await
        .expect_err("a term of 2^64-1 is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    assert!(refused.message().contains("above the bound"), "{refused}");
    let refused = raft
        .vote(payload(json!({ "vote": vote, "last_log_id": null })))
        .await
        .expect_err("a vote at term 2^64-1 is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    // A log index past every slot (`roost_core::state::slot`) is refused too.
    let far = json!({
        "vote": { "leader_id": { "term": 1, "node_id": 2 }, "committed": true },
        "prev_log_id": { "leader_id": { "term": 1, "node_id": 2 }, "index": u64::MAX },
        "entries": [], "leader_commit": null,
    });
    let refused = raft
        .append_entries(payload(far))
        .await
        .expect_err("an index of 2^64-1 is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");

    // Nothing reached openraft: the node serves, and serves again after a restart (the forged
    // term used to be saved as its vote and panic it at every start).
    serves(&node).await?;
    node.restart().await?;
    serves(&node).await?;
    node.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raft_message_over_the_cap_is_refused_not_buffered() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let mut raft = raft_client(&node).await?;
    let mut huge = payload(json!({}));
    huge.data = vec![0; roost_raft::MAX_RAFT_MESSAGE_BYTES + 1];
    let refused = raft
        .install_snapshot(huge)
        .await
        .expect_err("a message over the cap is refused");
    // tonic 0.14 refuses a message over `max_decoding_message_size` with OUT_OF_RANGE, from
    // its length prefix, before reading it.
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused}");

    // The client API's cap is 4 MiB.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", node.server().grpc_addr()))?
            .connect()
            .await?;
    let mut control = ControlClient::new(channel).max_encoding_message_size(usize::MAX);
    let mut request = tonic::Request::new(CreateCompanyRequest {
        name: "x".repeat(5 * 1024 * 1024),
        issue_prefix: "BIG".into(),
    });
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", node.admin_token).parse()?,
    );
    let refused = control
        .create_company(request)
        .await
        .expect_err("a 5 MiB request is refused");
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused}");
    serves(&node).await?;
    node.shutdown().await
}

async fn healthz(addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let reply = reqwest::get(format!("http://{addr}/healthz")).await?;
    ensure!(reply.status().is_success(), "/healthz: {}", reply.status());
    Ok(())
}

/// Reads `stream` until the node closes it; what it read. Fails past `deadline`.
async fn read_until_closed(stream: &mut TcpStream, deadline: Duration) -> anyhow::Result<Vec<u8>> {
    let mut read = Vec::new();
    tokio::time::timeout(deadline, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .context("the node kept the connection open")?;
    Ok(read)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_and_idle_http_connections_are_closed_and_others_are_served() -> anyhow::Result<()>
{
    let node = TestNode::start_with(|config| {
        config.limits.http_header_read_timeout_ms = 500;
    })
    .await?;
    let addr = node.server().http_addr();

    // A slowloris client: half a request head, then nothing.
    let mut slow = TcpStream::connect(addr).await?;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: roost\r\n")
        .await?;
    // An idle keep-alive client: one request, then nothing.
    let mut idle = TcpStream::connect(addr).await?;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: roost\r\n\r\n")
        .await?;

    // Meanwhile the node serves everyone else.
    healthz(addr).await?;
    serves(&node).await?;

    // Closed after the configured 500 ms, well before the default 10 s.
    let closed_within = Duration::from_secs(5);
    let from_slow = read_until_closed(&mut slow, closed_within).await?;
    ensure!(
        !String::from_utf8_lossy(&from_slow).contains("200 OK"),
        "the half request was answered"
    );
    let from_idle = String::from_utf8(read_until_closed(&mut idle, closed_within).await?)?;
    ensure!(from_idle.starts_with("HTTP/1.1 200"), "{from_idle}");
    healthz(addr).await?;
    node.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_is_refused() -> anyhow::Result<()> {
    let node = TestNode::start_with(|config| {
        config.limits.http_body_read_timeout_ms = 500;
    })
    .await?;
    let mut slow = TcpStream::connect(node.server().http_addr()).await?;
    let head = format!(
        "POST /api/companies HTTP/1.1\r\nHost: roost\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\"",
        node.admin_token
    );
    slow.write_all(head.as_bytes()).await?;
    let reply = String::from_utf8(read_until_closed(&mut slow, Duration::from_secs(5)).await?)?;
    ensure!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    ensure!(reply.contains("did not arrive within 500 ms"), "{reply}");
    serves(&node).await?;
    node.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_until_one_closes() -> anyhow::Result<()> {
    let node = TestNode::start_with(|config| {
        config.limits.http_max_connections = 1;
    })
    .await?;
    let addr = node.server().http_addr();
    let held = TcpStream::connect(addr).await?;
    let mut waiting = TcpStream::connect(addr).await?;
    waiting
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: roost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut byte = [0u8; 1];
    ensure!(
        tokio::time::timeout(Duration::from_millis(300), waiting.read(&mut byte))
            .await
            .is_err(),
        "a connection over the cap was served"
    );
    drop(held);
    let reply = String::from_utf8(read_until_closed(&mut waiting, WAIT).await?)?;
    ensure!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    node.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_rate_limit_gets_429_with_retry_after_and_others_pass(
) -> anyhow::Result<()> {
    let node = TestNode::start_with(|config| {
        config.limits.requests_per_second = Some(1);
        config.limits.burst = Some(3);
    })
    .await?;
    // An agent key, made before the admin token's bucket is spent.
    let (_, agent_key) = node.agent("limited").await?;
    let url = format!("http://{}/api/companies", node.server().http_addr());
    let client = reqwest::Client::new();
    let get = |token: &str| client.get(&url).bearer_auth(token).send();

    let mut limited = None;
    for _ in 0..10 {
        let reply = get(&node.admin_token).await?;
        if reply.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
            limited = Some(reply);
            break;
        }
        ensure!(reply.status().is_success(), "{}", reply.status());
    }
    let reply = limited.context("10 requests at once were never limited")?;
    let retry_after: u64 = reply
        .headers()
        .get("retry-after")
        .context("no Retry-After")?
        .to_str()?
        .parse()?;
    ensure!((1..=2).contains(&retry_after), "Retry-After: {retry_after}");
    let body: serde_json::Value = reply.json().await?;
    assert_eq!(body["code"], "rate_limited", "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );

    // gRPC takes from the same bucket: RESOURCE_EXHAUSTED.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", node.server().grpc_addr()))?
            .connect()
            .await?;
    let mut request = tonic::Request::new(roost_proto::v1::ListCompaniesRequest {});
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", node.admin_token).parse()?,
    );
    let refused = ControlClient::new(channel)
        .list_companies(request)
        .await
        .expect_err("the admin token's bucket is empty on gRPC too");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");
    assert!(refused.message().contains("rate_limited"), "{refused}");

    // Another caller has its own bucket.
    let other = get(&agent_key).await?;
    ensure!(other.status().is_success(), "{}", other.status());

    // The bucket refills: the admin token passes again.
    wait_for("the admin token's bucket to refill", WAIT, || async {
        let reply = get(&node.admin_token).await.ok()?;
        reply.status().is_success().then_some(())
    })
    .await?;
    node.shutdown().await
}
