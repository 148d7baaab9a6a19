//! The request path against a one-shot fake server on a local socket: what goes on the wire
//! and how answers come back.

use std::time::Duration;

use roost_core::IssueStatus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// Serves one connection with `status` and `body`, and hands back the raw request it read.
async fn one_shot(
    status: &'static str,
    body: &'static str,
) -> (String, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        // Read the head, then as much body as Content-Length announces.
        loop {
            let n = socket.read(&mut buf).await.expect("read");
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).to_string();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_string())
                    })
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(response.as_bytes()).await.expect("write");
        String::from_utf8_lossy(&request).to_string()
    });
    (format!("http://{addr}"), server)
}

const COMMENT: &str = r#"{"id":"c1","companyId":"co","issueId":"i1","body":"hi","authorAgentId":null,
    "authorUserId":"admin","createdByRunId":"r 1","createdAt":"2025-11-22T00:00:00.123Z"}"#;

#[tokio::test]
async fn sends_token_run_id_and_body_and_decodes_the_answer() {
    let (base, server) = one_shot("201 Created", COMMENT).await;
    let client = RoostClient::new(&base, "rst_admin_x")
        .expect("client")
        .with_run_id("r 1")
        .expect("run id");
    let comment = client.add_comment("RST-1", "hi").await.expect("comment");
    assert_eq!(
        (comment.id.as_str(), comment.created_by_run_id.as_deref()),
        ("c1", Some("r 1"))
    );

    let request = server.await.expect("server");
    assert!(
        request.starts_with("POST /api/issues/RST-1/comments HTTP/1.1\r\n"),
        "{request}"
    );
    let lower = request.to_ascii_lowercase();
    assert!(
        lower.contains("authorization: bearer rst_admin_x\r\n"),
        "{request}"
    );
    assert!(lower.contains("x-roost-run-id: r 1\r\n"), "{request}");
    assert!(request.ends_with(r#"{"body":"hi"}"#), "{request}");
}

#[tokio::test]
async fn ids_are_encoded_and_filters_become_the_query() {
    let (base, server) = one_shot("200 OK", "[]").await;
    let client = RoostClient::new(&format!("{base}/prefix/"), "t").expect("client");
    let filter = IssueFilter {
        statuses: vec![IssueStatus::Todo, IssueStatus::InProgress],
        ..IssueFilter::default()
    };
    let issues = client.list_issues("a/b?c", &filter).await.expect("issues");
    assert!(issues.is_empty());
    let request = server.await.expect("server");
    assert!(
        request.starts_with(
            "GET /prefix/api/companies/a%2Fb%3Fc/issues?status=todo%2Cin_progress HTTP/1.1"
        ),
        "{request}"
    );
}

#[tokio::test]
async fn error_answers_become_api_errors() {
    let body = r#"{"error":"issue RST-9 not found","code":"not_found","details":{"entity":"issue","id":"RST-9"}}"#;
    let (base, _server) = one_shot("404 Not Found", body).await;
    let client = RoostClient::new(&base, "t").expect("client");
    let err = client.get_issue("RST-9").await.expect_err("must fail");
    assert_eq!(
        err.to_string(),
        "issue RST-9 not found (not_found, HTTP 404)"
    );
}

#[tokio::test]
async fn a_null_active_run_is_none_and_garbage_is_a_decode_error() {
    let (base, _server) = one_shot("200 OK", "null").await;
    let client = RoostClient::new(&base, "t").expect("client");
    assert_eq!(client.active_run("RST-1").await.expect("active run"), None);

    let (base, _server) = one_shot("200 OK", "<html>").await;
    let client = RoostClient::new(&base, "t").expect("client");
    let err = client.get_run("r1").await.expect_err("must fail");
    assert!(
        matches!(&err, Error::Decode { url, .. } if url.ends_with("/api/heartbeat-runs/r1")),
        "{err:?}"
    );
}

#[tokio::test]
async fn refused_connections_and_timeouts_are_transport_errors() {
    // Bind then drop, so the port is very likely closed.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("address");
    let client = RoostClient::new(&format!("http://{addr}"), "t").expect("client");
    let err = client.list_companies().await.expect_err("must fail");
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot connect to http://{addr}/api/companies: ")),
        "{err}"
    );

    // A server that accepts and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let client = RoostClient::new(
        &format!("http://{}", silent.local_addr().expect("address")),
        "t",
    )
    .expect("client")
    .with_timeout(Duration::from_millis(200));
    let err = client.list_companies().await.expect_err("must time out");
    assert!(err.to_string().contains("timed out"), "{err}");
}

