//! Routines through the REST API: Paperclip's bodies, a run that opens an
//! issue for its agent and wakes it, a schedule that fires, the signed webhook, bad input; and
//! a three-process cluster whose leader is killed while an `every 2s` routine fires: its
//! history holds every instant once, in order.

use std::time::Duration;

use roost_core::routine::hmac_sha256;
use roost_testkit::{wait_for, Http, TestNode};
use serde_json::{json, Value};

use crate::processes::start_three_servers;
use crate::support::str_field;

const WAIT: Duration = Duration::from_secs(30);

async fn runs_of(http: &Http, routine: &str) -> anyhow::Result<Vec<Value>> {
    let runs = http
        .get(&format!("/api/routines/{routine}/runs?limit=200"))
        .await?
        .ok()?;
    Ok(runs.as_array().cloned().unwrap_or_default())
}

/// Signs `body` as Paperclip's hmac_sha256 mode wants: hex(HMAC(secret, "<ts>.<body>")).
fn signature(secret: &str, ts: &str, body: &str) -> String {
    let mac = hmac_sha256(secret.as_bytes(), &[ts.as_bytes(), b".", body.as_bytes()]);
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

async fn fire(
    base: &str,
    public_id: &str,
    ts: &str,
    sig: &str,
    body: &str,
) -> anyhow::Result<(u16, Value)> {
    let reply = reqwest::Client::new()
        .post(format!(
            "{base}/api/routine-triggers/public/{public_id}/fire"
        ))
        .header("content-type", "application/json")
        .header("X-Paperclip-Timestamp", ts)
        .header("X-Paperclip-Signature", sig)
        .body(body.to_string())
        .send()
        .await?;
    let status = reply.status().as_u16();
    Ok((status, reply.json().await.unwrap_or(Value::Null)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_opens_an_issue_for_its_agent_wakes_it_and_fires_on_schedule_and_webhook(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (cid, admin) = (node.company_id.clone(), node.admin.clone());
    let (agent, key) = node.agent("reporter").await?;
    // Paperclip's createRoutineSchema body, every field sent.
    let body = json!({
        "projectId": null, "folderId": null, "goalId": null, "parentIssueId": null,
        "title": "Weekly report for {{team}}", "description": "Summarise the week.",
        "assigneeAgentId": agent, "priority": "high", "status": "active",
        "concurrencyPolicy": "always_enqueue", "catchUpPolicy": "skip_missed",
        "variables": [{ "name": "team", "defaultValue": "core" }], "env": null,
    });
    let routine = admin
        .post(&format!("/api/companies/{cid}/routines"), body)
        .await?
        .ok()?;
    let rid = str_field(&routine, "id");
    assert_eq!(routine["status"], "active");

    // A manual run opens the issue from the template, assigned to the agent, who is woken.
    let run = admin
        .post(
            &format!("/api/routines/{rid}/run"),
            json!({ "source": "manual", "variables": { "team": "infra" } }),
        )
        .await?;
    assert_eq!(run.status, 202, "{}", run.body);
    assert_eq!(run.body["status"], "issue_created", "{}", run.body);
    let issue_id = run.body["linkedIssue"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let issue = admin.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert_eq!(issue["title"], "Weekly report for infra");
    assert_eq!(issue["assigneeAgentId"], agent.as_str());
    assert_eq!(issue["status"], "todo");
    let wakes = admin
        .get(&format!("/api/companies/{cid}/wakes"))
        .await?
        .ok()?;
    let woken = wakes.as_array().into_iter().flatten().any(|w| {
        w["agentId"] == agent.as_str()
            && w["issueId"] == issue_id.as_str()
            && w["reason"] == "issue_assigned"
    });
    assert!(woken, "the agent is woken for the routine's issue: {wakes}");

    // The agent reads its company's routines but may not create one.
    let as_agent = node.http().with_token(&key);
    let list = as_agent
        .get(&format!("/api/companies/{cid}/routines"))
        .await?
        .ok()?;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    let refused = as_agent
        .post(
            &format!("/api/companies/{cid}/routines"),
            json!({ "title": "mine" }),
        )
        .await?;
    assert_eq!(refused.status, 403, "{}", refused.body);

    // Bad input: a sentence, nothing created.
    let bad = admin
        .post(
            &format!("/api/routines/{rid}/triggers"),
            json!({ "kind": "schedule", "cronExpression": "every banana" }),
        )
        .await?;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("duration"),
        "{}",
        bad.body
    );
    let bad_zone = admin
        .post(
            &format!("/api/routines/{rid}/triggers"),
            json!({ "kind": "schedule", "cronExpression": "0 9 * * *", "timezone": "Nowhere/City" }),
        )
        .await?;
    assert_eq!(bad_zone.status, 400, "{}", bad_zone.body);
    let unknown = admin
        .post(
            &format!("/api/companies/{cid}/routines"),
            json!({ "title": "x", "colour": "red" }),
        )
        .await?;
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    let triggers = admin
        .get(&format!("/api/routines/{rid}/triggers"))
        .await?
        .ok()?;
    assert_eq!(
        triggers.as_array().map(Vec::len),
        Some(0),
        "refusals created nothing"
    );

    // A schedule fires on its own (within the default 5 s stagger).
    admin
        .post(
            &format!("/api/routines/{rid}/triggers"),
            json!({ "kind": "schedule", "cronExpression": "every 1s", "label": "tick" }),
        )
        .await?
        .ok()?;
    wait_for("a schedule firing", WAIT, || {
        let (admin, rid) = (admin.clone(), rid.clone());
        async move {
            let runs = runs_of(&admin, &rid).await.ok()?;
            runs.iter()
                .any(|r| r["source"] == "schedule" && r["status"] == "issue_created")
                .then_some(())
        }
    })
    .await?;
    // Pause: the schedule stops.
    admin
        .patch(
            &format!("/api/routines/{rid}"),
            json!({ "status": "paused" }),
        )
        .await?
        .ok()?;

    // A signed webhook: the secret is shown once; good, bad and stale signatures.
    let created = admin
        .post(
            &format!("/api/routines/{rid}/triggers"),
            json!({ "kind": "webhook", "signingMode": "hmac_sha256", "replayWindowSec": 300 }),
        )
        .await?
        .ok()?;
    let secret = created["secretMaterial"]["webhookSecret"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let public_id = created["trigger"]["publicId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !secret.is_empty() && created["trigger"].get("secret").is_none(),
        "{created}"
    );
    let listed = admin
        .get(&format!("/api/routines/{rid}/triggers"))
        .await?
        .ok()?;
    assert!(
        !listed.to_string().contains(&secret),
        "the secret is never shown again"
    );
    admin
        .patch(
            &format!("/api/routines/{rid}"),
            json!({ "status": "active" }),
        )
        .await?
        .ok()?;
    let base = node.http().base().to_string();
    let now = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?).as_secs();
    let ts = now.to_string();
    let payload = r#"{"variables":{"team":"hooks"}}"#;
    let before = runs_of(&admin, &rid).await?.len();
    let (status, bad) = fire(
        &base,
        &public_id,
        &ts,
        &signature("wrong", &ts, payload),
        payload,
    )
    .await?;
    assert_eq!(status, 401, "{bad}");
    assert!(
        bad["error"].as_str().unwrap_or("").contains("signature"),
        "{bad}"
    );
    let stale = (now - 600).to_string();
    let (status, _) = fire(
        &base,
        &public_id,
        &stale,
        &signature(&secret, &stale, payload),
        payload,
    )
    .await?;
    assert_eq!(status, 401, "outside the replay window");
    assert_eq!(
        runs_of(&admin, &rid).await?.len(),
        before,
        "refusals recorded nothing"
    );
    let (status, run) = fire(
        &base,
        &public_id,
        &ts,
        &signature(&secret, &ts, payload),
        payload,
    )
    .await?;
    assert_eq!(status, 202, "{run}");
    assert_eq!(run["source"], "webhook");
    assert_eq!(run["linkedIssue"]["title"], "Weekly report for hooks");
    Ok(())
}

/// Three `roost server` processes; an `every 2s` routine fires while the leader is killed with
/// SIGKILL. Its history, read from a survivor, holds each nominal instant once, consecutive
/// (no firing doubled, none lost), and firings go on under the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_2s_routine_neither_doubles_nor_loses_a_firing_across_a_leader_kill(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let (mut cluster, token) = start_three_servers(dir.path()).await?;
    let http: Vec<Http> = cluster
        .nodes
        .iter()
        .map(|n| Http::new(n.http.clone()).with_token(&token))
        .collect();
    let leader = wait_for("a leader", WAIT, || {
        let h = http[0].clone();
        async move {
            let s = h.get("/api/cluster/status").await.ok()?.ok().ok()?;
            s["leaderId"].as_u64().filter(|l| (1..=3).contains(l))
        }
    })
    .await?;
    let admin = http[0].clone();
    let company = admin
        .post(
            "/api/companies",
            json!({ "name": "Clockwork", "issuePrefix": "CLK" }),
        )
        .await?
        .ok()?;
    let cid = str_field(&company, "id");
    let agent = admin
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "ticker" }),
        )
        .await?
        .ok()?;
    let routine = admin
        .post(
            &format!("/api/companies/{cid}/routines"),
            json!({ "title": "tick", "assigneeAgentId": str_field(&agent, "id"),
                    "concurrencyPolicy": "always_enqueue", "catchUpPolicy": "enqueue_missed_with_cap" }),
        )
        .await?
        .ok()?;
    let rid = str_field(&routine, "id");
    admin
        .post(
            &format!("/api/routines/{rid}/triggers"),
            json!({ "kind": "schedule", "cronExpression": "every 2s" }),
        )
        .await?
        .ok()?;
    let schedule_runs = |h: Http| {
        let rid = rid.clone();
        async move {
            let runs = runs_of(&h, &rid).await.ok()?;
            let v: Vec<Value> = runs
                .into_iter()
                .filter(|r| r["source"] == "schedule")
                .collect();
            Some(v)
        }
    };
    wait_for(
        "three firings before the kill",
        Duration::from_secs(60),
        || {
            let h = admin.clone();
            let f = schedule_runs(h);
            async move { f.await.filter(|v| v.len() >= 3).map(|_| ()) }
        },
    )
    .await?;
    let victim = cluster
        .nodes
        .iter()
        .position(|n| n.id == leader)
        .ok_or_else(|| anyhow::anyhow!("leader {leader} not among the nodes"))?;
    let before = schedule_runs(http[victim].clone())
        .await
        .map(|v| v.len())
        .unwrap_or(0);
    cluster.kill(leader)?; // SIGKILL, reaped.
    let survivor = http
        .iter()
        .enumerate()
        .find(|(i, _)| *i != victim)
        .map(|(_, h)| h.clone())
        .ok_or_else(|| anyhow::anyhow!("no survivor"))?;
    let runs = wait_for(
        "five more firings under the new leader",
        Duration::from_secs(60),
        || {
            let f = schedule_runs(survivor.clone());
            async move { f.await.filter(|v| v.len() >= before + 5) }
        },
    )
    .await?;
    let mut instants: Vec<i64> = runs
        .iter()
        .filter_map(|r| r["scheduledFor"].as_str())
        .filter_map(|t| roost_core::Timestamp::parse_rfc3339(t).map(|t| t.0))
        .collect();
    instants.sort();
    let n = instants.len();
    instants.dedup();
    assert_eq!(instants.len(), n, "a firing was doubled: {runs:?}");
    for pair in instants.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            2_000,
            "a firing was lost between {pair:?}"
        );
    }
    assert!(
        runs.iter().all(|r| r["status"] == "issue_created"),
        "{runs:?}"
    );
    // How late each firing was after its instant (the routine's stagger is the same for all):
    // the largest, across the failover, is at most a few seconds more than the smallest.
    let lateness: Vec<i64> = runs
        .iter()
        .filter_map(|r| {
            let at = roost_core::Timestamp::parse_rfc3339(r["triggeredAt"].as_str()?)?.0;
            let due = roost_core::Timestamp::parse_rfc3339(r["scheduledFor"].as_str()?)?.0;
            Some(at - due)
        })
        .collect();
    let (min, max) = (
        lateness.iter().min().copied().unwrap_or(0),
        lateness.iter().max().copied().unwrap_or(0),
    );
    eprintln!("routine firing lateness across the leader kill: {min}..{max} ms");
    assert!(
        max - min <= 4_000,
        "a firing was late by {} ms more than the stagger",
        max - min
    );
    Ok(())
}

