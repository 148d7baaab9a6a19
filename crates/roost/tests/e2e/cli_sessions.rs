//! The worker's CLI adapters through a 3-node cluster, with the fake `claude` in
//! `crates/roost-worker/tests/fake-cli`: sessions saved and resumed (a refused resume becomes a
//! fresh session in the same run), usage metered with lease renewals, and a run's log followed live
//! through a follower.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use roost_server::workers::WorkerConfig as LeaseConfig;
use roost_testkit::{test_timing, wait_for, TestCluster};

use crate::support::str_field;
use crate::worker_process::{create_agent, runs, start_worker, wake_and_wait_running};

const WAIT: Duration = Duration::from_secs(30);

fn fake_claude() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../roost-worker/tests/fake-cli/claude")
        .display()
        .to_string()
}

async fn cluster() -> anyhow::Result<TestCluster> {
    TestCluster::start_with_workers(
        3,
        test_timing(),
        LeaseConfig {
            renew_interval_ms: 200,
            lease_ttl_ms: 2000,
            ..LeaseConfig::default()
        },
    )
    .await
}

async fn assigned_issue(c: &TestCluster, agent: &str) -> anyhow::Result<String> {
    let leader = c.leader().await?;
    let issue = c
        .admin(leader)
        .post(
            &format!("/api/companies/{}/issues", c.company_id),
            json!({ "title": "Fix the parser", "status": "todo", "assigneeAgentId": agent }),
        )
        .await?
        .ok()?;
    Ok(str_field(&issue, "id"))
}

/// The agent's runs that have ended, oldest first.
async fn ended_runs(c: &TestCluster, agent: &str) -> anyhow::Result<Vec<Value>> {
    let mut ended: Vec<Value> = runs(c, agent)
        .await?
        .into_iter()
        .filter(|r| {
            !["queued", "assigned", "running"].contains(&r["status"].as_str().unwrap_or(""))
        })
        .collect();
    ended.reverse();
    Ok(ended)
}

/// A comment wake resumes the session the first run saved; the fake CLI refuses it, and the
/// same run starts a fresh session, succeeds, and saves the new session id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_resume_becomes_a_fresh_session_in_the_same_run_and_is_saved(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let dir = tempfile::tempdir()?;
    let _worker = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let config = json!({
        "command": fake_claude(),
        "cwd": ".",
        "env": { "FAKE_CLAUDE_REFUSE_RESUME": "1" }
    });
    let agent = create_agent(&c, "claude", config).await?;
    let issue = assigned_issue(&c, &agent).await?;

    let first = wait_for("the first run to end", WAIT, || async {
        ended_runs(&c, &agent).await.ok()?.into_iter().next()
    })
    .await?;
    let first_id = str_field(&first, "id");
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(
        first["sessionIdBefore"],
        Value::Null,
        "an assignment starts fresh"
    );
    assert_eq!(first["sessionIdAfter"], json!(format!("fresh-{first_id}")));
    assert_eq!(first["usage"]["costMicroUsd"], json!(12_300));
    assert_eq!(
        first["summary"],
        json!(format!("Did the work for {issue}."))
    );

    c.admin(2)
        .post(
            &format!("/api/issues/{issue}/comments"),
            json!({ "body": "One more thing: add a test." }),
        )
        .await?
        .ok()?;
    let second = wait_for("the comment's run to end", WAIT, || async {
        ended_runs(&c, &agent).await.ok()?.into_iter().nth(1)
    })
    .await?;
    let second_id = str_field(&second, "id");
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(
        second["sessionIdBefore"],
        json!(format!("fresh-{first_id}"))
    );
    assert_eq!(second["sessionReset"], json!(true));
    assert_eq!(
        second["sessionIdAfter"],
        json!(format!("fresh-{second_id}"))
    );

    // Saved on every replica, with the worker that holds it.
    for node in c.ids() {
        let sessions = c
            .admin(node)
            .get(&format!("/api/agents/{agent}/task-sessions"))
            .await?
            .ok()?;
        assert_eq!(
            sessions[0]["taskKey"],
            json!(issue),
            "node {node}: {sessions}"
        );
        assert_eq!(
            sessions[0]["sessionId"],
            json!(format!("fresh-{second_id}"))
        );
        assert_eq!(sessions[0]["workerId"], json!("proc-worker"));
    }
    // The CLI was called twice in the second run: the refused resume, then a fresh session
    // whose prompt carries the hand-off note and the comment.
    let calls = std::fs::read_to_string(dir.path().join("fake-claude.calls"))?;
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls[1].contains(&format!("--resume fresh-{first_id}")));
    let prompts = std::fs::read_to_string(dir.path().join("fake-claude.prompts"))?;
    let last = prompts.rsplit("=== call").next().unwrap_or_default();
    assert!(last.contains("could not be resumed"), "{last}");
    assert!(last.contains("One more thing: add a test."), "{last}");
    let log = c
        .admin(3)
        .get(&format!("/api/heartbeat-runs/{second_id}/log"))
        .await?
        .ok()?;
    assert_eq!(log["ended"], json!(true));
    assert!(
        log["content"]
            .as_str()
            .is_some_and(|t| t.contains("could not be resumed")),
        "{log}"
    );
    c.shutdown().await;
    Ok(())
}