#[test]
fn bad_configuration_and_dot_ids_are_refused_before_sending() {
    assert!(matches!(
        RoostClient::new("127.0.0.1:7480", "t"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        RoostClient::new("localhost:7480", "t"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        RoostClient::new("ftp://host", "t"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        RoostClient::new("http://h", "bad\ntoken"),
        Err(Error::InvalidArgument(_))
    ));
    let client = RoostClient::new("http://127.0.0.1:7480", "secret-token").expect("client");
    assert!(matches!(
        client.url(&["api", "issues", ".."]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.url(&["api", "issues", ""]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!format!("{client:?}").contains("secret-token"));
}

/// A server that refuses connections is skipped: the request reaches the next one.
#[tokio::test]
async fn an_unreachable_server_is_skipped_for_the_next() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("address"))
    };
    let (alive, server) = one_shot("201 Created", COMMENT).await;
    let client = RoostClient::new(&format!("{dead},{alive}"), "t").expect("client");
    let comment = client
        .add_comment("RST-1", "hi")
        .await
        .expect("comment through the second server");
    assert_eq!(comment.id, "c1");
    let request = server.await.expect("request");
    assert!(
        request
            .to_ascii_lowercase()
            .contains("idempotency-key: rc-"),
        "{request}"
    );
}

/// A 503 (no leader yet) moves a write to the next server with the same idempotency key, so a
/// server that did apply it answers the first outcome.
#[tokio::test]
async fn a_write_retried_after_503_keeps_its_idempotency_key() {
    let unavailable =
        r#"{"error":"no leader","code":"unavailable","details":{"retryAfterMs":200}}"#;
    let (first, first_server) = one_shot("503 Service Unavailable", unavailable).await;
    let (second, second_server) = one_shot("201 Created", COMMENT).await;
    let client = RoostClient::new(&format!("{first},{second}"), "t").expect("client");
    client
        .add_comment("RST-1", "hi")
        .await
        .expect("retried on the second server");
    let key_of = |request: String| {
        request
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("idempotency-key:")
                    .map(|v| v.trim().to_string())
            })
            .expect("an idempotency key")
    };
    assert_eq!(
        key_of(first_server.await.expect("first")),
        key_of(second_server.await.expect("second"))
    );
}

#[tokio::test]
async fn an_empty_server_list_is_refused() {
    assert!(matches!(
        RoostClient::new(" , ", "t"),
        Err(Error::InvalidArgument(_))
    ));
}

/// Serves `unavailable` answers of 503 then 201 with `COMMENT`, one per connection.
async fn flaky(unavailable: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((mut socket, _)) = listener.accept().await else {
                break;
            };
            let mut buf = [0u8; 8192];
            let _ = socket.read(&mut buf).await;
            let (status, body) = if n < unavailable {
                (
                    "503 Service Unavailable",
                    r#"{"error":"electing","code":"unavailable","details":null}"#,
                )
            } else {
                ("201 Created", COMMENT)
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    format!("http://{addr}")
}

/// Regression: while a new leader was being elected, a dead node's "connection refused" ended
/// the retries after three rounds, though the live nodes were only answering 503 for a moment.
#[tokio::test]
async fn a_dead_node_does_not_cut_short_retries_during_an_election() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("address"))
    };
    let electing = flaky(6).await;
    let client = RoostClient::new(&format!("{dead},{electing}"), "t").expect("client");
    let comment = client
        .add_comment("RST-1", "hi")
        .await
        .expect("written once the election is over");
    assert_eq!(comment.id, "c1");
}
