//! What Paperclip's own CLI and agents rely on: the bodies they send with every
//! field of Paperclip's schemas, and the shapes they read back.

use std::collections::BTreeMap;

use roost_core::{AdapterType, Command};
use serde_json::{json, Value};

use roost_testkit::TestNode;

use crate::support::*;

fn error_text(reply: &roost_testkit::Reply) -> String {
    reply.body["error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_second_company_with_the_same_letters_gets_a_free_prefix() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let mut prefixes = Vec::new();
    for _ in 0..3 {
        // Paperclip's CLI sends its schema's defaults.
        let body = json!({ "name": "Acme Robotics", "description": null, "budgetMonthlyCents": 0 });
        let company = node.admin.post("/api/companies", body).await?.ok()?;
        assert_eq!(company["status"], "active", "{company}");
        assert_eq!(company["budgetMonthlyCents"], 0, "{company}");
        prefixes.push(str_field(&company, "issuePrefix"));
    }
    assert_eq!(prefixes, ["ACM", "ACMA", "ACMAA"]);
    // An explicit prefix that is taken is still the caller's mistake.
    let taken = node
        .admin
        .post(
            "/api/companies",
            json!({ "name": "Other", "issuePrefix": "ACM" }),
        )
        .await?;
    assert_eq!(taken.status.as_u16(), 409, "{}", taken.body);
    let budgeted = node
        .admin
        .post(
            "/api/companies",
            json!({ "name": "Budgeted", "budgetMonthlyCents": 12345 }),
        )
        .await?
        .ok()?;
    assert_eq!(budgeted["budgetMonthlyCents"], 12345, "{budgeted}");
    node.shutdown().await
}

/// Paperclip's `maxDailyRuns`/`maxDailyCostCents` were accepted and ignored: an operator's
/// daily cap did nothing. Now a new wake past one is skipped, saying which.
#[tokio::test]
async fn paperclip_daily_caps_were_ignored_and_now_skip_new_wakes() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let agents = format!("/api/companies/{}/agents", node.company_id);
    let body = json!({
        "name": "capped", "adapterType": "process", "adapterConfig": {},
        "runtimeConfig": { "heartbeat": { "maxDailyRuns": 1, "maxDailyCostCents": 5000 } },
    });
    let agent = node.admin.post(&agents, body).await?.ok()?;
    assert_eq!(agent["heartbeat"]["maxDailyRuns"], 1, "{agent}");
    assert_eq!(agent["heartbeat"]["maxDailyCostCents"], 5000, "{agent}");
    let id = str_field(&agent, "id");
    let wakeup = format!("/api/agents/{id}/wakeup");
    let first = node.admin.post(&wakeup, json!({})).await?.ok()?;
    assert_eq!(first["wake"]["status"], "queued", "{first}");
    // Today's one run, then a wake for other work: skipped, and the wake says why.
    node.start_run(&id).await?;
    let issue = node
        .admin
        .post(
            &format!("/api/companies/{}/issues", node.company_id),
            json!({ "title": "more work", "status": "todo" }),
        )
        .await?
        .ok()?;
    let capped = node
        .admin
        .post(&wakeup, json!({ "issueId": str_field(&issue, "id") }))
        .await?
        .ok()?;
    assert_eq!(capped["wake"]["status"], "skipped", "{capped}");
    assert_eq!(capped["wake"]["statusReason"], "daily_run_cap", "{capped}");
    // `null` lifts a cap; the other stays.
    let lifted = node
        .admin
        .patch(
            &format!("/api/agents/{id}"),
            json!({ "runtimeConfig": { "heartbeat": { "maxDailyRuns": null } } }),
        )
        .await?
        .ok()?;
    assert!(lifted["heartbeat"]["maxDailyRuns"].is_null(), "{lifted}");
    assert_eq!(lifted["heartbeat"]["maxDailyCostCents"], 5000, "{lifted}");
    let wrong = node
        .admin
        .patch(
            &format!("/api/agents/{id}"),
            json!({ "runtimeConfig": { "heartbeat": { "maxDailyRuns": -1 } } }),
        )
        .await?;
    assert_eq!(wrong.status.as_u16(), 400, "{}", wrong.body);
    assert!(
        error_text(&wrong).contains("heartbeat.maxDailyRuns"),
        "{}",
        wrong.body
    );
    node.shutdown().await
}

