//! The org chart and project budgets through the REST API with Paperclip's bodies:
//! a blocked issue wakes its assignee's manager after the company's
//! threshold; a hard stop that pauses an agent wakes its manager; spend on a project's issues
//! stops the project at its budget with a `budget_override_required` approval, and approving
//! it raises the budget and resumes the project.

use std::time::Duration;

use serde_json::{json, Value};

use roost_testkit::{wait_for, TestNode};

use crate::support::*;

async fn wakes_for(node: &TestNode, agent: &str, reason: &str) -> anyhow::Result<Vec<Value>> {
    let mut wakes = wakes_of(node, agent).await?;
    wakes.retain(|w| w["reason"] == reason);
    Ok(wakes)
}

#[tokio::test]
async fn a_blocked_issue_and_a_budget_stop_wake_the_assignees_manager() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let (boss, _) = node.agent("boss").await?;
    let (report, _) = node.agent("report").await?;
    node.admin
        .patch(
            &format!("/api/agents/{report}"),
            json!({ "reportsTo": boss }),
        )
        .await?
        .ok()?;
    let me = node
        .admin
        .get(&format!("/api/agents/{report}"))
        .await?
        .ok()?;
    assert_eq!(me["chainOfCommand"][0]["id"], boss.as_str(), "{me}");
    // A cycle is refused with a sentence and changes nothing.
    let cycle = node
        .admin
        .patch(
            &format!("/api/agents/{boss}"),
            json!({ "reportsTo": report }),
        )
        .await?;
    assert_eq!(cycle.status.as_u16(), 400, "{}", cycle.body);
    assert!(cycle.body["error"]
        .as_str()
        .unwrap_or_default()
        .contains(' '));

    // Blocked for longer than the company's threshold (Paperclip's body names minutes; Roost's
    // seconds win): the manager is woken once, with the issue.
    node.admin
        .patch(
            &format!("/api/companies/{cid}"),
            json!({ "escalateBlockedAfterSecs": 1 }),
        )
        .await?
        .ok()?;
    let issue = node
        .issue(json!({ "title": "Stuck", "status": "blocked", "assigneeAgentId": report }))
        .await?;
    let issue_id = str_field(&issue, "id");
    let woken = wait_for(
        "the manager's escalation wake",
        Duration::from_secs(15),
        || async {
            wakes_for(&node, &boss, "issue_escalated")
                .await
                .ok()
                .filter(|w| !w.is_empty())
        },
    )
    .await?;
    assert_eq!(woken.len(), 1, "{woken:?}");
    assert_eq!(woken[0]["issueId"], issue_id.as_str());
    assert_eq!(woken[0]["payload"]["assigneeAgentId"], report.as_str());

    // A hard stop on the report's own budget pauses it and wakes its manager.
    node.admin
        .post(
            &format!("/api/companies/{cid}/budgets/policies"),
            json!({ "scopeType": "agent", "scopeId": report, "amount": 30 }),
        )
        .await?
        .ok()?;
    node.admin
        .post(
            &format!("/api/companies/{cid}/cost-events"),
            json!({ "agentId": report, "provider": "anthropic", "model": "claude", "costCents": 40 }),
        )
        .await?
        .ok()?;
    let paused = node
        .admin
        .get(&format!("/api/agents/{report}"))
        .await?
        .ok()?;
    assert_eq!(paused["status"], "paused", "{paused}");
    let escalated = wakes_for(&node, &boss, "incident_escalated").await?;
    assert_eq!(escalated.len(), 1, "{escalated:?}");
    assert_eq!(
        escalated[0]["payload"]["pausedAgentIds"][0],
        report.as_str()
    );
    Ok(())
}

#[tokio::test]
async fn a_project_budget_stops_the_project_and_an_approved_override_resumes_it(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let (agent, _) = node.agent("builder").await?;
    let project = node
        .admin
        .post(
            &format!("/api/companies/{cid}/projects"),
            json!({ "name": "Launch", "status": "in_progress" }),
        )
        .await?
        .ok()?;
    let project_id = str_field(&project, "id");
    // Paperclip's default window for a project is its lifetime.
    let policy = node
        .admin
        .post(
            &format!("/api/companies/{cid}/budgets/policies"),
            json!({ "scopeType": "project", "scopeId": project_id, "amount": 50 }),
        )
        .await?
        .ok()?;
    assert_eq!(policy["windowKind"], "lifetime", "{policy}");
    let issue = node
        .issue(json!({ "title": "Build", "status": "todo", "projectId": project_id }))
        .await?;
    let issue_id = str_field(&issue, "id");
    node.admin
        .post(
            &format!("/api/companies/{cid}/cost-events"),
            json!({ "agentId": agent, "issueId": issue_id, "provider": "openai",
                    "model": "gpt", "costCents": 60 }),
        )
        .await?
        .ok()?;

    let by_project = node
        .admin
        .get(&format!("/api/companies/{cid}/costs/by-project"))
        .await?
        .ok()?;
    assert_eq!(
        by_project[0]["projectId"],
        project_id.as_str(),
        "{by_project}"
    );
    assert_eq!(by_project[0]["costCents"], 60, "{by_project}");
    let stopped = node
        .admin
        .get(&format!("/api/projects/{project_id}"))
        .await?
        .ok()?;
    assert_eq!(stopped["pauseReason"], "budget", "{stopped}");
    let agent_row = node
        .admin
        .get(&format!("/api/agents/{agent}"))
        .await?
        .ok()?;
    assert_eq!(
        agent_row["status"], "active",
        "the agent goes on elsewhere: {agent_row}"
    );

    let approvals = node
        .admin
        .get(&format!("/api/companies/{cid}/approvals"))
        .await?
        .ok()?;
    let ask = approvals
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == "budget_override_required")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no override approval in {approvals}"))?;
    assert_eq!(ask["status"], "pending", "{ask}");
    assert_eq!(ask["payload"]["scopeId"], project_id.as_str(), "{ask}");
    let approval_id = str_field(&ask, "id");
    node.admin
        .post(
            &format!("/api/approvals/{approval_id}/approve"),
            json!({ "decisionNote": "worth it" }),
        )
        .await?
        .ok()?;
    let resumed = node
        .admin
        .get(&format!("/api/projects/{project_id}"))
        .await?
        .ok()?;
    assert!(resumed["pausedAt"].is_null(), "{resumed}");
    let overview = node
        .admin
        .get(&format!("/api/companies/{cid}/budgets/overview"))
        .await?
        .ok()?;
    let raised = overview["policies"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["scopeId"] == project_id.as_str())
        .cloned()
        .unwrap_or_default();
    assert_eq!(raised["amount"], 100, "{overview}");
    Ok(())
}
