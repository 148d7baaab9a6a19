//! Paperclip's edit routes: `PATCH /api/companies/{id}` (a paused company
//! starts no runs) and `DELETE /api/issues/{id}` (the issue and its comments are gone, on disk
//! too, and nothing else is lost with them).

use serde_json::json;

use roost_testkit::TestNode;

use crate::support::*;

fn error_text(reply: &roost_testkit::Reply) -> String {
    reply.body["error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_company_patch_edits_pauses_and_budgets_and_refuses_what_roost_derives(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let path = format!("/api/companies/{cid}");
    // Paperclip's update schema, with fields Roost keeps and fields it ignores.
    let body = json!({
        "name": "Acme Robotics", "description": "we build robots",
        "requireBoardApprovalForNewAgents": true, "budgetMonthlyCents": 50_000,
        "feedbackDataSharingEnabled": false, "logoAssetId": null,
    });
    let patched = node.admin.patch(&path, body).await?.ok()?;
    assert_eq!(patched["name"], "Acme Robotics", "{patched}");
    assert_eq!(patched["description"], "we build robots");
    assert_eq!(patched["requireBoardApprovalForNewAgents"], true);
    assert_eq!(patched["budgetMonthlyCents"], 50_000);
    assert_eq!(patched["status"], "active");
    let read = node.admin.get(&path).await?.ok()?;
    assert_eq!(read, patched, "a read shows what the patch answered");

    // Refusals change nothing and say why.
    for (body, says) in [
        (json!({ "spentMonthlyCents": 0 }), "cost events"),
        (json!({ "issuePrefix": "NEW" }), "issuePrefix"),
        (
            json!({ "status": "sleeping" }),
            "expected one of `active`, `paused`, `archived`",
        ),
        (json!({ "name": "  " }), "name"),
        (
            json!({ "budgetMonthlyCents": 0 }),
            "remove the company's budget",
        ),
    ] {
        let reply = node.admin.patch(&path, body.clone()).await?;
        assert_eq!(reply.status.as_u16(), 400, "{body}: {}", reply.body);
        assert!(error_text(&reply).contains(says), "{body}: {}", reply.body);
    }
    let (agent_id, key) = node.agent("coder").await?;
    let by_agent = node
        .http()
        .with_token(&key)
        .patch(&path, json!({ "name": "mine" }))
        .await?;
    assert_eq!(by_agent.status.as_u16(), 403, "{}", by_agent.body);
    assert_eq!(node.admin.get(&path).await?.ok()?, patched);

    // Paused: a wake is skipped in the company's words, and no run can start.
    let paused = node
        .admin
        .patch(&path, json!({ "status": "paused" }))
        .await?
        .ok()?;
    assert_eq!(paused["status"], "paused");
    let wakeup = format!("/api/agents/{agent_id}/wakeup");
    let skipped = node.admin.post(&wakeup, json!({})).await?;
    assert_eq!(skipped.status.as_u16(), 202, "{}", skipped.body);
    assert_eq!(skipped.body["status"], "skipped", "{}", skipped.body);
    assert!(has_wake_skipped_for(&node.admin, &cid, "company_paused").await?);
    let start = node
        .admin
        .post(&format!("/api/agents/{agent_id}/runs"), json!({}))
        .await?;
    assert_eq!(start.status.as_u16(), 409, "{}", start.body);
    assert!(error_text(&start).contains("paused"), "{}", start.body);

    // Active again: the agent runs.
    node.admin
        .patch(&path, json!({ "status": "active" }))
        .await?
        .ok()?;
    node.start_run(&agent_id).await?;

    // Paperclip's branding route edits the name and description only.
    let branded = node
        .admin
        .patch(
            &format!("{path}/branding"),
            json!({ "name": "Acme", "description": null }),
        )
        .await?
        .ok()?;
    assert_eq!(branded["name"], "Acme", "{branded}");
    assert_eq!(branded["description"], serde_json::Value::Null);
    assert_eq!(branded["budgetMonthlyCents"], 50_000);
    node.shutdown().await
}

#[tokio::test]
async fn a_deleted_issue_and_its_comments_are_gone_after_a_restart_and_its_neighbours_stay(
) -> anyhow::Result<()> {
    let mut node = TestNode::start().await?;
    let doomed = node
        .issue(json!({ "title": "doomed", "status": "todo" }))
        .await?;
    let doomed_id = str_field(&doomed, "id");
    let identifier = str_field(&doomed, "identifier");
    let child = node
        .issue(json!({ "title": "child", "parentId": doomed_id }))
        .await?;
    let child_id = str_field(&child, "id");
    let blocked = node
        .issue(json!({ "title": "blocked", "blockedByIssueIds": [doomed_id] }))
        .await?;
    let blocked_id = str_field(&blocked, "id");
    for body in ["first", "second"] {
        node.admin
            .post(
                &format!("/api/issues/{doomed_id}/comments"),
                json!({ "body": body }),
            )
            .await?
            .ok()?;
    }
    let kept_comment = node
        .admin
        .post(
            &format!("/api/issues/{child_id}/comments"),
            json!({ "body": "kept" }),
        )
        .await?
        .ok()?;

    // An agent may not delete; an administrator deletes by identifier, as Paperclip's CLI may.
    let (_, key) = node.agent("coder").await?;
    let by_agent = node
        .http()
        .with_token(&key)
        .delete(&format!("/api/issues/{doomed_id}"))
        .await?;
    assert_eq!(by_agent.status.as_u16(), 403, "{}", by_agent.body);
    let deleted = node
        .admin
        .delete(&format!("/api/issues/{identifier}"))
        .await?
        .ok()?;
    assert_eq!(deleted["id"], doomed_id.as_str(), "{deleted}");

    node.restart().await?;
    for path in [
        format!("/api/issues/{doomed_id}"),
        format!("/api/issues/{identifier}"),
        format!("/api/issues/{doomed_id}/comments"),
    ] {
        let gone = node.admin.get(&path).await?;
        assert_eq!(gone.status.as_u16(), 404, "{path}: {}", gone.body);
        assert!(error_text(&gone).contains(' '), "{}", gone.body);
    }
    let again = node
        .admin
        .delete(&format!("/api/issues/{doomed_id}"))
        .await?;
    assert_eq!(again.status.as_u16(), 404, "{}", again.body);
    let child = node
        .admin
        .get(&format!("/api/issues/{child_id}"))
        .await?
        .ok()?;
    assert_eq!(child["parentId"], serde_json::Value::Null, "{child}");
    let blocked = node
        .admin
        .get(&format!("/api/issues/{blocked_id}"))
        .await?
        .ok()?;
    assert_eq!(blocked["blockedByIssueIds"], json!([]), "{blocked}");
    let comments = node
        .admin
        .get(&format!("/api/issues/{child_id}/comments"))
        .await?
        .ok()?;
    assert_eq!(comments[0]["id"], kept_comment["id"], "{comments}");
    let list = node
        .admin
        .get(&format!("/api/companies/{}/issues", node.company_id))
        .await?
        .ok()?;
    let ids: Vec<&str> = list
        .as_array()
        .map(|l| l.iter().filter_map(|i| i["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(!ids.contains(&doomed_id.as_str()), "{list}");
    assert!(ids.contains(&child_id.as_str()) && ids.contains(&blocked_id.as_str()));
    // The audit chain still verifies with the deletion in it.
    let audit = node.admin.get("/api/audit/verify").await?.ok()?;
    assert_eq!(audit["ok"], true, "{audit}");
    node.shutdown().await
}

#[tokio::test]
async fn an_issue_a_run_holds_is_not_deleted_under_it() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let session = agent_session(&node, "coder").await?;
    let issue = todo_issue(&node, "held").await?;
    session
        .http
        .post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": session.agent_id, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
    let refused = node.admin.delete(&format!("/api/issues/{issue}")).await?;
    assert_eq!(refused.status.as_u16(), 409, "{}", refused.body);
    assert!(
        error_text(&refused).contains("force-release"),
        "{}",
        refused.body
    );
    let still = node
        .admin
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    assert_eq!(still["status"], "in_progress");
    node.shutdown().await
}