#[tokio::test]
async fn agent_bodies_with_paperclip_fields_are_accepted() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let agents = format!("/api/companies/{}/agents", node.company_id);
    let body = json!({
        "name": "ceo", "role": "ceo", "title": null, "icon": null, "reportsTo": null,
        "capabilities": null, "adapterType": "process", "adapterConfig": {},
        "runtimeConfig": { "heartbeat": { "enabled": true, "intervalSec": 120,
            "wakeOnDemand": true, "cooldownSec": 10, "maxConcurrentRuns": 2 } },
        "budgetMonthlyCents": 5000, "permissions": { "canCreateAgents": true },
        "metadata": null, "workMode": "standard",
    });
    let agent = node.admin.post(&agents, body).await?.ok()?;
    assert_eq!(agent["heartbeat"]["enabled"], true, "{agent}");
    assert_eq!(agent["heartbeat"]["intervalSec"], 120);
    assert_eq!(agent["heartbeat"]["maxConcurrentRuns"], 2);
    assert_eq!(agent["budgetMonthlyCents"], 5000);
    assert_eq!(agent["reportsTo"], Value::Null);
    assert_eq!(agent["status"], "active");
    let id = str_field(&agent, "id");

    // A patch of runtimeConfig.heartbeat changes only the fields it names.
    let patched = node
        .admin
        .patch(
            &format!("/api/agents/{id}"),
            json!({ "runtimeConfig": { "heartbeat": { "intervalSec": 600 } }, "icon": "crown" }),
        )
        .await?
        .ok()?;
    assert_eq!(patched["heartbeat"]["intervalSec"], 600, "{patched}");
    assert_eq!(patched["heartbeat"]["enabled"], true);
    let config = node
        .admin
        .get(&format!("/api/agents/{id}/configuration"))
        .await?
        .ok()?;
    assert_eq!(config["runtimeConfig"]["heartbeat"]["intervalSec"], 600);
    let org = node
        .admin
        .get(&format!("/api/companies/{}/org", node.company_id))
        .await?
        .ok()?;
    assert!(org
        .as_array()
        .is_some_and(|o| o.iter().any(|a| a["id"] == id.as_str())));

    // A field no Paperclip schema has is refused, by name, in a sentence.
    let unknown = node
        .admin
        .post(&agents, json!({ "name": "x", "surprise": 1 }))
        .await?;
    assert_eq!(unknown.status.as_u16(), 400, "{}", unknown.body);
    assert!(
        error_text(&unknown).contains("surprise"),
        "{}",
        unknown.body
    );
    let wrong = node
        .admin
        .post(
            &agents,
            json!({ "name": "y", "runtimeConfig": { "heartbeat": { "enabled": "yes" } } }),
        )
        .await?;
    assert_eq!(wrong.status.as_u16(), 400, "{}", wrong.body);
    assert!(
        error_text(&wrong).contains("heartbeat.enabled"),
        "{}",
        wrong.body
    );
    node.shutdown().await
}

#[tokio::test]
async fn issue_and_comment_bodies_with_paperclip_fields_are_accepted() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issues = format!("/api/companies/{}/issues", node.company_id);
    let body = json!({
        "title": "Ship it", "description": null, "status": "todo", "priority": "medium",
        "projectId": null, "goalId": null, "parentId": null, "assigneeAgentId": null,
        "assigneeUserId": null, "requestDepth": 0, "billingCode": null, "labelIds": [],
        "executionPolicy": null, "allowDuplicate": false,
    });
    let issue = node.admin.post(&issues, body).await?.ok()?;
    let id = str_field(&issue, "id");
    let child = node
        .admin
        .post(
            &format!("/api/issues/{id}/children"),
            json!({ "title": "part", "requestDepth": 1, "acceptanceCriteria": [],
                    "blockParentUntilDone": false }),
        )
        .await?;
    assert_eq!(child.status.as_u16(), 201, "{}", child.body);
    let unknown = node
        .admin
        .post(&issues, json!({ "title": "t", "bogusField": true }))
        .await?;
    assert_eq!(unknown.status.as_u16(), 400, "{}", unknown.body);
    assert!(
        error_text(&unknown).contains("bogusField"),
        "{}",
        unknown.body
    );

    // Closed, then reopened by a comment, as `issue comment --reopen` does.
    let closed = node
        .admin
        .patch(
            &format!("/api/issues/{id}"),
            json!({ "status": "cancelled", "comment": "not now", "interrupt": false,
                    "hiddenAt": null }),
        )
        .await?
        .ok()?;
    assert_eq!(closed["status"], "cancelled", "{closed}");
    let first_comment = str_field(&closed["comment"], "id");
    let reopened = node
        .admin
        .post(
            &format!("/api/issues/{id}/comments"),
            json!({ "body": "back on", "reopen": true, "interrupt": false }),
        )
        .await?;
    assert_eq!(reopened.status.as_u16(), 201, "{}", reopened.body);
    assert_eq!(reopened.body["body"], "back on");
    let now = node.admin.get(&format!("/api/issues/{id}")).await?.ok()?;
    assert_eq!(now["status"], "todo", "{now}");
    let after = node
        .admin
        .get(&format!(
            "/api/issues/{id}/comments?afterCommentId={first_comment}"
        ))
        .await?
        .ok()?;
    assert_eq!(after.as_array().map(Vec::len), Some(1), "{after}");
    assert_eq!(after[0]["body"], "back on");

    // Activity rows carry Paperclip's `id` and `createdAt`; filters narrow them.
    let activity = node
        .admin
        .get(&format!("/api/issues/{id}/activity"))
        .await?
        .ok()?;
    let rows = activity.as_array().cloned().unwrap_or_default();
    assert!(rows.len() >= 3, "{activity}");
    for row in &rows {
        assert_eq!(row["entityId"], id.as_str(), "{row}");
        assert!(
            row["id"].is_string() && row["createdAt"] == row["at"],
            "{row}"
        );
    }
    let filtered = node
        .admin
        .get(&format!(
            "/api/companies/{}/activity?entityType=issue&entityId={id}",
            node.company_id
        ))
        .await?
        .ok()?;
    assert_eq!(filtered, activity);
    node.shutdown().await
}

