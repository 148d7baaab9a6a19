//! Wakes and workers over REST: wakes made by events and by `POST /api/agents/{id}/wakeup`,
//! what became of each and why, the worker list and worker join tokens.

use std::collections::BTreeMap;

use roost_core::{AdapterType, Command};
use serde_json::{json, Value};

use roost_testkit::TestNode;

use crate::support::*;

fn wakes_path(node: &TestNode) -> String {
    format!("/api/companies/{}/wakes", node.company_id)
}

#[tokio::test]
async fn assigning_an_issue_queues_an_issue_assigned_wake() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _key) = node.agent("coder").await?;
    let issue = node
        .issue(json!({ "title": "Build it", "status": "todo", "assigneeAgentId": agent_id }))
        .await?;
    let wakes = wakes_of(&node, &agent_id).await?;
    assert_eq!(wakes.len(), 1, "{wakes:?}");
    let wake = &wakes[0];
    assert_eq!(wake["reason"], "issue_assigned");
    assert_eq!(wake["status"], "queued");
    assert_eq!(wake["issueId"], issue["id"]);
    assert_eq!(wake["count"], 1);
    // No worker is registered, and the view says so instead of leaving a silent wait.
    let why = wake["blockedBy"].as_str().unwrap_or_default();
    assert!(why.starts_with("waiting for a worker"), "{why}");

    // Filters: the issue by identifier, and statuses as a list.
    let by_issue = node
        .admin
        .get(&format!(
            "{}?issueId=TST-1&status=queued,deferred",
            wakes_path(&node)
        ))
        .await?
        .ok()?;
    assert_eq!(by_issue.as_array().map(Vec::len), Some(1), "{by_issue}");
    let claimed = node
        .admin
        .get(&format!("{}?status=claimed", wakes_path(&node)))
        .await?
        .ok()?;
    assert_eq!(claimed, json!([]));
    let bad = node
        .admin
        .get(&format!("{}?status=sleeping", wakes_path(&node)))
        .await?;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "bad_request"));

    let one = node
        .admin
        .get(&format!("/api/wakes/{}", str_field(wake, "id")))
        .await?
        .ok()?;
    assert_eq!(&one, wake);
    node.shutdown().await
}

#[tokio::test]
async fn an_agents_own_comment_is_a_suppressed_wake() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let coder = agent_session(&node, "coder").await?;
    let issue = node
        .issue(json!({ "title": "Build it", "status": "todo", "assigneeAgentId": coder.agent_id }))
        .await?;
    coder
        .http
        .post(
            &format!("/api/issues/{}/comments", str_field(&issue, "id")),
            json!({ "body": "on it" }),
        )
        .await?
        .ok()?;
    let wakes = wakes_of(&node, &coder.agent_id).await?;
    assert_eq!(wakes.len(), 2, "{wakes:?}");
    let (comment_wake, assigned_wake) = (&wakes[0], &wakes[1]);
    assert_eq!(comment_wake["reason"], "issue_commented");
    assert_eq!(comment_wake["status"], "suppressed");
    assert_eq!(comment_wake["statusReason"], "self_authored");
    assert_eq!(comment_wake["blockedBy"], Value::Null);
    // The suppressed wake did not merge into the pending one.
    assert_eq!(assigned_wake["status"], "queued");
    assert_eq!(assigned_wake["count"], 1);
    // The agent's own live run fills its one concurrent slot.
    assert_eq!(
        assigned_wake["blockedBy"], "max_concurrent_runs (1) reached",
        "{assigned_wake}"
    );
    node.shutdown().await
}

