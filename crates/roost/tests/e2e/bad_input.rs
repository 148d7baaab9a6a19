//! Bad input: each case gets its documented code and a JSON body, and changes nothing.

use reqwest::Method;
use serde_json::{json, Value};

use roost_testkit::{Reply, TestNode};

use crate::support::*;

/// Asserts the reply's status and error code, and that the activity log did not move.
async fn assert_refused(
    node: &TestNode,
    head_before: u64,
    reply: Reply,
    status: u16,
    code: &str,
) -> anyhow::Result<()> {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.body);
    assert_eq!(reply.code(), code, "{}", reply.body);
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        reply.body
    );
    assert_eq!(
        activity_head(node).await?,
        head_before,
        "a refused request changed state"
    );
    Ok(())
}

async fn issue_count(node: &TestNode) -> anyhow::Result<usize> {
    let list = node
        .admin
        .get(&format!("/api/companies/{}/issues", node.company_id))
        .await?
        .ok()?;
    Ok(list.as_array().map(Vec::len).unwrap_or(0))
}

fn issues_path(node: &TestNode) -> String {
    format!("/api/companies/{}/issues", node.company_id)
}

#[tokio::test]
async fn malformed_json_is_a_400() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let head = activity_head(&node).await?;
    let reply = node
        .admin
        .raw(
            Method::POST,
            &issues_path(&node),
            Some(br#"{"title": "x""#.to_vec()),
        )
        .await?;
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("malformed JSON"),
        "{}",
        reply.body
    );
    assert_refused(&node, head, reply, 400, "bad_request").await?;
    assert_eq!(issue_count(&node).await?, 0);
    node.shutdown().await
}

#[tokio::test]
async fn unknown_fields_are_a_400_naming_the_field() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let head = activity_head(&node).await?;
    let reply = node
        .admin
        .post(
            &issues_path(&node),
            json!({ "title": "x", "titel": "typo" }),
        )
        .await?;
    assert!(
        reply.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("titel"),
        "{}",
        reply.body
    );
    assert_refused(&node, head, reply, 400, "bad_request").await?;
    assert_eq!(issue_count(&node).await?, 0);
    node.shutdown().await
}

#[tokio::test]
async fn wrong_types_are_a_400() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let head = activity_head(&node).await?;
    for body in [
        json!({ "title": 42 }),
        json!({ "title": "x", "status": "finished" }),
        json!({ "title": "x", "blockedByIssueIds": "a" }),
    ] {
        let reply = node.admin.post(&issues_path(&node), body).await?;
        assert_refused(&node, head, reply, 400, "bad_request").await?;
    }
    assert_eq!(issue_count(&node).await?, 0);
    node.shutdown().await
}

#[tokio::test]
async fn an_oversized_body_is_a_413() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let head = activity_head(&node).await?;
    let huge = json!({ "title": "big", "description": "x".repeat(2 * 1024 * 1024) });
    let reply = node.admin.post(&issues_path(&node), huge).await?;
    assert_refused(&node, head, reply, 413, "payload_too_large").await?;
    assert_eq!(issue_count(&node).await?, 0);
    node.shutdown().await
}

#[tokio::test]
async fn a_missing_or_invalid_token_is_a_401() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let head = activity_head(&node).await?;
    let anonymous = node.http();
    let reply = anonymous
        .post(&issues_path(&node), json!({ "title": "x" }))
        .await?;
    assert_refused(&node, head, reply, 401, "unauthorized").await?;
    let forged = node.http().with_token("rst_admin_0000");
    let reply = forged
        .post(&issues_path(&node), json!({ "title": "x" }))
        .await?;
    assert_refused(&node, head, reply, 401, "unauthorized").await?;
    let reply = forged.get("/api/companies").await?;
    assert_refused(&node, head, reply, 401, "unauthorized").await?;
    assert_eq!(issue_count(&node).await?, 0);
    node.shutdown().await
}