/// Usage the agent prints reaches the cluster with lease renewals while the run is still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn usage_is_metered_with_lease_renewals_while_the_run_runs() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let dir = tempfile::tempdir()?;
    let _worker = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let release = dir.path().join("release");
    let config = json!({
        "command": fake_claude(),
        "cwd": ".",
        "env": { "FAKE_CLAUDE_WAIT_FOR": release.display().to_string() },
    });
    let agent = create_agent(&c, "claude", config).await?;
    assigned_issue(&c, &agent).await?;
    let metered = wait_for("usage on the running run", WAIT, || async {
        runs(&c, &agent)
            .await
            .ok()?
            .into_iter()
            .find(|r| r["status"] == "running" && r["usage"]["inputTokens"] == json!(1000))
    })
    .await?;
    assert_eq!(metered["usage"]["outputTokens"], json!(50), "{metered}");
    std::fs::write(&release, b"")?;
    let done = wait_for("the run to end", WAIT, || async {
        ended_runs(&c, &agent).await.ok()?.into_iter().next()
    })
    .await?;
    assert_eq!(done["usage"]["costMicroUsd"], json!(12_300), "{done}");
    c.shutdown().await;
    Ok(())
}

/// Reads a `follow=true` log stream until `until` is in what was read, or the stream ends.
async fn read_stream_until(
    response: &mut reqwest::Response,
    seen: &mut String,
    until: Option<&str>,
) -> anyhow::Result<()> {
    loop {
        if until.is_some_and(|u| seen.contains(u)) {
            return Ok(());
        }
        match tokio::time::timeout(WAIT, response.chunk()).await?? {
            Some(bytes) => seen.push_str(&String::from_utf8_lossy(&bytes)),
            None => return Ok(()),
        }
    }
}

fn touch(path: &Path) -> std::io::Result<()> {
    std::fs::write(path, b"")
}

/// `GET /api/heartbeat-runs/{id}/log?follow=true` on a follower streams the live output, which
/// only the leader holds, and ends when the run ends; afterwards any node serves the tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_run_log_streams_through_a_follower_until_the_run_ends() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let dir = tempfile::tempdir()?;
    let _worker = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let script = r#"echo "first line of $ROOST_RUN_ID"; while [ ! -e go ]; do sleep 0.05; done; echo "second line"; echo "last line""#;
    let agent = create_agent(
        &c,
        "process",
        json!({ "command": "sh", "args": ["-c", script], "cwd": "." }),
    )
    .await?;
    let run = wake_and_wait_running(&c, &agent).await?;
    let leader = c.leader().await?;
    let follower = c.ids().into_iter().find(|id| *id != leader).unwrap_or(1);
    let admin = c.admin(follower);
    let url = format!("{}/api/heartbeat-runs/{run}/log?follow=true", admin.base());
    let token = c.admin_token.clone();
    let mut response = reqwest::Client::new()
        .get(&url)
        .bearer_auth(&token)
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    let mut seen = String::new();
    read_stream_until(&mut response, &mut seen, Some("first line")).await?;
    assert!(!seen.contains("second line"), "{seen}");
    touch(&dir.path().join("go"))?;
    read_stream_until(&mut response, &mut seen, None).await?;
    assert!(
        seen.starts_with(&format!("first line of {run}\nsecond line\nlast line\n")),
        "{seen:?}"
    );
    let status = wait_for("the run to end", WAIT, || async {
        let r = c
            .admin(leader)
            .get(&format!("/api/heartbeat-runs/{run}"))
            .await
            .ok()?
            .ok()
            .ok()?;
        (r["status"] != "running").then(|| r["status"].clone())
    })
    .await?;
    assert_eq!(status, "succeeded");
    for node in c.ids() {
        let page = c
            .admin(node)
            .get(&format!("/api/heartbeat-runs/{run}/log?offset=6"))
            .await?
            .ok()?;
        assert_eq!(page["ended"], json!(true), "node {node}");
        assert_eq!(page["offset"], json!(6));
        assert!(
            page["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("line of") && t.ends_with("last line\n")),
            "node {node}: {page}"
        );
    }
    c.shutdown().await;
    Ok(())
}