#[tokio::test]
async fn a_repeated_wakeup_key_returns_the_first_wake() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _key) = node.agent("coder").await?;
    let path = format!("/api/agents/{agent_id}/wakeup");
    let body = json!({ "reason": "routine", "idempotencyKey": "nightly-1", "payload": {"n": 1} });
    let first = node.admin.post(&path, body.clone()).await?;
    assert_eq!(first.status.as_u16(), 202, "{}", first.body);
    assert_eq!(first.body["run"], Value::Null);
    let wake = &first.body["wake"];
    assert_eq!(wake["reason"], "routine");
    assert_eq!(wake["payload"], json!({"n": 1}));
    assert_eq!(wake["requestedByType"], "user");
    let head = activity_head(&node).await?;

    let again = node.admin.post(&path, body).await?;
    assert_eq!(again.status.as_u16(), 202, "{}", again.body);
    assert_eq!(again.body["wake"]["id"], wake["id"]);
    assert_eq!(activity_head(&node).await?, head, "a repeat wrote activity");
    assert_eq!(wakes_of(&node, &agent_id).await?.len(), 1);
    node.shutdown().await
}

/// Paperclip's wakeup body has no issue field: its clients name the issue in
/// `payload.issueId` (or `taskId`), which Roost ignored, so the wake was not about the issue
/// (no `PAPERCLIP_TASK_ID`, no per-issue merging or deferral).
#[tokio::test]
async fn a_wakeup_naming_its_issue_in_the_payload_was_not_about_the_issue() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _key) = node.agent("coder").await?;
    let path = format!("/api/agents/{agent_id}/wakeup");
    let issue = node
        .issue(json!({ "title": "from the payload", "status": "backlog" }))
        .await?;
    let issue_id = str_field(&issue, "id");
    let by_issue_id = node
        .admin
        .post(&path, json!({ "payload": { "issueId": issue_id } }))
        .await?
        .ok()?;
    assert_eq!(
        by_issue_id["wake"]["issueId"],
        issue_id.as_str(),
        "{by_issue_id}"
    );
    let other = node
        .issue(json!({ "title": "from taskId", "status": "backlog" }))
        .await?;
    let other_id = str_field(&other, "id");
    let by_task_id = node
        .admin
        .post(&path, json!({ "payload": { "taskId": other_id } }))
        .await?
        .ok()?;
    assert_eq!(
        by_task_id["wake"]["issueId"],
        other_id.as_str(),
        "{by_task_id}"
    );
    // A second wake for the first issue merges into its pending wake.
    let again = node
        .admin
        .post(&path, json!({ "payload": { "issueId": issue_id } }))
        .await?
        .ok()?;
    assert_eq!(again["wake"]["status"], "coalesced", "{again}");
    node.shutdown().await
}

#[tokio::test]
async fn a_claimed_wake_reports_its_run_and_the_worker_its_load() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _key) = node.agent("coder").await?;
    let path = format!("/api/agents/{agent_id}/wakeup");
    let body = json!({ "idempotencyKey": "k1" });
    let wake = node.admin.post(&path, body.clone()).await?.ok()?["wake"].clone();
    assert_eq!(wake["reason"], "on_demand");
    let wake_id = str_field(&wake, "id");

    as_dispatcher(
        &node,
        Command::RegisterWorker {
            worker_id: "wk-1".into(),
            name: "box".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::from([("zone".to_string(), "eu".to_string())]),
            slots: 2,
            version: "test".into(),
        },
    )
    .await?;
    let assign = Command::AssignRun {
        wake_id: wake_id.clone(),
        run_id: "run-1".into(),
        worker_id: "wk-1".into(),
        token_hash: None,
    };
    as_dispatcher(&node, assign).await?;

    // The repeat now shows the run that answers the wake.
    let again = node.admin.post(&path, body).await?.ok()?;
    assert_eq!(again["wake"]["status"], "claimed");
    assert_eq!(again["run"]["id"], "run-1");
    assert_eq!(again["run"]["workerId"], "wk-1");
    assert_eq!(again["run"]["wakeId"], wake_id.as_str());

    let workers = node.admin.get("/api/workers").await?.ok()?;
    assert_eq!(workers.as_array().map(Vec::len), Some(1), "{workers}");
    assert_eq!(workers[0]["id"], "wk-1");
    assert_eq!(workers[0]["liveRuns"], 1);
    assert_eq!(workers[0]["labels"], json!({"zone": "eu"}));

    // A new wake finds the agent at its limit of one run.
    let next = node
        .admin
        .post(&path, json!({ "idempotencyKey": "k2" }))
        .await?
        .ok()?;
    assert_eq!(next["wake"]["status"], "queued");
    assert_eq!(next["wake"]["blockedBy"], "max_concurrent_runs (1) reached");
    node.shutdown().await
}