#[tokio::test]
async fn wakeups_take_paperclip_fields_and_answer_in_its_shape() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _) = node.agent("coder").await?;
    let path = format!("/api/agents/{agent_id}/wakeup");
    let body = json!({
        "source": "on_demand", "triggerDetail": "manual",
        "reason": "the operator wants a look", "payload": null, "idempotencyKey": null,
        "forceFreshSession": true,
    });
    let reply = node.admin.post(&path, body).await?;
    assert_eq!(reply.status.as_u16(), 202, "{}", reply.body);
    let answer = reply.body;
    // No worker: the wake waits, and says so at the top level.
    assert_eq!(answer["status"], "queued", "{answer}");
    assert_eq!(answer["wakeId"], answer["wake"]["id"]);
    assert_eq!(
        answer["id"], answer["wakeId"],
        "the wake stands in for a queued run"
    );
    assert_eq!(answer["wake"]["reason"], "on_demand");
    assert_eq!(answer["wake"]["payload"]["forceFreshSession"], true);

    let wake_id = str_field(&answer, "wakeId");
    as_dispatcher(
        &node,
        Command::RegisterWorker {
            worker_id: "wk-pc".into(),
            name: "box".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 4,
            version: "test".into(),
        },
    )
    .await?;
    let assign = Command::AssignRun {
        wake_id,
        run_id: "run-pc".into(),
        worker_id: "wk-pc".into(),
        token_hash: None,
    };
    as_dispatcher(&node, assign).await?;
    let run = node.admin.get("/api/heartbeat-runs/run-pc").await?.ok()?;
    assert_eq!(run["invocationSource"], "on_demand", "{run}");
    assert_eq!(run["triggerDetail"], "manual");
    assert_eq!(run["wakeReason"], "on_demand");

    // The legacy invoke route, with the run claimed already at the agent's limit of one:
    // the answer is still a wake, queued behind it.
    let invoked = node
        .admin
        .post(
            &format!("/api/agents/{agent_id}/heartbeat/invoke"),
            json!({}),
        )
        .await?;
    assert_eq!(invoked.status.as_u16(), 202, "{}", invoked.body);

    // A paused agent's wake is skipped, in Paperclip's words.
    node.admin
        .post(&format!("/api/agents/{agent_id}/pause"), json!({}))
        .await?
        .ok()?;
    let skipped = node.admin.post(&path, json!({})).await?;
    assert_eq!(skipped.status.as_u16(), 202, "{}", skipped.body);
    assert_eq!(skipped.body["status"], "skipped", "{}", skipped.body);
    assert_eq!(skipped.body["reason"], "wakeup_skipped");
    node.shutdown().await
}