/// An agent of one company sees another company's objects as absent, for reads and writes.
#[tokio::test]
async fn another_companys_ids_are_not_found() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let foreign_issue = todo_issue(&node, "not yours").await?;
    let other = node
        .admin
        .post(
            "/api/companies",
            json!({ "name": "Other Corp", "issuePrefix": "OTH" }),
        )
        .await?
        .ok()?;
    let other_id = str_field(&other, "id");
    let outsider = node
        .admin
        .post(
            &format!("/api/companies/{other_id}/agents"),
            json!({ "name": "outsider" }),
        )
        .await?
        .ok()?;
    let key = node
        .admin
        .post(
            &format!("/api/agents/{}/keys", str_field(&outsider, "id")),
            json!({}),
        )
        .await?
        .ok()?;
    let outsider_http = node
        .http()
        .with_token(key["token"].as_str().unwrap_or_default());

    let head = activity_head(&node).await?;
    let reads = [
        format!("/api/issues/{foreign_issue}"),
        format!("/api/companies/{}/issues", node.company_id),
        format!("/api/companies/{}/agents", node.company_id),
        format!("/api/issues/{foreign_issue}/comments"),
    ];
    for path in reads {
        let reply = outsider_http.get(&path).await?;
        assert_refused(&node, head, reply, 404, "not_found").await?;
    }
    let reply = outsider_http
        .post(
            &format!("/api/issues/{foreign_issue}/comments"),
            json!({ "body": "hi" }),
        )
        .await?;
    assert_refused(&node, head, reply, 404, "not_found").await?;
    let reply = outsider_http
        .post(&issues_path(&node), json!({ "title": "planted" }))
        .await?;
    assert_refused(&node, head, reply, 404, "not_found").await?;
    let reply = outsider_http
        .patch(
            &format!("/api/issues/{foreign_issue}"),
            json!({ "title": "mine" }),
        )
        .await?;
    assert_refused(&node, head, reply, 404, "not_found").await?;
    let companies = outsider_http.get("/api/companies").await?.ok()?;
    assert_eq!(
        companies.as_array().map(Vec::len),
        Some(1),
        "an agent lists only its own company"
    );
    node.shutdown().await
}

#[tokio::test]
async fn a_status_change_that_breaks_an_invariant_is_a_422() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "unassigned").await?;
    let before = node
        .admin
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    let head = activity_head(&node).await?;
    let reply = node
        .admin
        .patch(
            &format!("/api/issues/{issue}"),
            json!({ "status": "in_progress" }),
        )
        .await?;
    assert_eq!(
        reply.body["details"]["rule"],
        json!("in_progress_needs_assignee")
    );
    assert_refused(&node, head, reply, 422, "invariant_violation").await?;
    let (agent, _) = node.agent("somebody").await?;
    let reply = node
        .admin
        .patch(
            &format!("/api/issues/{issue}"),
            json!({ "assigneeAgentId": agent, "assigneeUserId": "bob" }),
        )
        .await?;
    assert_eq!(reply.body["details"]["rule"], json!("single_assignee"));
    let head = activity_head(&node).await?;
    assert_refused(&node, head, reply, 422, "invariant_violation").await?;
    let after = node
        .admin
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    assert_eq!(after, before);
    node.shutdown().await
}

#[tokio::test]
async fn a_self_blocking_blocked_by_is_a_422() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "self").await?;
    let head = activity_head(&node).await?;
    let reply = node
        .admin
        .patch(
            &format!("/api/issues/{issue}"),
            json!({ "blockedByIssueIds": [issue] }),
        )
        .await?;
    assert_eq!(reply.body["details"]["rule"], json!("self_block"));
    assert_refused(&node, head, reply, 422, "invariant_violation").await?;
    let after = node
        .admin
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    assert_eq!(after["blockedByIssueIds"], json!([]));
    node.shutdown().await
}

#[tokio::test]
async fn a_cyclic_blocked_by_is_a_422() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let a = todo_issue(&node, "a").await?;
    let b = node
        .issue(json!({ "title": "b", "blockedByIssueIds": [a] }))
        .await?;
    let c = node
        .issue(json!({ "title": "c", "blockedByIssueIds": [str_field(&b, "id")] }))
        .await?;
    let head = activity_head(&node).await?;
    let reply = node
        .admin
        .patch(
            &format!("/api/issues/{a}"),
            json!({ "blockedByIssueIds": [str_field(&c, "id")] }),
        )
        .await?;
    assert_eq!(reply.body["details"]["rule"], json!("blocked_by_cycle"));
    assert_refused(&node, head, reply, 422, "invariant_violation").await?;
    let after: Value = node.admin.get(&format!("/api/issues/{a}")).await?.ok()?;
    assert_eq!(after["blockedByIssueIds"], json!([]));
    node.shutdown().await
}

#[tokio::test]
async fn unknown_routes_and_ids_get_json_404s() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let reply = node.admin.get("/api/nope").await?;
    assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"));
    let reply = node.admin.get("/api/issues/TST-999").await?;
    assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"));
    node.shutdown().await
}