#[tokio::test]
async fn agents_wake_only_themselves_and_bad_wakeups_change_nothing() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (coder_id, coder_key) = node.agent("coder").await?;
    let (reviewer_id, _) = node.agent("reviewer").await?;
    let coder = node.http().with_token(&coder_key);
    let reviewer_path = format!("/api/agents/{reviewer_id}/wakeup");
    let head = activity_head(&node).await?;

    let other = coder.post(&reviewer_path, json!({})).await?;
    assert_eq!((other.status.as_u16(), other.code()), (403, "forbidden"));

    let bad_bodies = [
        json!({ "reason": 5 }),
        json!({ "source": "nap" }),
        json!({ "triggerDetail": "whenever" }),
        json!({ "surprise": true }),
        json!({ "payload": "not an object" }),
        json!({ "idempotencyKey": "" }),
    ];
    for body in bad_bodies {
        let reply = node.admin.post(&reviewer_path, body.clone()).await?;
        assert_eq!(
            (reply.status.as_u16(), reply.code()),
            (400, "bad_request"),
            "{body}: {}",
            reply.body
        );
    }
    let unknown_issue = node
        .admin
        .post(&reviewer_path, json!({ "issueId": "TST-99" }))
        .await?;
    assert_eq!(unknown_issue.status.as_u16(), 404, "{}", unknown_issue.body);
    assert_eq!(activity_head(&node).await?, head, "a refused wakeup wrote");
    assert!(wakes_of(&node, &reviewer_id).await?.is_empty());

    let own = coder
        .post(&format!("/api/agents/{coder_id}/wakeup"), json!({}))
        .await?;
    assert_eq!(own.status.as_u16(), 202, "{}", own.body);
    assert_eq!(own.body["wake"]["requestedByType"], "agent");
    node.shutdown().await
}

#[tokio::test]
async fn join_tokens_open_no_api_and_workers_are_for_admins() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (_, agent_key) = node.agent("coder").await?;
    let created = node
        .admin
        .post("/api/workers/join-tokens", json!({ "name": "box-1" }))
        .await?;
    assert_eq!(created.status.as_u16(), 201, "{}", created.body);
    assert_eq!(created.body["name"], "box-1");
    assert!(created.body.get("tokenHash").is_none(), "{}", created.body);
    let token = str_field(&created.body, "token");
    assert!(token.starts_with("rst_join_"), "{token}");

    let join = node.http().with_token(&token);
    let companies = join.get("/api/companies").await?;
    assert_eq!(
        (companies.status.as_u16(), companies.code()),
        (401, "unauthorized")
    );
    assert_eq!(join.get("/api/workers").await?.status.as_u16(), 401);

    let agent = node.http().with_token(&agent_key);
    let workers = agent.get("/api/workers").await?;
    assert_eq!(
        (workers.status.as_u16(), workers.code()),
        (403, "forbidden")
    );
    let head = activity_head(&node).await?;
    let minted = agent.post("/api/workers/join-tokens", json!({})).await?;
    assert_eq!(minted.status.as_u16(), 403, "{}", minted.body);
    let unknown_field = node
        .admin
        .post("/api/workers/join-tokens", json!({ "nom": "x" }))
        .await?;
    assert_eq!(unknown_field.status.as_u16(), 400, "{}", unknown_field.body);
    assert_eq!(activity_head(&node).await?, head);

    assert_eq!(node.admin.get("/api/workers").await?.ok()?, json!([]));
    node.shutdown().await
}