#[tokio::test]
async fn active_run_shows_the_run_from_the_moment_its_wake_is_claimed() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _) = node.agent("coder").await?;
    let issue = node
        .issue(json!({ "title": "Build it", "status": "todo", "assigneeAgentId": agent_id }))
        .await?;
    let id = str_field(&issue, "id");
    let active = node
        .admin
        .get(&format!("/api/issues/{id}/active-run"))
        .await?
        .ok()?;
    assert_eq!(active, Value::Null);
    let wakes = node
        .admin
        .get(&format!(
            "/api/companies/{}/wakes?agentId={agent_id}",
            node.company_id
        ))
        .await?
        .ok()?;
    let wake_id = str_field(&wakes[0], "id");
    as_dispatcher(
        &node,
        Command::RegisterWorker {
            worker_id: "wk-ar".into(),
            name: "box".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 2,
            version: "test".into(),
        },
    )
    .await?;
    let assign = Command::AssignRun {
        wake_id,
        run_id: "run-ar".into(),
        worker_id: "wk-ar".into(),
        token_hash: None,
    };
    as_dispatcher(&node, assign).await?;

    // Claimed, not yet checked out: the run is the issue's active run.
    let active = node
        .admin
        .get(&format!("/api/issues/{id}/active-run"))
        .await?
        .ok()?;
    assert_eq!(active["id"], "run-ar", "{active}");
    assert_eq!(active["invocationSource"], "assignment");
    assert_eq!(active["triggerDetail"], "system");
    assert_eq!(active["wakeReason"], "issue_assigned");
    for path in [
        format!("/api/issues/{id}/live-runs"),
        format!("/api/issues/{id}/runs"),
        format!("/api/companies/{}/live-runs", node.company_id),
    ] {
        let runs = node.admin.get(&path).await?.ok()?;
        assert_eq!(runs[0]["id"], "run-ar", "{path}: {runs}");
    }
    let touched = node
        .admin
        .get("/api/heartbeat-runs/run-ar/issues")
        .await?
        .ok()?;
    assert_eq!(touched[0]["id"], id.as_str(), "{touched}");
    let state = node
        .admin
        .get(&format!("/api/agents/{agent_id}/runtime-state"))
        .await?
        .ok()?;
    assert_eq!(state["agentId"], agent_id.as_str(), "{state}");

    // An administrator's force-release frees the issue.
    let released = node
        .admin
        .post(
            &format!("/api/issues/{id}/admin/force-release?clearAssignee=true"),
            json!({}),
        )
        .await?;
    assert!(released.status.is_success(), "{}", released.body);
    assert_eq!(
        released.body["assigneeAgentId"],
        Value::Null,
        "{}",
        released.body
    );
    node.shutdown().await
}

#[tokio::test]
async fn cost_summary_carries_paperclips_fields() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, _) = node.agent("coder").await?;
    let cid = node.company_id.clone();
    let company = node
        .admin
        .patch(
            &format!("/api/companies/{cid}/budgets"),
            json!({ "budgetMonthlyCents": 10000 }),
        )
        .await?
        .ok()?;
    assert_eq!(company["budgetMonthlyCents"], 10000, "{company}");
    node.admin
        .post(
            &format!("/api/companies/{cid}/cost-events"),
            json!({ "agentId": agent_id, "provider": "anthropic", "model": "m",
                    "costCents": 2500 }),
        )
        .await?
        .ok()?;
    let summary = node
        .admin
        .get(&format!("/api/companies/{cid}/costs/summary"))
        .await?
        .ok()?;
    assert_eq!(summary["spendCents"], 2500, "{summary}");
    assert_eq!(summary["budgetCents"], 10000);
    assert_eq!(summary["utilizationPercent"], 25.0);
    // Regression: the summary ignored Paperclip's `from`/`to`. A range that ends before the
    // event counts none of it; one around it counts it; a bad bound is refused.
    let before = node
        .admin
        .get(&format!("/api/companies/{cid}/costs/summary?to=2020-01-01"))
        .await?
        .ok()?;
    assert_eq!(before["spendCents"], 0, "{before}");
    assert_eq!(before["utilizationPercent"], 0.0, "{before}");
    let around = node
        .admin
        .get(&format!(
            "/api/companies/{cid}/costs/summary?from=2020-01-01&to=2999-01-01T00:00:00Z"
        ))
        .await?
        .ok()?;
    assert_eq!(around["spendCents"], 2500, "{around}");
    let bad = node
        .admin
        .get(&format!(
            "/api/companies/{cid}/costs/summary?from=yesterday"
        ))
        .await?;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.body);
    let by_agent = node
        .admin
        .get(&format!("/api/companies/{cid}/costs/by-agent"))
        .await?
        .ok()?;
    assert_eq!(by_agent[0]["agentId"], agent_id.as_str(), "{by_agent}");
    assert_eq!(by_agent[0]["costCents"], 2500);
    let health = node.http().get("/api/health").await?.ok()?;
    assert_eq!(health["status"], "ok");
    let dashboard = node
        .admin
        .get(&format!("/api/companies/{cid}/dashboard"))
        .await?
        .ok()?;
    assert_eq!(dashboard["costs"]["monthSpendCents"], 2500, "{dashboard}");
    assert_eq!(dashboard["costs"]["monthUtilizationPercent"], 25.0);
    assert!(
        dashboard["agents"]["active"].as_u64() >= Some(1),
        "{dashboard}"
    );
    let me = node.admin.get("/api/cli-auth/me").await?.ok()?;
    assert_eq!(me["isInstanceAdmin"], true, "{me}");
    assert!(me["companyIds"]
        .as_array()
        .is_some_and(|c| c.contains(&json!(cid))));
    let stats = node.admin.get("/api/companies/stats").await?.ok()?;
    assert!(stats[&cid]["agentCount"].as_u64() >= Some(1), "{stats}");
    node.shutdown().await
}