fn roost(node: &TestNode, args: &[&str]) -> anyhow::Result<Value> {
    let out = std::process::Command::new(crate::support::roost_binary())
        .args(args)
        .arg("--json")
        .env("ROOST_SERVER", node.http().base())
        .env("ROOST_TOKEN", &node.admin_token)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "roost {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `roost routine create|list|show|pause|resume|run|runs --json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routine_cli_creates_pauses_runs_and_lists() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    node.agent("cli-agent").await?;
    let created = roost(
        &node,
        &[
            "routine",
            "create",
            "--title",
            "Nightly",
            "--agent",
            "cli-agent",
            "--schedule",
            "30 2 * * *",
            "--timezone",
            "America/New_York",
        ],
    )?;
    let id = str_field(&created, "id");
    assert_eq!(created["triggers"][0]["cronExpression"], "30 2 * * *");
    assert_eq!(created["triggers"][0]["timezone"], "America/New_York");
    let list = roost(&node, &["routine", "list"])?;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(
        roost(&node, &["routine", "pause", &id])?["status"],
        "paused"
    );
    assert_eq!(
        roost(&node, &["routine", "resume", &id])?["status"],
        "active"
    );
    let run = roost(&node, &["routine", "run", &id])?;
    assert_eq!(run["status"], "issue_created", "{run}");
    let runs = roost(&node, &["routine", "runs", &id])?;
    assert_eq!(runs[0]["id"], run["id"]);
    let shown = roost(&node, &["routine", "show", &id])?;
    assert_eq!(shown["recentRuns"][0]["id"], run["id"]);
    Ok(())
}
