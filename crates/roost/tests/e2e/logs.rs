//! What `roost` writes to a log file: plain text (a file or a journal is not a terminal, and
//! colour codes made such logs unreadable), or one JSON object per line with
//! `ROOST_LOG_FORMAT=json`.

use std::process::{Command, Stdio};
use std::time::Duration;

use roost_testkit::wait_for;

use crate::support::roost_binary;

/// Starts `roost dev` with stderr to a file and `env`, waits until it serves, and returns the
/// file's text.
async fn dev_log(env: &[(&str, &str)]) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("roost.log");
    let mut command = Command::new(roost_binary());
    command
        .args(["dev", "--dir"])
        .arg(dir.path().join(".roost"))
        .args([
            "--http-listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ])
        .env("ROOST_LOG", "info")
        .env_remove("NO_COLOR")
        .env_remove("ROOST_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn()?;
    let text = wait_for(
        "roost dev to log that it serves",
        Duration::from_secs(60),
        || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .ok()
                    .filter(|t| t.contains("node serving"))
            }
        },
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    text
}

#[tokio::test]
async fn a_log_file_holds_no_colour_codes() -> anyhow::Result<()> {
    let text = dev_log(&[]).await?;
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file:\n{text}"
    );
    assert!(text.contains(" INFO "), "{text}");
    Ok(())
}

#[tokio::test]
async fn roost_log_format_json_writes_one_object_per_line() -> anyhow::Result<()> {
    let text = dev_log(&[("ROOST_LOG_FORMAT", "json")]).await?;
    let mut serving = false;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("not a JSON line ({e}): {line}"))?;
        assert!(
            entry["level"].is_string() && entry["timestamp"].is_string(),
            "{line}"
        );
        serving |= entry["fields"]["message"] == "node serving";
    }
    assert!(serving, "no `node serving` entry:\n{text}");
    Ok(())
}

/// A write's request id follows it: the client's `X-Request-Id` comes back
/// on the response, the request's span carries it with the ids its path names, and the apply of
/// the entry it proposed logs it too. The same over gRPC, with `x-request-id` metadata.
#[tokio::test]
async fn a_request_id_follows_a_write_from_rest_to_apply() -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir()?;
    let data = dir.path().join(".roost");
    let log = dir.path().join("roost.log");
    let mut child = Command::new(roost_binary())
        .args(["dev", "--dir"])
        .arg(&data)
        .args([
            "--http-listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ])
        .env("ROOST_LOG", "info,roost_server=debug,roost_store=debug")
        .env("ROOST_LOG_FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (mut base, mut company, mut grpc) = (None, None, None);
    while base.is_none() || company.is_none() || grpc.is_none() {
        let line = rx.recv_timeout(Duration::from_secs(60))?;
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["API", url] => base = Some(url.to_string()),
            ["gRPC", addr] => grpc = Some(addr.to_string()),
            ["Company", .., "id", id] => company = Some(id.to_string()),
            _ => {}
        }
    }
    let (base, company) = (base.unwrap_or_default(), company.unwrap_or_default());
    let grpc = grpc.unwrap_or_default();
    let token = std::fs::read_to_string(data.join("admin-token"))?;
    let response = reqwest::Client::new()
        .post(format!("{base}/companies/{company}/issues"))
        .bearer_auth(token.trim())
        .header("X-Request-Id", "e2e-req-42")
        .json(&serde_json::json!({ "title": "traced" }))
        .send()
        .await?;
    let echoed = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    assert!(response.status().is_success(), "{}", response.text().await?);
    assert_eq!(echoed.as_deref(), Some("e2e-req-42"));
    let mut control =
        roost_proto::v1::control_client::ControlClient::connect(format!("http://{grpc}")).await?;
    let mut request = crate::support::authed(
        token.trim(),
        None,
        roost_proto::v1::CreateIssueRequest {
            company_id: company.clone(),
            title: "traced over gRPC".into(),
            ..Default::default()
        },
    )?;
    request
        .metadata_mut()
        .insert("x-request-id", "e2e-grpc-7".parse()?);
    let reply = control.create_issue(request).await?;
    assert_eq!(
        reply
            .metadata()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
        Some("e2e-grpc-7")
    );

    let lines = wait_for(
        "the request and its apply in the log",
        Duration::from_secs(30),
        || {
            let log = log.clone();
            async move {
                let text = std::fs::read_to_string(&log).ok()?;
                let entries: Vec<serde_json::Value> = text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .filter(|e: &serde_json::Value| e.to_string().contains("e2e-req-42"))
                    .collect();
                let committed = entries
                    .iter()
                    .any(|e| e["fields"]["message"] == "committed");
                let applied = entries.iter().any(|e| e["fields"]["message"] == "applied");
                let over_grpc = text.lines().any(|l| {
                    l.contains("e2e-grpc-7") && l.contains("committed") && l.contains("CreateIssue")
                });
                (committed && applied && over_grpc).then_some(entries)
            }
        },
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let lines = lines?;
    let committed = lines
        .iter()
        .find(|e| e["fields"]["message"] == "committed")
        .cloned()
        .unwrap_or_default();
    let span = &committed["span"];
    assert_eq!(span["request_id"], "e2e-req-42", "{committed}");
    assert_eq!(span["company_id"], company.as_str(), "{committed}");
    assert_eq!(span["route"], "/api/companies/{cid}/issues", "{committed}");
    assert_eq!(
        committed["fields"]["command"], "issue.created",
        "{committed}"
    );
    let applied = lines
        .iter()
        .find(|e| e["fields"]["message"] == "applied")
        .cloned()
        .unwrap_or_default();
    assert_eq!(applied["fields"]["command"], "issue.created", "{applied}");
    assert_eq!(
        applied["fields"]["index"], committed["fields"]["index"],
        "{applied}"
    );
    Ok(())
}

/// With `ROOST_OTLP_ENDPOINT` the node exports its spans to an OpenTelemetry collector (OTLP
/// over HTTP): a stand-in collector (a real one does not run here) receives the batch holding
/// the REST request's span, with its request id and the service name.
#[tokio::test]
async fn spans_reach_an_otlp_collector() -> anyhow::Result<()> {
    use std::sync::{Arc, Mutex};
    let received: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let collector = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post({
            let received = received.clone();
            move |body: axum::body::Bytes| async move {
                received
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(body.to_vec());
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, collector).await });

    let dir = tempfile::tempdir()?;
    let mut dev = roost_testkit::RoostProcess::spawn_dev_with_env(
        &roost_binary(),
        &dir.path().join(".roost"),
        Duration::from_secs(60),
        &[
            ("ROOST_OTLP_ENDPOINT", endpoint.as_str()),
            ("ROOST_LOG", "info"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ],
    )?;
    let reply = reqwest::Client::new()
        .get(format!(
            "{}/api/companies/{}/issues",
            dev.base_url, dev.company_id
        ))
        .bearer_auth(&dev.admin_token)
        .header("X-Request-Id", "otlp-req-7")
        .send()
        .await?;
    assert!(reply.status().is_success());
    let exported = wait_for(
        "the request's span at the collector",
        Duration::from_secs(30),
        || {
            let received = received.clone();
            async move {
                let bodies = received.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let has =
                    |needle: &[u8], body: &Vec<u8>| body.windows(needle.len()).any(|w| w == needle);
                bodies
                    .into_iter()
                    .find(|b| has(b"otlp-req-7", b))
                    .filter(|b| has(b"roost", b) && has(b"/api/companies/{cid}/issues", b))
            }
        },
    )
    .await;
    dev.kill_9()?;
    exported?;
    Ok(())
}