#[tokio::test]
async fn errors_say_what_went_wrong_where_paperclip_reads_it() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, key) = node.agent("coder").await?;
    let id = todo_issue(&node, "work").await?;
    // An agent's checkout without a run: 401, as in Paperclip.
    let no_run = node
        .http()
        .with_token(&key)
        .post(
            &format!("/api/issues/{id}/checkout"),
            json!({ "agentId": agent_id, "expectedStatuses": ["todo"] }),
        )
        .await?;
    assert_eq!(no_run.status.as_u16(), 401, "{}", no_run.body);
    assert!(error_text(&no_run).contains("run id"), "{}", no_run.body);
    let wrong_method = node.admin.patch("/api/health", json!({})).await?;
    assert_eq!(wrong_method.status.as_u16(), 405, "{}", wrong_method.body);
    assert_eq!(wrong_method.body["code"], "method_not_allowed");
    assert!(
        error_text(&wrong_method).contains(' '),
        "{}",
        wrong_method.body
    );
    node.shutdown().await
}

/// Paperclip's `PATCH /api/agents/{id}/budgets` (its budget page and CLI) was a 404: an
/// administrator sets an agent's monthly budget there, the agent cannot, and `0` is refused
/// while one exists, changing nothing.
#[tokio::test]
async fn paperclips_agent_budget_route_sets_the_agents_monthly_budget() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, key) = node.agent("spender").await?;
    let path = format!("/api/agents/{agent_id}/budgets");
    let agent = node
        .admin
        .patch(&path, json!({ "budgetMonthlyCents": 7000 }))
        .await?
        .ok()?;
    assert_eq!(agent["id"], agent_id.as_str(), "{agent}");
    assert_eq!(agent["budgetMonthlyCents"], 7000, "{agent}");
    let read = node
        .admin
        .get(&format!("/api/agents/{agent_id}"))
        .await?
        .ok()?;
    assert_eq!(read["budgetMonthlyCents"], 7000, "{read}");
    let raised = node
        .admin
        .patch(&path, json!({ "budgetMonthlyCents": 9000 }))
        .await?
        .ok()?;
    assert_eq!(
        raised["budgetMonthlyCents"], 9000,
        "one policy, replaced: {raised}"
    );

    let by_agent = node
        .http()
        .with_token(&key)
        .patch(&path, json!({ "budgetMonthlyCents": 1 }))
        .await?;
    assert_eq!(by_agent.status.as_u16(), 403, "{}", by_agent.body);
    let zero = node
        .admin
        .patch(&path, json!({ "budgetMonthlyCents": 0 }))
        .await?;
    assert_eq!(zero.status.as_u16(), 400, "{}", zero.body);
    assert!(
        zero.body["error"]
            .as_str()
            .is_some_and(|e| e.contains("budget")),
        "{}",
        zero.body
    );
    let negative = node
        .admin
        .patch(&path, json!({ "budgetMonthlyCents": -5 }))
        .await?;
    assert_eq!(negative.status.as_u16(), 400, "{}", negative.body);
    let missing = node
        .admin
        .patch(
            "/api/agents/no-such-agent/budgets",
            json!({ "budgetMonthlyCents": 5 }),
        )
        .await?;
    assert_eq!(missing.status.as_u16(), 404, "{}", missing.body);
    let after = node
        .admin
        .get(&format!("/api/agents/{agent_id}"))
        .await?
        .ok()?;
    assert_eq!(
        after["budgetMonthlyCents"], 9000,
        "refusals changed nothing: {after}"
    );
    node.shutdown().await
}

