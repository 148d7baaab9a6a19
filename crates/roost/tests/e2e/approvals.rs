//! Approvals through the REST API with Paperclip's JSON:
//! an agent asks with Paperclip's create body, the board approves, the requester is woken once
//! with the decision; a `hire_agent` hire runs nothing, and its keys open nothing, before it is
//! approved.

use serde_json::{json, Value};

use roost_testkit::TestNode;

use crate::support::*;

async fn approval_wakes(node: &TestNode, agent: &str) -> anyhow::Result<Vec<Value>> {
    let mut wakes = wakes_of(node, agent).await?;
    wakes.retain(|w| w["reason"] == "approval_resolved");
    Ok(wakes)
}

#[tokio::test]
async fn an_approval_wakes_its_requester_once_with_the_decision() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let (agent_id, key) = node.agent("strategist").await?;
    let (other_id, _) = node.agent("builder").await?;
    let issue = node
        .admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "Pick a strategy", "status": "todo", "assigneeAgentId": other_id }),
        )
        .await?
        .ok()?;
    let issue_id = str_field(&issue, "id");
    let agent = node.http().with_token(&key);
    // Paperclip's create body, with its own dedupe key.
    let created = agent
        .post(
            &format!("/api/companies/{cid}/approvals"),
            json!({
                "type": "approve_ceo_strategy",
                "payload": { "strategy": "focus on the CLI" },
                "issueIds": [issue_id],
                "idempotencyKey": "strategy-1",
            }),
        )
        .await?;
    assert_eq!(created.status.as_u16(), 201, "{}", created.body);
    let approval = created.body;
    let id = str_field(&approval, "id");
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["type"], "approve_ceo_strategy");
    assert_eq!(approval["requestedByAgentId"], agent_id.as_str());

    // Agents read but do not decide; bad input is a sentence and changes nothing.
    let by_agent = agent
        .post(&format!("/api/approvals/{id}/approve"), json!({}))
        .await?;
    assert_eq!(by_agent.status.as_u16(), 403, "{}", by_agent.body);
    let bad = agent
        .post(
            &format!("/api/companies/{cid}/approvals"),
            json!({ "type": "buy_a_boat", "payload": {} }),
        )
        .await?;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.body);
    assert!(
        bad.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("hire_agent"),
        "{}",
        bad.body
    );
    let listed = agent
        .get(&format!("/api/companies/{cid}/approvals?status=pending"))
        .await?
        .ok()?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let linked = node
        .admin
        .get(&format!("/api/issues/{issue_id}/approvals"))
        .await?
        .ok()?;
    assert_eq!(linked[0]["id"], id.as_str(), "{linked}");

    let commented = agent
        .post(
            &format!("/api/approvals/{id}/comments"),
            json!({ "body": "CLI first" }),
        )
        .await?;
    assert_eq!(commented.status.as_u16(), 201, "{}", commented.body);
    let decided = node
        .admin
        .post(
            &format!("/api/approvals/{id}/approve"),
            json!({ "decisionNote": "agreed", "decidedByUserId": "board" }),
        )
        .await?
        .ok()?;
    assert_eq!(decided["status"], "approved", "{decided}");
    let again = node
        .admin
        .post(&format!("/api/approvals/{id}/approve"), json!({}))
        .await?
        .ok()?;
    assert_eq!(
        again["status"], "approved",
        "a repeated approve answers the approval"
    );
    let wakes = approval_wakes(&node, &agent_id).await?;
    assert_eq!(wakes.len(), 1, "woken once: {wakes:?}");
    assert_eq!(wakes[0]["payload"]["reason"], "approval_approved");
    assert_eq!(wakes[0]["payload"]["decisionNote"], "agreed");
    assert_eq!(wakes[0]["payload"]["approvalId"], id.as_str());
    let rejected = node
        .admin
        .post(&format!("/api/approvals/{id}/reject"), json!({}))
        .await?;
    assert_eq!(rejected.status.as_u16(), 422, "{}", rejected.body);
    let comments = agent
        .get(&format!("/api/approvals/{id}/comments"))
        .await?
        .ok()?;
    assert_eq!(comments[0]["body"], "CLI first", "{comments}");
    Ok(())
}

/// Hires agent `tester` in a company that requires board approval for new agents: its id and
/// its `hire_agent` approval's id.
async fn pending_hire(node: &TestNode) -> anyhow::Result<(String, String)> {
    let cid = node.company_id.clone();
    node.admin
        .patch(
            &format!("/api/companies/{cid}"),
            json!({ "requireBoardApprovalForNewAgents": true }),
        )
        .await?
        .ok()?;
    // Paperclip's hire body: an agent creation body and the issue it came from.
    let hired = node
        .admin
        .post(
            &format!("/api/companies/{cid}/agent-hires"),
            json!({ "name": "tester", "role": "qa", "adapterType": "process",
                    "adapterConfig": { "command": "true" }, "sourceIssueId": null }),
        )
        .await?;
    assert_eq!(hired.status.as_u16(), 201, "{}", hired.body);
    let agent_id = str_field(&hired.body["agent"], "id");
    let approval_id = str_field(&hired.body["approval"], "id");
    assert_eq!(
        hired.body["agent"]["status"], "pending_approval",
        "{}",
        hired.body
    );
    assert_eq!(hired.body["approval"]["type"], "hire_agent");
    assert_eq!(
        hired.body["approval"]["payload"]["agentId"],
        agent_id.as_str()
    );
    Ok((agent_id, approval_id))
}

#[tokio::test]
async fn a_hire_runs_nothing_before_it_is_approved() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, approval_id) = pending_hire(&node).await?;
    let woken = node
        .admin
        .post(&format!("/api/agents/{agent_id}/wakeup"), json!({}))
        .await?
        .ok()?;
    assert_eq!(woken["status"], "skipped", "{woken}");
    assert_eq!(woken["statusReason"], "agent_pending_approval", "{woken}");

    node.admin
        .post(&format!("/api/approvals/{approval_id}/approve"), json!({}))
        .await?
        .ok()?;
    let agent = node
        .admin
        .get(&format!("/api/agents/{agent_id}"))
        .await?
        .ok()?;
    assert_eq!(agent["status"], "active", "{agent}");
    let woken = node
        .admin
        .post(&format!("/api/agents/{agent_id}/wakeup"), json!({}))
        .await?
        .ok()?;
    assert_eq!(woken["status"], "queued", "{woken}");
    Ok(())
}

/// Regression: a key made for an agent whose hire waited for approval authenticated it (Paperclip
/// treats such an agent as anonymous).
#[tokio::test]
async fn a_pending_hire_key_does_not_authenticate_until_approved() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent_id, approval_id) = pending_hire(&node).await?;
    let key = new_key(&node.admin, &agent_id).await?;
    let agent = node.http().with_token(&key);
    let refused = agent.get("/api/agents/me").await?;
    assert_eq!(refused.status.as_u16(), 401, "{}", refused.body);
    let error = refused.body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("waiting for its hire to be approved"),
        "{error}"
    );
    // Nor does resuming it get around the approval.
    let resumed = node
        .admin
        .post(&format!("/api/agents/{agent_id}/resume"), json!({}))
        .await?;
    assert_eq!(resumed.status.as_u16(), 409, "{}", resumed.body);
    assert_eq!(agent.get("/api/agents/me").await?.status.as_u16(), 401);

    node.admin
        .post(&format!("/api/approvals/{approval_id}/approve"), json!({}))
        .await?
        .ok()?;
    let me = agent.get("/api/agents/me").await?.ok()?;
    assert_eq!(me["id"], agent_id.as_str(), "{me}");
    Ok(())
}