/// Regression: an agent whose curl body escaped its line breaks twice (`"a\\nb"` in the JSON: a
/// backslash and an `n` in the text) got that text back verbatim; Paperclip reads such an
/// escape as a line break in descriptions, comments, documents and approval notes.
#[tokio::test]
async fn twice_escaped_line_breaks_are_read_as_line_breaks_as_paperclip_reads_them(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = node
        .issue(json!({ "title": "escapes", "description": "one\\ntwo\\r\\nthree" }))
        .await?;
    assert_eq!(issue["description"], "one\ntwo\nthree", "{issue}");
    let id = str_field(&issue, "id");
    let comment = node
        .admin
        .post(
            &format!("/api/issues/{id}/comments"),
            json!({ "body": "a\\nb" }),
        )
        .await?
        .ok()?;
    assert_eq!(comment["body"], "a\nb", "{comment}");
    let patched = node
        .admin
        .patch(
            &format!("/api/issues/{id}"),
            json!({ "description": "x\\ny", "comment": "c\\nd" }),
        )
        .await?
        .ok()?;
    assert_eq!(patched["description"], "x\ny", "{patched}");
    assert_eq!(patched["comment"]["body"], "c\nd", "{patched}");
    let doc = node
        .admin
        .put(
            &format!("/api/issues/{id}/documents/plan"),
            json!({ "format": "markdown", "body": "# Plan\\n- step" }),
        )
        .await?
        .ok()?;
    assert_eq!(doc["body"], "# Plan\n- step", "{doc}");
    // A real line break, and a backslash before anything else, are kept as sent.
    let kept = node
        .admin
        .post(
            &format!("/api/issues/{id}/comments"),
            json!({ "body": "real\nbreak, C:\\temp" }),
        )
        .await?
        .ok()?;
    assert_eq!(kept["body"], "real\nbreak, C:\\temp", "{kept}");
    Ok(())
}

/// Paperclip's issue detail shows a plan an agent wrote into the description's `<plan>` tags
/// (before plan documents) as `legacyPlanDocument`, until a `plan` document exists.
#[tokio::test]
async fn an_issue_shows_its_descriptions_plan_until_it_has_a_plan_document() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = node
        .issue(json!({ "title": "old plan", "description": "Goal.\n<plan>\n1. do it\n</plan>" }))
        .await?;
    let id = str_field(&issue, "id");
    let detail = node.admin.get(&format!("/api/issues/{id}")).await?.ok()?;
    assert_eq!(detail["legacyPlanDocument"]["body"], "1. do it", "{detail}");
    assert_eq!(detail["legacyPlanDocument"]["source"], "issue_description");
    assert!(detail["planDocument"].is_null(), "{detail}");
    node.admin
        .put(
            &format!("/api/issues/{id}/documents/plan"),
            json!({ "format": "markdown", "body": "1. do it properly" }),
        )
        .await?
        .ok()?;
    let detail = node.admin.get(&format!("/api/issues/{id}")).await?.ok()?;
    assert!(detail["legacyPlanDocument"].is_null(), "{detail}");
    assert_eq!(
        detail["planDocument"]["body"], "1. do it properly",
        "{detail}"
    );
    Ok(())
}

/// The bug: a path that is no route answered "route API route not found not found", a sentence
/// that named neither the method nor the path.
#[tokio::test]
async fn an_unknown_route_names_its_method_and_path_not_route_api_route_not_found_not_found(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let missed = node.admin.get("/api/agents/x/no-such-thing").await?;
    assert_eq!(missed.status.as_u16(), 404, "{}", missed.body);
    assert_eq!(missed.body["code"], "not_found");
    let sentence = error_text(&missed);
    assert!(
        sentence.starts_with("API route not found: GET /api/agents/x/no-such-thing "),
        "{sentence}"
    );
    assert!(!sentence.contains("not found not found"), "{sentence}");
    assert_eq!(
        missed.body["details"]["path"],
        "/api/agents/x/no-such-thing"
    );
    // Outside /api too: the same sentence with the whole path.
    let outside = node.admin.post("/nowhere", json!({})).await?;
    assert_eq!(outside.status.as_u16(), 404, "{}", outside.body);
    assert!(
        error_text(&outside).starts_with("API route not found: POST /nowhere "),
        "{}",
        outside.body
    );
    node.shutdown().await
}
